"""The Teach tab's "Where the time goes" experiment (specui.lesson_budget) on real tiny models."""

from __future__ import annotations

import pytest

from specui import SpeculativeEngine, lesson_budget
from specui.settings import DecodeSettings
from tests.helpers import make_model, noisy_copy


@pytest.fixture(scope="module")
def engine():
    target = make_model("llama", layers=3, seed=0)
    return SpeculativeEngine(target, noisy_copy(target, noise=0.3, seed=1))


@pytest.mark.parametrize("drafter", ["model", "prompt_lookup"])
def test_the_runs_split_into_parts_that_add_up(engine, drafter):
    settings = DecodeSettings(max_new_tokens=24, num_draft_tokens=3, seed=0, drafter=drafter)
    b = lesson_budget.time_budget_run(engine, [5, 9, 11, 5, 9, 11, 5], settings)
    assert b["tokens"] == 24 and b["k"] == 3 and b["drafter"] == drafter
    for arm in ("plain", "speculative"):
        assert b[f"{arm}_total_ms_per_token"] == pytest.approx(sum(b[f"{arm}_ms_per_token"].values()))
    assert b["speculative_ms_per_token"]["draft forwards"] > 0 if drafter == "model" else b["c"] == 0.0
    # every round recorded its target forward's own seconds: a real split of the verify, not the alone cost
    assert b["plain_ms_per_token"]["forwards slower in the loop"] != 0.0
    assert b["speculative_ms_per_token"]["verify slower in the loop"] != 0.0
    steps = [s["efficiency"] for s in b["efficiency_steps"]]
    assert steps[0] == pytest.approx(b["speedup"] / b["theory"])
    # forwards alone are the theorem's count, but for the last round, which drafts what the budget leaves
    assert steps[-1] == pytest.approx(1.0, abs=0.1)


def test_a_one_token_prompt_is_refused(engine):
    with pytest.raises(ValueError, match="at least two tokens"):
        lesson_budget.time_budget_run(engine, [5], DecodeSettings(max_new_tokens=8))


def test_a_drafter_that_copies_and_drafts_is_refused_with_the_reason(engine):
    """The draft model + lookup mixes copies with the model's drafts: the theorem the budget compares with
    does not describe such a run, and the message says so (early exit + lookup is refused the same way)."""
    settings = DecodeSettings(max_new_tokens=24, num_draft_tokens=2, seed=0, drafter="model_lookup")
    with pytest.raises(ValueError, match="draft model \\+ lookup drafter mixes two proposers"):
        lesson_budget.time_budget_run(engine, [5, 9, 11, 5, 9, 11, 5, 9], settings)
