"""The drafter arena with token trees: the drafters that cannot draft trees (prompt lookup) sit out, named
in `Arena.skipped` and never run as chains; the others decode trees, greedy outputs identical to plain."""

from __future__ import annotations

import pytest

from specui import arena
from specui.engine import SpeculativeEngine
from specui.settings import DecodeSettings, SettingsError
from tests.helpers import make_model, noisy_copy

PROMPT = [5, 6, 7, 8, 5, 6, 7, 9, 5, 6]
TREES = DecodeSettings(max_new_tokens=16, num_draft_tokens=3, seed=0, tree_width=2)


@pytest.fixture(scope="module")
def engine():
    target = make_model("llama", layers=2, seed=0)
    return SpeculativeEngine(target, noisy_copy(target, noise=0.3, seed=1))


def test_with_trees_prompt_lookup_is_skipped_and_named(engine):
    assert arena.contestants(engine, TREES) == ("plain", "model")
    assert arena.skipped(engine, TREES) == ("model_lookup", "prompt_lookup")
    assert arena.contestants(engine, TREES.but(tree_width=1)) == arena.contestants(engine) == (
        "plain", "model", "model_lookup", "prompt_lookup")
    assert arena.skipped(engine, TREES.but(tree_width=1)) == ()
    outcome = arena.run(engine, PROMPT, TREES, warm=False)
    assert outcome.names == ("plain", "model") and outcome.skipped == ("model_lookup", "prompt_lookup")
    assert outcome.identical is True
    model = outcome.standing("model").result
    assert model.rounds and all(r.tree is not None for r in model.rounds)  # trees, not chains
    assert "prompt_lookup" not in {name for c in outcome.credits for name in c.kinds}


def test_streams_with_trees_open_only_the_drafters_that_can(engine):
    into = {}
    names = [name for name, stream in arena.streams(engine, PROMPT, TREES, into=into) if list(stream) is not None]
    assert names == ["plain", "model"] and list(into) == ["plain", "model"]
    with pytest.raises(SettingsError, match="cannot draft trees"):  # named explicitly, it is refused, not chained
        for _, stream in arena.streams(engine, PROMPT, TREES, into={}, names=("plain", "prompt_lookup")):
            list(stream)
