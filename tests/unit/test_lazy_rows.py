"""A sampled round reads the target's rows only up to its first rejection (`specui.sampling.Rows`): the rule decides
exactly as it did over the whole block of transformed rows, and rows past the rejection are never transformed."""

import pytest
import torch

from specui.events import Kind
from specui.sampling import Rows, Sampling, logits_to_probs, sample
from specui.verify_rule import _residual, verify

SETTINGS = [Sampling(temperature=1.0), Sampling(temperature=0.7, top_p=0.9), Sampling(temperature=0.8, top_k=5),
            Sampling(temperature=1.3, top_k=20, top_p=0.8)]


def block_rule(*, target_probs, draft_tokens, draft_probs, generator):
    """The rule as it was before rows were read lazily: every row's p(x) and min(1, p/q) at once, in tensors."""
    k = draft_tokens.shape[0]
    positions = torch.arange(k)
    p_x = target_probs[positions, draft_tokens]
    q_x = torch.ones_like(p_x) if draft_probs is None else draft_probs[positions, draft_tokens]
    r = torch.rand(k, generator=generator)
    accept = (q_x > 0) & (r * q_x < p_x)
    tiny = torch.finfo(q_x.dtype).tiny
    ratio = torch.where(q_x > 0, (p_x / q_x.clamp_min(tiny)).clamp(max=1.0), torch.zeros_like(p_x))
    accepted = accept.tolist()
    n = accepted.index(False) if False in accepted else k
    if n == k:
        return n, int(sample(target_probs[k], generator)), ratio.tolist(), r.tolist()
    residual = _residual(target_probs[n], None if draft_probs is None else draft_probs[n], int(draft_tokens[n]))
    return n, int(sample(residual, generator)), ratio.tolist(), r.tolist()


@pytest.mark.parametrize("vocab", [50, 49152])
@pytest.mark.parametrize("sampling", SETTINGS)
def test_a_row_alone_has_the_blocks_bits(sampling, vocab):
    logits = torch.randn(5, vocab, generator=torch.Generator().manual_seed(vocab)) * 4
    logits[2, :7] = logits[2, 7]  # ties at the cut
    block = logits_to_probs(logits, sampling)
    rows = Rows(logits, sampling)
    for i in (3, 0, 4, 2, 1):
        assert torch.equal(rows[i], block[i])
    assert torch.equal(rows[-1], block[-1]) and rows[2, 5] == block[2, 5]


@pytest.mark.parametrize("sampling", SETTINGS)
@pytest.mark.parametrize("deterministic", [False, True])
def test_the_rule_decides_as_over_the_whole_block(sampling, deterministic):
    vocab, seen = 40, set()
    for case in range(300):
        g = torch.Generator().manual_seed(case)
        k = 1 + case % 6
        logits = torch.randn(k + 1, vocab, generator=g) * (1 + case % 4)
        draft_probs = None if deterministic else torch.softmax(logits[:k] + torch.randn(k, vocab, generator=g), -1)
        if not deterministic and case % 5 == 0:
            draft_probs[:, : vocab // 2] = 0.0  # drafts outside the draft's vocabulary: q = 0
            draft_probs /= draft_probs.sum(-1, keepdim=True)
        if case % 7 == 0 and not deterministic:
            draft_probs = draft_probs.half()  # a half-precision draft: the same float32 arithmetic
        block = logits_to_probs(logits, sampling)
        # drafts the target likes (the first one half of the time), else anything
        liked = torch.rand(k, generator=g) < 0.5
        tokens = torch.where(liked, block[:k].argmax(-1), torch.randint(vocab, (k,), generator=g))
        rows = Rows(logits, sampling)
        lazy = verify(target_probs=rows, draft_tokens=tokens, draft_probs=draft_probs,
                      generator=torch.Generator().manual_seed(case))
        n, token, ratios, uniforms = block_rule(target_probs=block, draft_tokens=tokens, draft_probs=draft_probs,
                                                generator=torch.Generator().manual_seed(case))
        assert (lazy.num_accepted, lazy.next_token, lazy.uniforms) == (n, token, uniforms)
        assert lazy.accept_probs == ratios[: min(n + 1, k)]  # the judged positions, bit for bit
        assert lazy.next_kind == (Kind.BONUS if n == k else Kind.RESAMPLED)
        assert rows.read == list(range(n + 1))  # never a row past the rejection (or past the bonus row)
        seen.add(n == k)
    assert seen == {True, False}


def test_greedy_rows_are_the_whole_softmax():
    logits = torch.randn(4, 30, generator=torch.Generator().manual_seed(0))
    rows = Rows(logits, Sampling())
    assert rows.read == [0, 1, 2, 3] and torch.equal(rows[1], torch.softmax(logits, -1)[1])
    assert rows.probs([0, 3], [5, 6], needed=0) == torch.softmax(logits, -1)[[0, 3], [5, 6]].tolist()


def test_probs_past_the_rejection_are_none_unless_read():
    logits = torch.randn(4, 30, generator=torch.Generator().manual_seed(1))
    how = Sampling(temperature=0.9, top_p=0.8)
    rows, block = Rows(logits, how), logits_to_probs(logits, how)
    assert rows.probs([0, 1, 2, 1], [3, 4, 5, 9], needed=1) == [float(block[0, 3]), float(block[1, 4]), None,
                                                                  float(block[1, 9])]
    assert rows.read == [0, 1]
