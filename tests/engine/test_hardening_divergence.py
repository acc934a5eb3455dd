"""Explaining a greedy divergence as a near-tie (issue #12, item 5): pure numbers, then a real one
made with a target whose logits put two tokens one rounding step apart."""

from __future__ import annotations

import pytest
import torch

from specui import SpeculativeEngine
from specui.runstats import Divergence, explain_divergence, token_probs
from tests.helpers import make_model


def test_identical_outputs_need_no_explanation():
    assert explain_divergence([1, 2, 3], [0.5, 0.4, 0.3], [1, 2, 3], [0.5, 0.4, 0.3]) is None


def test_a_near_tie():
    d = explain_divergence([1, 2, 7, 9], [0.5, 0.4, 0.2146, 0.9], [1, 2, 5, 5], [0.5, 0.4, 0.2126, 0.8])
    assert d == Divergence(index=2, token_a=7, token_b=5, prob_a=0.2146, prob_b=0.2126, near_tie=True)
    assert "near-tie" in d.describe() and "token 2" in d.describe()


def test_a_clear_winner_is_not_a_near_tie():
    d = explain_divergence([1, 7], [0.5, 0.05], [1, 5], [0.5, 0.6])
    assert d.index == 1 and not d.near_tie and "not a near-tie" in d.describe()


def test_the_tolerance_is_relative_and_adjustable():
    assert explain_divergence([7], [0.0100], [5], [0.0105]).near_tie  # 5% apart: within the default
    assert not explain_divergence([7], [0.0100], [5], [0.0105], rel_tol=0.01).near_tie


def test_different_lengths_are_not_a_tie():
    d = explain_divergence([1, 2], [0.5, 0.4], [1, 2, 3], [0.5, 0.4, 0.3])
    assert (d.index, d.token_a, d.token_b, d.near_tie) == (2, None, 3, False)
    assert "length" in d.describe()


def test_one_probability_per_token():
    with pytest.raises(ValueError):
        explain_divergence([1, 2], [0.5], [1, 3], [0.5, 0.1])


def test_from_two_real_runs_that_part_at_a_tie():
    """Two engines whose targets differ only in which of two tied tokens wins by one ulp."""
    def engine(winner):
        model = make_model("llama", layers=1, seed=0)
        bias = torch.zeros(96)
        bias[5] = bias[9] = 0.2
        bias[winner] = torch.nextafter(torch.tensor(0.2), torch.tensor(1.0))
        model.lm_head.register_forward_hook(lambda module, args, out: out * 0 + bias)
        return SpeculativeEngine(model)

    a = engine(9).generate([1, 2, 3], max_new_tokens=4, num_draft_tokens=2, drafter="prompt_lookup")
    b = engine(5).generate([1, 2, 3], max_new_tokens=4, speculative=False)
    assert token_probs(a) and len(token_probs(a)) == len(a.token_ids)
    d = explain_divergence(a.token_ids, token_probs(a), b.token_ids, token_probs(b))
    assert (d.index, d.token_a, d.token_b, d.near_tie) == (0, 9, 5, True)
