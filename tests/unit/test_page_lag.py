"""`python -m tools.page_lag`: the served app in Chromium, timed while an arena streams (numbers, no time asserted)."""

import pytest

from tests.helpers import require_browser, ui_config

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_page_lag_times_the_page_while_a_run_streams():
    require_browser()
    ui_config()  # skips where the bundled pair is not built
    from tools import page_lag

    (row,) = page_lag.run(max_new_tokens=16, runs=1)
    assert set(row) == {"run", "wall_s", "busy_s", "busy_share", "answer_median_ms", "answer_max_ms"}
    assert row["wall_s"] > 0 and 0 < row["busy_s"] and row["answer_max_ms"] >= row["answer_median_ms"] > 0
