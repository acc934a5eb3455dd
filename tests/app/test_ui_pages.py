"""`specui.ui.pages.Pages`: a run's next frame waits until its page has drawn all but the last one sent; a client that
never says what it drew is sent frames by the throttle alone; what a page says is read, never trusted to be well
formed."""

from __future__ import annotations

import time

from specui.ui.pages import Pages


def test_a_frame_waits_for_the_page_to_draw_all_but_the_last_one_sent():
    pages, now = Pages(), time.monotonic()
    tag = pages.start()
    assert pages.ready(tag, 5, now)  # nothing said yet: a client that never says (the API) streams on
    pages.drawn(f"{tag}:1")
    assert not pages.ready(tag, 5, now)  # four frames undrawn: the next waits
    pages.drawn(f"{tag}:4")
    assert pages.ready(tag, 5, now)
    pages.drawn(f"{tag}:2")  # an older frame said late changes nothing
    assert pages.ready(tag, 5, now) and not pages.ready(tag, 6, now)
    assert pages.ready(tag, 6, now - Pages.ACK_WAIT_S)  # no word for ACK_WAIT_S: an answer lost, the frame goes


def test_what_a_page_says_is_read_and_its_mistakes_ignored():
    pages, now = Pages(), time.monotonic()
    tag = pages.start()
    pages.drawn(f"{tag}:3")
    for said in ("", "x", f"{tag}:", f"{tag}:²", f"{tag}:-9", f"{tag}:1e9", f"{tag}:{'9' * 40}", "other:99", None, 7):
        pages.drawn(said)
    assert not pages.ready(tag, 6, now) and pages.ready(tag, 4, now)
    pages.end(tag)
    pages.drawn(f"{tag}:9")  # a run over: its tag is forgotten, not kept by a late word
    assert pages._drawn == {}


def test_each_frame_carries_its_mark_hidden():
    assert Pages.mark("ab12", 7) == '<span class="specui-frame" data-frame="ab12:7" hidden></span>'


def test_a_run_sends_no_frame_past_the_last_but_one_its_page_drew():
    """The run's own wiring (`Showcase._drive`): once the page has said it drew frame 1, frames 2 and 3 go and no
    more until it says it drew another, yet the last frame (every token) always comes. Without the wait a frame goes
    every round (a fast machine's page keeps up, so the browser test alone passes there without it)."""
    import re

    from specui.loading import PairCache
    from specui.ui.session import Settings, Showcase
    from tests.helpers import ui_config

    showcase = Showcase(ui_config(), PairCache(), text_interval=0, chart_interval=0)
    showcase.pages.ACK_WAIT_S = 600.0  # no answer counts as lost within the run
    marks, last = [], None
    for frame, run in showcase.run("import os\n", Settings(max_new_tokens=48, num_draft_tokens=1)):
        if said := re.search(r'data-frame="([0-9a-f]+:[0-9]+)"', frame.stats):
            marks.append(said.group(1))
            if len(marks) == 1:
                showcase.pages.drawn(said.group(1))  # the page drew the first, then says nothing more
        last = frame
    assert len(run.spec.rounds) > 4, "too few rounds to tell"
    assert [m.rpartition(":")[2] for m in marks] == ["1", "2", "3"], marks
    assert last.done and "specui-frame" not in last.stats  # the final frame, unmarked, is always sent
    assert showcase.pages._drawn == {}  # the run's tag is forgotten at its end
