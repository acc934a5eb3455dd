"""The shared sampling transform equals transformers' warpers, and validates its settings."""

import math

import pytest
import torch
from transformers.generation.logits_process import TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

from specui.sampling import Sampling, choose, logits_to_probs


def hf_probs(logits, *, temperature, top_k, top_p):
    scores = logits.clone()[None]
    if temperature != 1.0:
        scores = TemperatureLogitsWarper(temperature)(None, scores)
    if top_k > 0:
        scores = TopKLogitsWarper(top_k)(None, scores)
    if top_p < 1.0:
        scores = TopPLogitsWarper(top_p)(None, scores)
    return torch.softmax(scores, dim=-1)[0]


@pytest.mark.parametrize("temperature", [0.3, 1.0, 1.7])
@pytest.mark.parametrize("top_k", [0, 1, 5, 200])
@pytest.mark.parametrize("top_p", [1.0, 0.9, 0.5, 0.05])
def test_matches_transformers_warpers(temperature, top_k, top_p):
    gen = torch.Generator().manual_seed(int(temperature * 10) + top_k + int(top_p * 100))
    logits = torch.randn(50, generator=gen) * 3
    logits[7] = logits[8]  # a tie, which top-k keeps
    ours = logits_to_probs(logits, Sampling(temperature=temperature, top_k=top_k, top_p=top_p))
    theirs = hf_probs(logits, temperature=temperature, top_k=top_k, top_p=top_p)
    assert torch.allclose(ours, theirs, atol=1e-6)
    assert math.isclose(float(ours.sum()), 1.0, rel_tol=1e-5)


def test_batched_rows_are_independent():
    logits = torch.randn(4, 30)
    s = Sampling(temperature=0.8, top_k=6, top_p=0.8)
    batched = logits_to_probs(logits, s)
    for i in range(4):
        assert torch.allclose(batched[i], logits_to_probs(logits[i], s))


def test_does_not_modify_logits():
    logits = torch.randn(30)
    before = logits.clone()
    logits_to_probs(logits, Sampling(temperature=0.5, top_k=3, top_p=0.7))
    assert torch.equal(logits, before)


def test_greedy_is_argmax_and_reports_softmax():
    logits = torch.tensor([0.1, 2.0, -1.0, 1.9])
    token, probs = choose(logits, Sampling(temperature=0.0), torch.Generator())
    assert int(token) == 1
    assert torch.allclose(probs, torch.softmax(logits, -1))


def test_sample_follows_probs():
    gen = torch.Generator().manual_seed(0)
    logits = torch.log(torch.tensor([0.7, 0.2, 0.1]))
    draws = [int(choose(logits, Sampling(temperature=1.0), gen)[0]) for _ in range(3000)]
    freq = torch.bincount(torch.tensor(draws), minlength=3).float() / 3000
    assert torch.allclose(freq, torch.tensor([0.7, 0.2, 0.1]), atol=0.03)


@pytest.mark.parametrize("kwargs, message", [
    ({"temperature": -1}, "temperature"),
    ({"temperature": float("nan")}, "temperature"),
    ({"top_k": -2}, "top_k"),
    ({"top_k": 2.5}, "top_k"),
    ({"top_p": 0.0}, "top_p"),
    ({"top_p": 1.5}, "top_p"),
])
def test_bad_settings_are_explained(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Sampling(**kwargs)
