"""Sampled rounds transform only the target rows their rule reads (`specui.sampling.Rows`): the same seed gives the
same run as transforming every row first (chains and trees, every sampling transform), the p recorded where a row
was read is the same, and no row past a chain's rejection, or off a tree's walked path, is transformed."""

import functools

import pytest

from specui import SpeculativeEngine, chain_round, sampling, tree_round
from tests.helpers import make_model, noisy_copy

SETTINGS = [dict(temperature=1.0), dict(temperature=0.7, top_p=0.9), dict(temperature=0.9, top_k=8, top_p=0.8)]


EveryRow = functools.partial(sampling.Rows, every_row=True)  # the whole block transformed first, as before stop 81


class Recorded(sampling.Rows):
    made: list = []

    def __init__(self, logits, how):
        super().__init__(logits, how)
        Recorded.made.append(self)


@pytest.fixture(scope="module")
def pair():
    target = make_model("llama", seed=3)
    return target, noisy_copy(target, noise=0.3, seed=1)


def runs(pair, monkeypatch, rows, **settings):
    monkeypatch.setattr(chain_round, "Rows", rows)
    monkeypatch.setattr(tree_round, "Rows", rows)
    engine = SpeculativeEngine(*pair)
    return [engine.generate([1 + s, 2, 3], max_new_tokens=24, seed=s, **settings) for s in range(6)]


@pytest.mark.parametrize("tree", [None, dict(tree_width=2, tree_nodes=6)])
@pytest.mark.parametrize("settings", SETTINGS)
def test_the_same_run_as_every_row_transformed(pair, monkeypatch, settings, tree):
    shape = dict(num_draft_tokens=4, **(tree or {}))
    every = runs(pair, monkeypatch, EveryRow, **settings, **shape)
    lazy = runs(pair, monkeypatch, sampling.Rows, **settings, **shape)
    discarded = 0
    for a, b in zip(every, lazy):
        assert a.token_ids == b.token_ids and a.kinds == b.kinds
        for x, y in zip(a.rounds, b.rounds):
            assert x.drafted == y.drafted and x.uniforms == y.uniforms
            assert x.token_target_probs == y.token_target_probs
            assert y.accept_probs == x.accept_probs[: len(y.accept_probs)]
            assert all(q is None or q == p for p, q in zip(x.target_probs, y.target_probs))
            if tree:
                assert all(m.target_prob is None or m.target_prob == n.target_prob for n, m in zip(x.tree, y.tree))
                discarded += sum(m.target_prob is None for m in y.tree)
            else:
                discarded += y.target_probs.count(None)
    assert discarded > 0  # some rows were left untransformed


def test_no_row_past_the_rejection_is_read(pair, monkeypatch):
    Recorded.made = []
    result = runs(pair, monkeypatch, Recorded, temperature=0.8, top_p=0.9, num_draft_tokens=4)
    rounds = [r for res in result for r in res.rounds]
    assert len(rounds) == len(Recorded.made)
    for r, rows in zip(rounds, Recorded.made):
        assert rows.read == list(range(r.num_accepted + 1))  # up to the rejection's row, or the bonus row


def test_a_tree_reads_the_rows_of_its_walk(pair, monkeypatch):
    Recorded.made = []
    result = runs(pair, monkeypatch, Recorded, temperature=1.0, num_draft_tokens=3, tree_width=3, tree_nodes=8)
    rounds = [r for res in result for r in res.rounds]
    assert len(rounds) == len(Recorded.made)
    for r, rows in zip(rounds, Recorded.made):
        assert rows.read == [0] + [i + 1 for i in r.tree_path]  # the root's row, then each accepted node's
        for node in r.tree:
            assert (node.target_prob is None) == (node.parent + 1 not in rows.read)
