"""What the page is told between a pair's load and its first token: a pair's first run warms it up (each path once,
`Showcase.warm_up`: 1-3 s for the chat preset on a loaded CPU), and the page said the load's last line, "Ready",
all that while. Now a frame says it warms up, once per pair: a warm pair's run goes straight to its tokens."""

from __future__ import annotations

import re

from specui.loading import PairCache
from specui.ui import chat_view
from specui.ui.request import Settings
from specui.ui.session import Showcase
from tests.helpers import ui_config


def statuses(showcase: Showcase) -> list[str]:
    """The status line of each frame of one short run, up to its first token's frame."""
    said = []
    for frame, run in showcase.run("def f(x):", Settings(max_new_tokens=4, num_draft_tokens=2), figures=False):
        said.append(re.sub(r"<[^>]+>", "", frame.stats).strip())
        if run.spec_views:
            break
    return said


def test_a_pairs_first_run_says_it_warms_up_and_a_warm_pairs_run_does_not():
    showcase = Showcase(ui_config(), PairCache())
    first = statuses(showcase)
    assert first.index("Ready") + 1 == first.index(chat_view.WARMING), first  # after the load, before the tokens
    assert first.count(chat_view.WARMING) == 1
    assert "path" not in chat_view.WARMING and "once" in chat_view.WARMING  # the page's words: no engine's jargon
    assert chat_view.WARMING not in statuses(showcase)  # warm now: no such frame
