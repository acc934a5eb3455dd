"""A real browser on the served app: `tools.screenshot.run_prompt` (and its FINISHED) returns once the run's event has
answered, not at the reply's last frame. A run's last answer (its download, the way to the Teach tab, the final charts)
comes after that frame; on a loaded machine it came later still, and a test that went on at the last frame sent its
next message while the run was still being answered (refused, or wiped from the chat by the late answer)."""

from __future__ import annotations

import time

import pytest

from tools.screenshot import run_prompt, set_number

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # drives Chromium on the served app


def test_run_prompt_returns_once_the_runs_last_answer_is_on_the_page(monkeypatch, fresh_page):
    from specui.ui.exports import Exports

    write = Exports.write

    def slow_write(self, *args, **kwargs):  # the run's download written as on a loaded machine: its last answer late
        time.sleep(3)
        return write(self, *args, **kwargs)

    monkeypatch.setattr(Exports, "write", slow_write)
    page = fresh_page  # a session of its own on the folder's server (conftest.py)
    set_number(page, "max-new-tokens", 8)
    for prompt in ("import os\n", "import sys\n"):  # the second: sent as soon as the first has returned
        run_prompt(page, prompt)
        assert page.locator("#chat-export a").first.is_visible()  # the run's download: its last answer
        assert page.locator("#chat button[aria-label='Retry']").is_enabled()
    assert page.locator("#chat .specui-prompt").count() == 2
    assert page.locator("#chat .specui-prompt").last.evaluate("e => e.textContent") == "import sys\n"
