"""The shared sampling transform equals transformers' warpers, and validates its settings."""

import math

import pytest
import torch
from scipy.stats import chisquare
from transformers.generation.logits_process import TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

from specui import sampling
from specui.sampling import Sampling, choose, logits_to_probs, sample


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
    if top_p == 1.0:  # a tie, which top-k keeps (at top-p's edge specui keeps every tie, the warper one: below)
        logits[7] = logits[8]
    ours = logits_to_probs(logits, Sampling(temperature=temperature, top_k=top_k, top_p=top_p))
    theirs = hf_probs(logits, temperature=temperature, top_k=top_k, top_p=top_p)
    assert torch.allclose(ours, theirs, atol=1e-6)
    assert math.isclose(float(ours.sum()), 1.0, rel_tol=1e-5)



def sorted_top_p(scores, top_p):
    """The removal mask TopPLogitsWarper computes: a full sort with indices, the running sum, scattered back."""
    sorted_scores, sorted_idx = torch.sort(scores, dim=-1, descending=False)
    remove = sorted_scores.softmax(dim=-1).cumsum(dim=-1) <= (1.0 - top_p)
    remove[..., -1:] = False
    return remove.scatter(-1, sorted_idx, remove)


def nucleus_mismatches(outside) -> int:
    """Rows (of many random ones: vocabularies up to SmolLM2's, scales, top-p, top-k's -inf) where `outside`
    removes other tokens than the sort-and-scatter of the warper."""
    bad = 0
    for seed in range(200):
        gen = torch.Generator().manual_seed(seed)
        vocab = 49152 if seed % 20 == 0 else int(torch.randint(2, 3000, (1,), generator=gen))
        scores = torch.randn(int(torch.randint(1, 4, (1,), generator=gen)), vocab, generator=gen)
        scores *= float(torch.rand(1, generator=gen)) * 8 + 0.1
        if seed % 3 == 0:  # after top-k: the rest at -inf
            scores[:, torch.randperm(vocab, generator=gen)[: vocab // 2]] = -math.inf
        top_p = float(torch.rand(1, generator=gen)) * 0.99 + 0.005
        bad += not torch.equal(outside(scores, top_p), sorted_top_p(scores, top_p))
    return bad


def test_the_nucleus_is_the_warpers_token_for_token_and_a_shifted_cut_is_caught():
    """`_outside_nucleus` finds the cut from the sorted values alone; it must remove exactly what the warper's sort,
    running sum and scatter remove. A cut one place later (one more token removed) is caught."""
    assert nucleus_mismatches(sampling._outside_nucleus) == 0

    def one_late(scores, top_p):
        ascending = scores.sort(dim=-1).values
        removed = (ascending.softmax(-1).cumsum(-1) <= 1.0 - top_p).sum(-1, keepdim=True)
        return scores < ascending.gather(-1, (removed + 1).clamp_max(scores.shape[-1] - 1))

    assert nucleus_mismatches(one_late) > 20


def test_the_native_sort_gives_numpys_values_and_the_same_probabilities(monkeypatch):
    """On a CPU the top-p cut reads its sorted scores from native code (`native.Kernel.sorted_values`, a radix sort of
    their bits) where that is faster than numpy's here: np.sort's values on rows with ties, -inf (top-k's cuts) and
    both zeros, up to SmolLM2's vocabulary, so logits_to_probs gives the same probabilities bit for bit either way; a
    row with a NaN takes np.sort."""
    import numpy as np

    from specui import native

    kernel = native.kernel()
    if kernel is None:
        pytest.skip("no native kernels here")
    gen = torch.Generator().manual_seed(0)
    rows = []
    for n in (1, 2, 7, 513, 4096, 49152):
        x = torch.randn(3, n, generator=gen) * 5
        x[0, : n // 3] = float("-inf")
        x[1, ::2] = 0.0
        x[1, 1::4] = -0.0
        x[2] = x[2].round()  # many equal values
        rows.append(x)
    for x in rows:
        assert torch.equal(kernel.sorted_values(x), torch.from_numpy(np.sort(x.numpy(), axis=-1)))
        assert torch.equal(kernel.sorted_values(x[1]), torch.from_numpy(np.sort(x[1].numpy())))
    for bad in (float("nan"), -float("nan")):
        x = rows[-1].clone()
        x[1, 5] = bad
        assert kernel.sorted_values(x) is None
    s = Sampling(temperature=0.7, top_k=400, top_p=0.9)
    monkeypatch.setattr(sampling, "_sorter", lambda: kernel)  # native code's sort, whichever is faster here
    fast = [logits_to_probs(x, s) for x in rows]
    monkeypatch.setattr(sampling, "_sorter", lambda: None)  # numpy's
    assert all(torch.equal(a, logits_to_probs(x, s)) for a, x in zip(fast, rows))
    assert isinstance(sampling._sorts_faster(kernel), bool)  # timed once per build


def test_equal_scores_at_the_nucleus_edge_are_all_kept():
    """Where equal scores straddle the cut, the warper keeps whichever its sort puts last (an order torch leaves
    unspecified); specui keeps them all, as top-k keeps ties with the k-th score."""
    logits = torch.tensor([0.0, 1.0, 1.0, 3.0])  # ascending cumulative 0.035, 0.13, 0.23, 1: a cut at 0.2 splits the tie
    probs = logits_to_probs(logits, Sampling(temperature=1.0, top_p=0.8))
    assert probs[0] == 0 and probs[1] == probs[2] > 0 and probs[3] > probs[1]


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


def _law_pvalue(draw, probs, n=60_000):
    gen = torch.Generator().manual_seed(11)
    counts = torch.bincount(draw(probs.expand(n, -1), gen), minlength=len(probs)).double()
    seen = probs > 0
    assert counts[~seen].sum() == 0, "a token of probability 0 was drawn"
    expected = probs[seen].double() / probs[seen].double().sum()
    return chisquare(counts[seen].numpy(), (expected * counts.sum()).numpy()).pvalue


def _off_by_one(probs, generator):  # the broken variant: the token before the one the draw lands on
    return (sampling.sample(probs, generator) - 1).clamp(min=0)


def test_inverse_cdf_draws_follow_the_law_and_never_a_zero():
    """The inverse-CDF draw, batched over rows, follows each row's probabilities (chi-square) and never draws a
    token of probability 0; a broken variant (one token off) is caught by the same test."""
    probs = torch.tensor([0.0, 0.05, 0.0, 0.4, 0.25, 0.0, 0.3, 0.0])
    assert _law_pvalue(sample, probs) > 1e-3
    assert _law_pvalue(sample, probs * 7.5) > 1e-3  # rows need not sum to 1 (a residual's max(0, p - q))
    with pytest.raises(AssertionError, match="probability 0"):
        _law_pvalue(_off_by_one, probs)
    assert _law_pvalue(_off_by_one, torch.tensor([0.1, 0.2, 0.3, 0.4])) < 1e-6


def test_one_row_is_drawn_by_native_code_as_the_batched_path_draws_it():
    """A float32 row on a CPU is drawn by `native.Kernel.draw` (the zeros outside a nucleus skipped): the token of the
    batched path (torch's float64 running sum and searches) for the same uniform, on rows of every shape of sparsity
    and at both ends of the range; its draws follow the law, and a draw one token off is caught."""
    from specui import native

    kernel = native.kernel()
    if kernel is None or not kernel.has_draw:
        pytest.skip("no native draw here")
    g = torch.Generator().manual_seed(0)
    for case in range(600):
        vocab = (5, 100, 49152)[case % 3]
        probs = logits_to_probs(torch.randn(vocab, generator=g) * (1 + case % 5),
                                Sampling(temperature=0.7, top_p=(1.0, 0.9, 0.5)[case % 3]))
        if case % 4 == 0:
            probs[::2] = 0.0
        if not probs.sum() > 0:
            continue
        for u in (float(torch.rand(1, dtype=torch.float64, generator=g)), 0.0, 0.5, 1 - 2 ** -53, 1.0):
            batched = sample(probs[None], None, torch.tensor([u], dtype=torch.float64))
            assert kernel.draw(probs, u) == int(batched[0]) == int(sample(probs, None, torch.tensor(u)))
    probs = torch.tensor([0.0, 0.05, 0.0, 0.4, 0.25, 0.0, 0.3, 0.0])
    one_by_one = lambda rows, gen: torch.stack([sample(row, gen) for row in rows])  # noqa: E731
    assert _law_pvalue(one_by_one, probs, n=20_000) > 1e-3
    with pytest.raises(AssertionError, match="probability 0"):
        _law_pvalue(lambda rows, gen: (one_by_one(rows, gen) - 1).clamp(min=0), probs, n=20_000)


def test_sample_keeps_shapes_and_rows_apart():
    gen = torch.Generator().manual_seed(0)
    rows = torch.zeros(3, 2, 6)
    for i, j, token in ((0, 0, 5), (0, 1, 0), (1, 0, 3), (1, 1, 2), (2, 0, 4), (2, 1, 1)):
        rows[i, j, token] = 1.0
    assert sample(rows, gen).tolist() == [[5, 0], [3, 2], [4, 1]]
    assert sample(torch.tensor([0.0, 0.0, 2.0]), gen).shape == ()


def test_a_draw_at_the_top_of_the_range_takes_the_last_possible_token(monkeypatch):
    """u * total can round up to the total; the draw is then the last token of nonzero probability."""
    monkeypatch.setattr(sampling.torch, "rand", lambda shape, **kw: torch.ones(shape, dtype=torch.float64))
    assert sample(torch.tensor([0.2, 0.5, 0.3, 0.0, 0.0]), torch.Generator()).item() == 2


@pytest.mark.parametrize("row", [[0.0, 0.0], [float("nan"), 1.0], [float("inf"), 1.0]])
def test_an_impossible_row_is_explained(row):
    with pytest.raises(ValueError, match="cannot sample"):
        sample(torch.tensor(row), torch.Generator())


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
