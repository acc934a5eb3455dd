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


def marked_run(showcase, *, page: bool = True, **settings):
    """A run of the bundled pair as a page gets it (`session.decode`, `page`): the page says it drew the first frame
    marked, then nothing more. Returns (the marks' numbers, the last frame, the run)."""
    import re

    from specui.ui.session import Settings, decode

    marks, last = [], None
    for frame, run in decode(showcase, "import os\n", Settings(max_new_tokens=48, num_draft_tokens=1, **settings),
                             page=page):
        if said := re.search(r'data-frame="([0-9a-f]+:[0-9]+)"', frame.stats):
            marks.append(said.group(1))
            if len(marks) == 1:
                showcase.pages.drawn(said.group(1))  # the page drew the first, then says nothing more
        last = frame
    return [m.rpartition(":")[2] for m in marks], last, run


def paced_showcase():
    from specui.loading import PairCache
    from specui.ui.session import Showcase
    from tests.helpers import ui_config

    showcase = Showcase(ui_config(), PairCache(), text_interval=0, chart_interval=0)
    showcase.pages.ACK_WAIT_S = 600.0  # no answer counts as lost within the run
    return showcase


def test_a_run_sends_no_frame_past_the_last_but_one_its_page_drew():
    """The run's own wiring (`session.decode` for a page): once the page has said it drew frame 1, frames 2 and 3 go
    and no more until it says it drew another, yet the last frame (every token) always comes. Without the wait a frame
    goes every round (a fast machine's page keeps up, so the browser test alone passes there without it)."""
    showcase = paced_showcase()
    marks, last, run = marked_run(showcase)
    assert len(run.spec.rounds) > 4, "too few rounds to tell"
    assert marks == ["1", "2", "3"], marks
    assert last.done and "specui-frame" not in last.stats  # the final frame, unmarked, is always sent
    assert last.figures  # the final charts come whole
    assert showcase.pages._drawn == {}  # the run's tag is forgotten at its end


def test_a_client_that_is_no_page_gets_every_frame_unmarked():
    """A run for an API client (`page=False`: gradio's client on /chat, /generate) carries no mark in its stats, and
    is paced by the throttle alone; no tag is kept for it."""
    showcase = paced_showcase()
    marks, last, run = marked_run(showcase, page=False)
    assert marks == [] and last.done and len(run.spec.rounds) > 4
    assert showcase.pages._drawn == {}


def test_the_charts_of_a_frame_left_out_go_with_the_next_one_sent():
    """A frame the page is not ready for is left out whole, but its charts and table (sent with some frames only) go
    with the next frame sent that has none of its own, rather than wait for the run's end; the last frame included,
    so that a run ending in an error (a frame with no charts) leaves none of them behind."""
    from specui.ui.pages import Paced
    from specui.ui.runs import Frame

    pages = Pages()
    Paced(pages).frames(iter(()))  # frames never asked for (a call closed before it began): no tag kept
    assert pages._drawn == {}
    paced = Paced(pages)

    def frames():  # the page draws frame 1 at once, then nothing until frame 3 is drawn, as frame 5 comes
        yield Frame("1", ""), None
        pages.drawn(f"{paced.tag}:1")
        yield Frame("2", ""), None
        yield Frame("3", ""), None
        yield Frame("4", "", figures={"a": 4}, table=[4]), None  # 1 drawn of 3 sent: left out
        pages.drawn(f"{paced.tag}:3")
        yield Frame("5", "", table=[5]), None
        yield Frame("6", "", figures={"a": 6}), None
        yield Frame("7", "", figures={"a": 7}), None  # 3 drawn of 5 sent: left out, and the run ends
        yield Frame("end", "", done=True), None  # no charts of its own (as an error's): it takes 7's

    sent = [frame for frame, _ in paced.frames(frames())]
    assert [(f.message, f.figures, f.table) for f in sent] == [
        ("1", None, None), ("2", None, None), ("3", None, None), ("5", {"a": 4}, [5]), ("6", {"a": 6}, None),
        ("end", {"a": 7}, None)]
    assert [f.stats for f in sent[:-1]] == [Pages.mark(paced.tag, n) for n in range(1, 6)] and sent[-1].stats == ""
    assert pages._drawn == {}


def test_under_zero_gpu_a_stop_ends_the_workers_call_at_its_next_frame_even_one_the_page_is_not_sent():
    """Under ZeroGPU the worker never hears a Stop, so `GpuCalls.decode` ends its call at the next frame it yields.
    A page behind (the very case where Stop is pressed) is sent no frame for a while: the Stop is still heard at the
    worker's next frame, not only at the next one sent (which came no sooner than the page caught up, or the worker's
    last frame: it decoded on to its end)."""
    import threading

    from specui.ui.gpu_calls import GpuCalls
    from specui.ui.runs import Frame

    class Run:
        phase = "spec"

    class Showcase:
        pages = Pages()

        @staticmethod
        def frame(run, *, figures, final):
            return Frame(f"stopped at {run.phase}", "", done=True)

    yielded, stop = [], threading.Event()

    def worker(key, prompt, settings, history, figures, owner, gone):  # ZeroGPU's worker: never hears the Stop
        run = Run()
        for n in range(1, 101):
            yielded.append(n)
            if n == 5:
                stop.set()  # Stop, pressed while the page is behind: frames 4 on are left out (1 drawn of 3 sent)
            yield Frame(str(n), ""), run
        run.phase = "done"
        yield Frame("end", "", done=True), run

    calls = GpuCalls(Showcase())
    calls.apart, calls.on_gpu = True, worker
    Showcase.pages.ACK_WAIT_S = 600.0
    sent = []
    for frame, _ in calls.decode("hi", None, stop=stop, page=True):
        sent.append(frame.message)
        if len(sent) == 1:
            tag = frame.stats.partition('data-frame="')[2].partition(":")[0]
            Showcase.pages.drawn(f"{tag}:1")  # the page drew frame 1, then falls behind
    assert sent == ["1", "2", "3", "stopped at stopped"], sent
    assert yielded == [1, 2, 3, 4, 5], yielded  # the worker's call ended at its first frame after the Stop
    assert calls.paced == {} and calls.live == {} and Showcase.pages._drawn == {}

