"""Closed tabs leave the server's memory (`specui.ui.closed_sessions`): gradio keeps every session's record (its copy of
the page's components, about 1 MB after two chat turns) until 10,000 have come, so an app serving for weeks grew by
gigabytes. A record goes once its tab closed and gradio's hour for reopening it passed unused; open pages and pages
that may still come back keep theirs. Gradio's real state holder; the served app in a real Chromium."""

from __future__ import annotations

import datetime
import time

import pytest

from specui.ui import closed_sessions

HOUR = datetime.timedelta(hours=1)


def holder_of_three():
    """Gradio's real state holder over a real page with a gr.State: sessions 'closed-long-ago', 'closed-just-now' and
    'open-long-ago' (idle for two hours), each with its state set; and the list of values deleted."""
    import gradio as gr
    from gradio.state_holder import StateHolder

    deleted = []
    with gr.Blocks() as demo:
        memory = gr.State(None, delete_callback=deleted.append)
        gr.Textbox()
    holder = StateHolder()
    holder.set_blocks(demo)
    now = datetime.datetime.now()
    for key, closed, idle in (("closed-long-ago", True, 2 * HOUR), ("closed-just-now", True, HOUR / 60),
                              ("open-long-ago", False, 2 * HOUR)):
        holder[key][memory._id] = f"{key}'s memory"
        holder[key].is_closed = closed
        holder.time_last_used[key] = now - idle
    return holder, deleted, now


def test_a_session_closed_for_longer_than_gradio_keeps_it_is_dropped_and_no_other():
    holder, deleted, now = holder_of_three()
    assert closed_sessions.sweep(holder, now) == 1
    assert list(holder.session_data) == ["closed-just-now", "open-long-ago"]  # may still come back; still open
    assert list(holder.time_last_used) == ["closed-just-now", "open-long-ago"]
    assert deleted == ["closed-long-ago's memory"]  # its state went through its delete callback, as gradio's expiry
    assert closed_sessions.sweep(holder, now) == 0
    assert closed_sessions.sweep(holder, now + HOUR) == 1 and list(holder.session_data) == ["open-long-ago"]


def test_a_closed_session_used_again_is_kept_for_another_hour():
    """Gradio marks a session closed when its heartbeat drops, and never unmarks it: a page that comes back (a laptop
    woken, a network back) is used again, and its time of last use is what counts."""
    holder, _, _ = holder_of_three()
    holder["closed-long-ago"]  # used again: gradio's __getitem__ records the time
    assert closed_sessions.sweep(holder, datetime.datetime.now()) == 0


@pytest.mark.slow
@pytest.mark.browser
def test_a_closed_tab_of_the_served_app_leaves_its_record_and_an_open_one_keeps_it(monkeypatch):
    """Two visitors chat; one closes the tab. With gradio's own test timings (GRADIO_IS_E2E_TEST: a closed session's
    state kept 1 s, heartbeats every 0.25 s) and a sweep every 0.2 s, the closed one's record goes and the open one's
    stays, and the open page goes on chatting."""
    from playwright.sync_api import sync_playwright

    from tests.helpers import require_browser, ui_config
    from tools.screenshot import launch_chromium, open_page, run_prompt, served_demo

    require_browser()
    monkeypatch.setenv("GRADIO_IS_E2E_TEST", "1")
    monkeypatch.setattr(closed_sessions, "SWEEP_SECONDS", 0.2)
    with served_demo(ui_config(), preload=False) as (demo, url), sync_playwright() as p:
        browser = launch_chromium(p)
        try:
            staying, leaving = (open_page(browser, url) for _ in range(2))
            for page in (staying, leaving):
                run_prompt(page, "def main(argv):")
            assert len(demo.state_holder.session_data) == 2
            leaving.close()
            deadline = time.monotonic() + 30
            while len(demo.state_holder.session_data) > 1:
                assert time.monotonic() < deadline, "the closed tab's session record stayed"
                time.sleep(0.1)
            run_prompt(staying, "import os\n")  # the open page's session is whole
            assert len(demo.state_holder.session_data) == 1
        finally:
            browser.close()


@pytest.mark.slow  # two launches of a real server
def test_the_sweep_joins_gradios_expiry_and_leaves_no_thread_behind():
    """The sweep runs inside gradio's own expiry of state, on its server's event loop (gradio reads, adds and expires
    sessions there without a lock: a sweep on a thread of its own could race it); the thread that puts it there ends
    once it has. An earlier version's thread woke every minute for the life of the process. A relaunched app gets
    the sweep on its new state holder too. The server is real."""
    import threading

    from specui.ui.blocks import build, launch
    from tests.helpers import ui_config
    from tools.screenshot import NO_PROBE, free_port

    demo = build(ui_config(), preload=False)
    for _ in range(2):  # launched, closed, launched again
        before = set(threading.enumerate())
        launch(demo, server_name="127.0.0.1", server_port=free_port(), prevent_thread_lock=True, quiet=True,
               **NO_PROBE)
        [sweeper] = [t for t in set(threading.enumerate()) - before if t.name == "specui-closed-sessions"] or [None]
        if sweeper is not None:
            sweeper.join(timeout=10)
            assert not sweeper.is_alive(), "the thread that adds the sweep lives on"
        assert demo.state_holder.delete_all_expired_state.__name__ == "expire_and_sweep"
        demo.close()


def test_a_launch_that_returns_between_the_threads_two_looks_still_gets_the_sweep():
    """The thread looks for the state holder, then asks whether the launch has returned; a launch that made its holder
    and returned between those two looks (a moment, but the thread asks every 50 ms for as long as a launch takes)
    ended the thread with no sweep, and the app kept every closed tab's record for good. Gradio's real Blocks and
    state holder; the launch's return is made to fall in that moment."""
    import threading

    import gradio as gr
    from gradio.state_holder import StateHolder

    with gr.Blocks() as demo:
        gr.Textbox()

    class ReturnsAsAsked(threading.Event):  # the launch makes its state holder and returns as the thread asks
        def is_set(self) -> bool:
            if not super().is_set():
                StateHolder().set_blocks(demo)
                self.set()
            return True

    closed_sessions.keep_swept(demo, launched=ReturnsAsAsked()).join(timeout=10)
    assert demo.state_holder.delete_all_expired_state.__name__ == "expire_and_sweep"
