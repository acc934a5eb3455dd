"""An experiment's table has a speedup column only where its runs were timed against plain decoding: the temperature
sweep's runs are not (`lesson.temperature_sweep` measures acceptance), and its table showed a column of "–" alone, which
a student read as a measurement that failed. Hand-written points, no model."""

from __future__ import annotations

import re

from specui.lesson import Point
from specui.ui.teach_view import render_points


def _point(label: str, speedup: float | None) -> Point:
    return Point(label=label, k=4, temperature=0.6, drafter="draft", tokens=32, rounds=10, acceptance_rate=0.4,
                 alpha=0.6, mean_accept_prob=0.55, tokens_per_round=3.2, tokens_per_s=80.0,
                 plain_tokens_per_s=None if speedup is None else 50.0, speedup=speedup, cost_ratio=0.1,
                 theory_speedup=None)


def _heads(html: str) -> list[str]:
    return re.findall(r"<th[^>]*>(.*?)</th>", html)


def test_a_table_of_untimed_runs_has_no_speedup_column_and_says_why():
    untimed = render_points([_point("T=0", None), _point("T=0.6", None)], seed="seed 0")
    assert "speedup" not in _heads(untimed) and "–" not in re.findall(r"<td[^>]*>(.*?)</td>", untimed)
    assert "not timed against plain decoding" in untimed and "Seed 0" in untimed
    timed = render_points([_point("K=1", 1.25), _point("K=2", None)])  # one timed: the column stays, "–" where not
    assert _heads(timed)[-1] == "speedup" and "1.25×" in timed and "not timed" not in timed
    rows = re.findall(r'<tr class="teach-point">.*?</tr>', timed)
    assert all(len(re.findall(r"<td", row)) == len(_heads(timed)) for row in rows)
