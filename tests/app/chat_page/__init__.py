"""The Chat tab in a real browser on one served app, shared by this folder's test files (conftest.py's package
fixtures: one server and one browser for them all, where each file started its own). test_browser.py and
test_browser_conversation.py go on on one page, in that order (each test from the page the one before left); the
other files each open a page of their own on the same server. The shared prompt and waits are here.
"""

from __future__ import annotations

from tools.screenshot import FINISHED

PROMPT = "import os\nimport sys\n\n\ndef main(argv):\n"


def send(page, prompt: str):
    """Send `prompt` and wait until its message shows in the chat (its run started or waiting for its turn)."""
    before = page.locator("#chat .specui-prompt").count()
    page.fill("#prompt textarea", prompt)
    page.click("#send")
    page.wait_for_function("n => document.querySelectorAll('#chat .specui-prompt').length > n", arg=before,
                           timeout=120_000)


def send_and_finish(page, prompt: str):
    """Send `prompt` and wait until its run has finished (`run_prompt_done`), once its message shows: the page may
    show an earlier run's reply, finished (a file of this folder run before the one at hand), which passed the wait at
    once, before the run had even started."""
    send(page, prompt)
    run_prompt_done(page)


# how far the page has got: the chat's tokens and text, and the stats line (each frame of a run changes one of them)
PROGRESS = ("() => [document.querySelectorAll('#chat .tok').length, document.querySelector('#chat').textContent.length,"
            " document.querySelector('#stats')?.textContent]")


def run_prompt_done(page, *, still_s: float = 120, cap_s: float | None = None):
    """Wait until the last reply has no caret (the run finished); say what the page shows if it never does. The bound
    scales with what is decoded: the wait goes on while the chat or the stats change (a long reply streaming on a loaded
    machine), and gives up after `still_s` seconds in which neither did, or after `cap_s` (10 × `still_s` unless given)
    in all, however the page changes: a stuck run whose page moves on something else (a timer in the stats) fails
    there rather than hanging the suite."""
    import time

    from playwright.sync_api import TimeoutError as Timeout

    cap_s = 10 * still_s if cap_s is None else cap_s
    give_up = time.monotonic() + cap_s
    seen = page.evaluate(PROGRESS)
    while True:
        try:
            page.wait_for_function(FINISHED, timeout=max(0.1, min(still_s, give_up - time.monotonic())) * 1000)
            return
        except Timeout as e:
            now = page.evaluate(PROGRESS)
            why = (f"the page unchanged for {still_s:g} s" if now == seen
                   else f"the page still changing after {cap_s:g} s in all" if time.monotonic() >= give_up else None)
            if why is None:
                seen = now  # it moved on meanwhile: still decoding, or drawing what it decoded
                continue
            raise AssertionError(f"the run did not finish, {why}: "
                                 f"chat={page.locator('#chat').inner_text()[-500:]!r} "
                                 f"stats={page.locator('#stats').inner_text()!r}") from e
