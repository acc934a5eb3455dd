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
    return re.findall(r"<th(?: [^>]*)?>(.*?)</th>", html)


def test_a_table_of_untimed_runs_has_no_speedup_column_and_says_why():
    untimed = render_points([_point("T=0", None), _point("T=0.6", None)], seed="seed 0")
    assert "speedup" not in _heads(untimed) and "–" not in re.findall(r"<td[^>]*>(.*?)</td>", untimed)
    assert "not timed against plain decoding" in untimed and "Seed 0" in untimed
    timed = render_points([_point("K=1", 1.25), _point("K=2", None)])  # one timed: the column stays, "–" where not
    assert _heads(timed)[-1] == "speedup" and "1.25×" in timed and "not timed" not in timed
    rows = re.findall(r'<tr class="teach-point">.*?</tr>', timed)
    assert all(len(re.findall(r"<td", row)) == len(_heads(timed)) for row in rows)


def test_the_time_budget_says_what_its_efficiency_is():
    """'Where the time goes' listed an efficiency of 0.70, 0.76, ... 0.99 with no word of what it divides: its help and
    its table's head say it is the measured speedup ÷ the theorem's."""
    from specui.ui.teach_view import BUDGET_HELP, render_budget

    assert "efficiency** is the measured speedup ÷ the theorem's" in " ".join(BUDGET_HELP.split())
    budget = {"tokens": 32, "target_forward_ms": 2.0, "draft_forward_ms": 0.03, "plain_total_ms_per_token": 2.2,
              "speculative_total_ms_per_token": 1.5, "efficiency_steps": [{"without": "these runs", "efficiency": 0.7}]}
    assert _heads(render_budget(budget))[0] == "efficiency (measured ÷ Thm 3.8)"
