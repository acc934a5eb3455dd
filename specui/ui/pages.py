"""What each streaming run's page has drawn, so that the server sends a frame no faster than the page draws them:
`Pages`, kept by the `Showcase`, told by the page (frames.js, through the app's `/drawn` endpoint). No gradio here."""

from __future__ import annotations

import secrets
import threading
import time


class Pages:
    """What each run's page has drawn: the last frame it said it drew (`drawn`, the app's `/drawn` endpoint, which
    the page's frames.js calls). gradio drops no frame: each waits its turn in the page, which draws every one whole,
    and a click (Stop) waits behind them all. A frame sent faster than the page draws them piles up: on a loaded
    2-core machine a 400-token chat reply kept the page 45 s behind, Stop landing after the run had ended
    (tests/app/test_browser_chat_stop.py). So once a run's page has said it drew a frame, the next is sent only when
    it has drawn all but the last one sent, or after `ACK_WAIT_S` without word from it (an answer lost); a client
    that never says (the API, gradio's client) is sent frames by the throttle alone."""

    ACK_WAIT_S = 5.0

    def __init__(self):
        self._drawn: dict[str, int] = {}
        self._guard = threading.Lock()

    def start(self) -> str:
        """A new run's tag, which its frames carry (`mark`)."""
        tag = secrets.token_hex(8)
        with self._guard:
            self._drawn[tag] = 0
        return tag

    def end(self, tag: str) -> None:
        with self._guard:
            self._drawn.pop(tag, None)

    def drawn(self, frame: str) -> None:
        """The page drew `frame` ("tag:number", from the frame's mark); anything else is ignored."""
        tag, _, number = str(frame).partition(":")
        if not (number.isascii() and number.isdigit() and len(number) < 10):
            return
        with self._guard:
            if tag in self._drawn:
                self._drawn[tag] = max(self._drawn[tag], int(number))

    def ready(self, tag: str, sent: int, since: float) -> bool:
        """Whether the run `tag`, `sent` frames sent, the last at `since` (time.monotonic), may send the next."""
        with self._guard:
            drawn = self._drawn.get(tag, 0)
        return drawn == 0 or drawn >= sent - 1 or time.monotonic() - since >= self.ACK_WAIT_S

    @staticmethod
    def mark(tag: str, number: int) -> str:
        """The frame's mark, in its stats line: the page reads it and says it drew it."""
        return f'<span class="specui-frame" data-frame="{tag}:{number}" hidden></span>'
