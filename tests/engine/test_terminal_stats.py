"""`python -m specui`'s stats line names its rate as the app's stats line does: a chain's "acceptance", a token-tree
run's "acceptance along the path" (the nodes judged along each round's kept path, not a share of every drafted
node). Real runs of tiny models."""

from __future__ import annotations

import pytest

from specui.engine import SpeculativeEngine
from specui.terminal_view import Reply, stats_line
from tests.helpers import make_model, noisy_copy

PROMPT = [5, 6, 7, 8, 5, 6, 7, 9, 5, 6]


@pytest.fixture(scope="module")
def engine():
    target = make_model("llama", layers=2, seed=0)
    return SpeculativeEngine(target, noisy_copy(target, noise=0.3, seed=1))


def line(result) -> str:
    return stats_line(Reply(result=result), drafter="model", k=4, confidence=0.0, sampled=False)


def test_a_token_tree_runs_rate_is_named_along_the_path_as_the_app_names_it(engine):
    result = engine.generate(PROMPT, max_new_tokens=16, num_draft_tokens=4, tree_width=2, tree_nodes=7, seed=0)
    assert any(r.tree for r in result.rounds)
    assert f"acceptance along the path {result.acceptance_rate:.2f}" in line(result).split(" · ")


def test_a_chains_rate_stays_plain_acceptance(engine):
    result = engine.generate(PROMPT, max_new_tokens=16, num_draft_tokens=4, seed=0)
    assert f"acceptance {result.acceptance_rate:.2f}" in line(result).split(" · ")
    assert "along the path" not in line(result)
