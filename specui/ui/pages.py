"""What each streaming run's page has drawn, so that the server sends a frame no faster than the page draws them:
`Pages`, kept by the `Showcase`, told by the page (frames.js, through the app's `/drawn` endpoint), and `Paced`, one
page's request paced by it in the server's process. No gradio here."""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Iterator
from dataclasses import replace


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


class Paced:
    """One page's request paced by `pages` (`frames`), in the server's process: under ZeroGPU the run decodes in a
    worker process, whose copy of `Pages` never hears the page, so the frames it yields are paced here, as they come.
    `ready` tells a run in this process (a plain call) whether a frame would go now, so that it renders none that
    would not."""

    def __init__(self, pages: Pages):
        self.pages, self.sent, self.since = pages, 0, float("-inf")
        self.tag = ""  # the run's, once its frames are asked for (`frames`): a call that never starts keeps none

    def ready(self) -> bool:
        return self.pages.ready(self.tag, self.sent, self.since)

    def frames(self, frames: Iterator[tuple]) -> Iterator[tuple]:
        """(frame, run) from `frames` as the page is to be sent them: a frame the page is not ready for is left out
        (its charts and table go with the next one sent that has none of its own, the last included: an error's), each
        one sent carries its mark (`Pages.mark`), and the last (done) always goes, unmarked. The run's tag is
        forgotten at the end."""
        held: dict = {}
        self.tag = self.pages.start()
        try:
            for frame, run in frames:
                if not frame.done:
                    if not self.ready():
                        held.update({name: value for name in ("figures", "table")
                                     if (value := getattr(frame, name)) is not None})
                        continue
                    self.sent, self.since = self.sent + 1, time.monotonic()
                    frame = replace(frame, stats=frame.stats + Pages.mark(self.tag, self.sent))
                kept = {name: value for name, value in held.items() if getattr(frame, name) is None}
                frame, held = replace(frame, **kept) if kept else frame, {}
                yield frame, run
        finally:
            self.pages.end(self.tag)
