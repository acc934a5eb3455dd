"""The benchmark's time budget (specui.bench.budget): pure arithmetic on recorded rounds."""

from __future__ import annotations

from types import SimpleNamespace as Run

import pytest

from specui.bench.budget import curve_ratio, format_budget, time_budget

CURVE = {"tokens": [1, 2, 4, 8], "ratios": [1.0, 1.0, 1.2, 1.6]}


def plain_run(tokens=4, step=0.012, prefill=0.02, gap=0.001):
    rounds = [Run(verify_s=step, draft_s=0.0, num_drafted=0) for _ in range(tokens)]
    return Run(token_ids=[0] * tokens, rounds=rounds, prefill_s=prefill, total_s=prefill + tokens * step + gap)


def spec_run(verify=0.011, draft=0.003, prefill=0.022, gap=0.0005):
    rounds = [Run(verify_s=verify, draft_s=draft, num_drafted=1) for _ in range(2)]  # 2 tokens a round
    return Run(token_ids=[0] * 4, rounds=rounds, prefill_s=prefill, total_s=prefill + 2 * (verify + draft) + gap)


def test_curve_ratio_reads_and_interpolates():
    assert curve_ratio(CURVE, 2) == 1.0 and curve_ratio(CURVE, 8) == 1.6
    assert curve_ratio(CURVE, 3) == pytest.approx(1.1) and curve_ratio(CURVE, 6) == pytest.approx(1.4)
    assert curve_ratio(CURVE, 12) == 1.6 and curve_ratio(CURVE, 0) == 1.0


def test_parts_add_up_and_taking_them_all_away_leaves_the_theorem():
    # t = 10 ms, d = 2 ms (c = 0.2), one draft a round, both accepted: Thm 3.8 gives 2 / 1.2
    theory = 2 / 1.2
    b = time_budget([plain_run(), plain_run()], [spec_run(), spec_run()], target_s=0.010, draft_s=0.002,
                    curve=CURVE, theory=theory)
    plain, spec = b["plain_ms_per_token"], b["speculative_ms_per_token"]
    # rounds without their forward's own seconds: forwards at the alone cost, nothing slower in the loop
    assert plain == pytest.approx({"forwards": 10.0, "forwards slower in the loop": 0.0, "step rest": 2.0,
                                   "between steps": 0.25, "prefill": 5.0})
    assert spec == pytest.approx({"target forwards": 5.0, "verify extra rows": 0.0, "verify slower in the loop": 0.0,
                                  "verify rest": 0.5, "draft forwards": 1.0, "draft rest": 0.5, "between rounds": 0.125,
                                  "prefill": 5.5})
    assert b["plain_total_ms_per_token"] == pytest.approx(sum(plain.values()))
    assert b["speedup"] == pytest.approx(sum(plain.values()) / sum(spec.values()))
    steps = [s["efficiency"] for s in b["efficiency_steps"]]
    assert steps[0] == pytest.approx(b["speedup"] / theory)
    assert steps[-1] == pytest.approx(1.0)  # forwards alone are what the theorem counts
    text = "\n".join(format_budget(b))
    assert "where the time goes" in text and "draft rest 0.50" in text and "1.00  and without the prefills" in text
    assert format_budget(None) == []


def test_each_rounds_own_forward_time_splits_the_forwards_slowdown_from_the_bookkeeping():
    """Rounds that record their target forward's seconds (`forward_s`): what it took beyond the cost timed alone is
    the forwards' slowdown in the loop, and only the rest of a step or a verify is bookkeeping."""
    plain = plain_run()
    plain.rounds = [Run(verify_s=0.012, draft_s=0.0, num_drafted=0, forward_s=0.011) for _ in range(4)]
    spec = spec_run()
    spec.rounds = [Run(verify_s=0.011, draft_s=0.003, num_drafted=1, forward_s=0.0105) for _ in range(2)]
    b = time_budget([plain], [spec], target_s=0.010, draft_s=0.002, curve=CURVE, theory=2 / 1.2)
    p, s = b["plain_ms_per_token"], b["speculative_ms_per_token"]
    assert p["forwards slower in the loop"] == pytest.approx(1.0) and p["step rest"] == pytest.approx(1.0)
    assert s["verify slower in the loop"] == pytest.approx(2 * 0.5 / 4) and s["verify rest"] == pytest.approx(2 * 0.5 / 4)
    assert b["plain_total_ms_per_token"] == pytest.approx(sum(p.values()))
    steps = {step["without"]: step["efficiency"] for step in b["efficiency_steps"]}
    loop = steps["and without the forwards' slowdown in the loop (both runs)"]
    assert loop == pytest.approx((10.0 + 5.0) / (5.0 + 1.0 + 5.5) / (2 / 1.2))  # forwards and prefills alone
    assert b["efficiency_steps"][-1]["efficiency"] == pytest.approx(1.0)
    # one round without a record: the run falls back to the alone cost for all of them
    spec.rounds[0] = Run(verify_s=0.011, draft_s=0.003, num_drafted=1)
    b = time_budget([plain], [spec], target_s=0.010, draft_s=0.002, curve=CURVE, theory=2 / 1.2)
    assert b["speculative_ms_per_token"]["verify slower in the loop"] == 0.0


def test_runs_of_different_lengths_are_refused():
    with pytest.raises(ValueError, match="same length"):
        time_budget([plain_run(tokens=3)], [spec_run()], target_s=0.01, draft_s=0.002, curve=CURVE, theory=1.5)


def test_a_tree_rounds_verify_counts_every_node_and_its_drafting_one_forward_per_level():
    """A tree round's `drafted` lists only the walked path; its verify reads every node (here 5: two levels of
    children, then one more level), and its drafter ran one forward per level (3)."""
    nodes = tuple(Run(parent=p) for p in (-1, -1, 0, 0, 2))
    tree_round = Run(verify_s=0.016, draft_s=0.009, num_drafted=2, tree=nodes)
    spec = Run(token_ids=[0] * 4, rounds=[tree_round, tree_round], prefill_s=0.02, total_s=0.02 + 2 * 0.025)
    b = time_budget([plain_run()], [spec], target_s=0.010, draft_s=0.002, curve=CURVE, theory=2.0)
    parts = b["speculative_ms_per_token"]
    assert parts["verify extra rows"] == pytest.approx(2 * (1.4 - 1.0) * 10 / 4)  # 6 rows: 1.4 by the curve
    assert parts["verify rest"] == pytest.approx(2 * (16 - 14) / 4)
    assert parts["draft forwards"] == pytest.approx(2 * 3 * 2 / 4) and parts["draft rest"] == pytest.approx(2 * 3 / 4)
