"""chat_page's `run_prompt_done` without a browser: a page whose run never ends fails the wait within its bounds, also
when something on it keeps changing (a timer in the stats line), where the wait went on while anything changed."""

from __future__ import annotations

import time

import pytest

from tests.app.chat_page import run_prompt_done

playwright = pytest.importorskip("playwright.sync_api")


class StuckPage:
    """A page whose run never finishes; with `ticking`, its stats line changes at every look (a clock)."""

    def __init__(self, ticking: bool):
        self.ticking, self.looks = ticking, 0

    def evaluate(self, _script):
        self.looks += 1
        if self.looks > 100:
            raise RuntimeError("run_prompt_done waited on and on")
        return [3, 40, f"elapsed {self.looks if self.ticking else 0} s"]

    def wait_for_function(self, _script, timeout):
        assert timeout > 0  # playwright reads 0 as no bound at all
        time.sleep(timeout / 1000)
        raise playwright.TimeoutError(f"Timeout {timeout}ms exceeded.")

    def locator(self, _selector):
        return type("Text", (), {"inner_text": lambda _self: "stuck"})()


def test_a_page_unchanged_fails_the_wait():
    with pytest.raises(AssertionError, match="unchanged for 0.2 s"):
        run_prompt_done(StuckPage(ticking=False), still_s=0.2)


def test_a_stuck_run_whose_stats_keep_ticking_fails_within_the_cap():
    with pytest.raises(AssertionError, match="still changing after 0.5 s in all"):
        run_prompt_done(StuckPage(ticking=True), still_s=0.05, cap_s=0.5)


def test_the_cap_is_ten_times_the_still_bound_unless_given():
    with pytest.raises(AssertionError, match="still changing after 0.5 s in all"):
        run_prompt_done(StuckPage(ticking=True), still_s=0.05)
