"""tests/waits.py's `wait_until`, the one poll every test uses: it looks once more when its time is up, and says what
it waited for as things stood then (test_app_served's runs still decoding, threads still there)."""

from __future__ import annotations

import time

import pytest

from tests.waits import wait_until


def test_a_condition_met_by_the_look_after_the_deadline_is_no_failure():
    looks = []
    wait_until(lambda: looks.append(time.monotonic()) or len(looks) == 2, "the second look", timeout_s=0.05,
               pause=lambda seconds: time.sleep(0.2))  # the pause outlasts the deadline: the second look is after it
    assert len(looks) == 2


def test_the_failure_says_what_was_awaited_as_it_stood_when_the_wait_gave_up():
    looks = []
    with pytest.raises(AssertionError, match=r"waited 0.1 s for the runs to stop \(\d\d* looks\)") as failed:
        wait_until(lambda: looks.append(1), lambda: f"the runs to stop ({len(looks)} looks)", timeout_s=0.1)
    assert f"({len(looks)} looks)" in str(failed.value) and len(looks) > 1
    with pytest.raises(AssertionError, match=r"waited 0 s for the runs to start$"):
        wait_until(lambda: False, "the runs to start", timeout_s=0)
