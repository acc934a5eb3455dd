"""A real browser on the served app, a long reply streaming: the page keeps up with the frames, so Stop lands while the
run goes on, and the page ends on every token of the run. gradio drops no frame: each waits its turn in the page,
which draws every one whole (the reply's markup, the stats, the charts when due), and a click waits behind them all.
Sent faster than a loaded machine's page drew them, they piled up: a 400-token chat reply on the default model kept
Stop waiting 45 s, the run long over. The page now says which frame it drew, and the next waits for it
(`specui.ui.pages.Pages`)."""

from __future__ import annotations

import threading
import time

import pytest

from specui.loading import PairCache
from specui.ui.session import Showcase
from tests.helpers import served_browser, ui_config, wait_until
from tools.screenshot import FINISHED, open_page, set_number

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # drives Chromium on the served app

MAX_NEW_TOKENS = 512  # the app's most
STOP_AT = 120  # the tokens decoded when Stop is clicked
ROUND_S = 0.1  # each round made this much slower: the stdlib pair decoding at a larger model's pace


class Paced(Showcase):
    """The app's showcase with rounds `ROUND_S` slower, its runs, the frames it sent and those the page said it drew
    kept to look at."""

    def __init__(self, config):
        super().__init__(config, PairCache())
        self.runs, self.started, self.sent, self.drawn = [], threading.Event(), 0, 0
        said = self.pages.drawn

        def drawn(frame: str) -> None:
            self.drawn = max(self.drawn, int(frame.rpartition(":")[2]))
            said(frame)

        self.pages.drawn = drawn
        decode = self.calls.decode

        def sent(*args, **kwargs):  # the frames as the page is sent them (paced in the server's process)
            for frame, run in decode(*args, **kwargs):
                self.sent += 'class="specui-frame"' in frame.stats  # a streamed frame, marked for the page
                yield frame, run

        self.calls.decode = sent

    def run(self, prompt, settings, **kwargs):
        for frame, run in super().run(prompt, settings, **kwargs):
            if not self.runs or self.runs[-1] is not run:
                self.runs.append(run)
            yield frame, run

    def _drive(self, run, stream, *args):
        return super()._drive(run, self._paced(stream), *args)

    def _paced(self, stream):
        try:
            for rnd in stream:
                self.started.set()
                time.sleep(ROUND_S)
                yield rnd
        finally:
            stream.close()


def test_the_page_keeps_up_with_a_long_reply_so_stop_lands_while_it_streams():
    showcase = Paced(ui_config())
    with served_browser(ui_config(), showcase=showcase) as (browser, url):
        page = open_page(browser, url)
        set_number(page, "max-new-tokens", MAX_NEW_TOKENS)
        page.fill("#prompt textarea", "import os\nimport sys\n\n\ndef main(argv):\n")
        page.click("#send")
        assert showcase.started.wait(120)
        run = showcase.runs[-1]
        wait_until(lambda: len(run.spec.token_ids) >= STOP_AT or run.phase != "speculative",
                   f"the run to reach {STOP_AT} tokens", timeout_s=300)
        clicked_at = len(run.spec.token_ids)
        assert clicked_at < MAX_NEW_TOKENS // 3, "the run went too fast to be stopped in the middle"
        page.evaluate("() => document.querySelector('#stop').click()")  # a click: one task of the page's
        wait_until(lambda: run.phase != "speculative", "the run to stop or end", timeout_s=300,
                   pause=lambda _: time.sleep(0.01))  # looked at often: the frames drawn as Stop landed
        sent, drawn, stopped_at = showcase.sent, showcase.drawn, len(run.spec.token_ids)
        assert run.phase == "stopped", f"the run ended by itself ({stopped_at} tokens) before Stop landed"
        assert stopped_at < MAX_NEW_TOKENS, f"Stop clicked at {clicked_at} tokens landed at {stopped_at}"
        # the page drew every frame but the last two as the click landed: none piled up behind it
        assert drawn and sent - drawn <= 2, f"{sent} frames sent, {drawn} drawn as Stop landed"
        page.wait_for_function(FINISHED, timeout=300_000)
        shown = page.evaluate("() => [...document.querySelectorAll('#chat [data-testid=bot]')].pop()"
                              ".querySelectorAll('.specui-out .tok:not(.tok-rejected)').length")
        assert shown == len([v for v in run.spec_views if v.kind != "rejected"])  # every token, at the end
