"""The Chat tab in a real browser on one served app, shared by this folder's test files (conftest.py's package
fixtures: one server and one browser for them all, where each file started its own). test_browser.py and
test_browser_conversation.py go on on one page, in that order (each test from the page the one before left); the
other files each open a page of their own on the same server. The shared prompt and waits are here.
"""

from __future__ import annotations

from tools.screenshot import FINISHED

PROMPT = "import os\nimport sys\n\n\ndef main(argv):\n"


def send_and_finish(page, prompt: str):
    """Send `prompt` and wait until its run has finished (`run_prompt_done`), once its message shows: the page may
    show an earlier run's reply, finished (a file of this folder run before the one at hand), which passed the wait at
    once, before the run had even started."""
    before = page.locator("#chat .specui-prompt").count()
    page.fill("#prompt textarea", prompt)
    page.click("#send")
    page.wait_for_function("n => document.querySelectorAll('#chat .specui-prompt').length > n", arg=before,
                           timeout=120_000)
    run_prompt_done(page)


def run_prompt_done(page):
    """Wait until the last reply has no caret (the run finished); say what the page shows if it never does."""
    try:
        page.wait_for_function(FINISHED, timeout=120_000)
    except Exception as e:
        raise AssertionError(f"the run did not finish: chat={page.locator('#chat').inner_text()[-500:]!r} "
                             f"stats={page.locator('#stats').inner_text()!r}") from e
