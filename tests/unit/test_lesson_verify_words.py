"""The verify-cost chart's arithmetic floor, where it is 1 at every n (the bundled chat model's 16 rows timed on this
machine: 217 GFLOP/s), lies exactly on Theorem 3.8's line of 1 and hides it: its legend name says so, where a class saw
one grey dotted line under a legend naming two. A floor above 1 somewhere is named as before."""

from __future__ import annotations

from specui.ui import teach_charts

CURVE = {"tokens": [1, 2, 4], "seconds": [0.05, 0.05, 0.06], "ratios": [1.0, 1.0, 1.2], "cache_length": 40,
         "fma_rate": 1e11}


def test_a_floor_of_one_at_every_n_says_it_lies_on_the_theorems_line():
    flat = teach_charts.verify_cost_figure({**CURVE, "floor_ratios": [1.0, 1.0, 1.001]})
    assert flat.data[2].name == "floor: multiply-adds at 200 GFLOP/s<br>(1 at every n: on the theorem's line)"
    rising = teach_charts.verify_cost_figure({**CURVE, "floor_ratios": [1.0, 1.0, 1.1]})
    assert rising.data[2].name == "floor: multiply-adds at 200 GFLOP/s"
