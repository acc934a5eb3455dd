"""The accept/reject rule on hand-written distributions: no models involved."""

import torch

from specui.sampling import sample
from specui.verify_rule import BONUS, RESAMPLED, _residual, verify

P = torch.tensor([0.5, 0.3, 0.2, 0.0])
Q = torch.tensor([0.1, 0.6, 0.2, 0.1])


def run(target_rows, draft_tokens, draft_rows=None, *, seed=0, greedy=False):
    return verify(target_probs=torch.stack(target_rows), draft_tokens=torch.tensor(draft_tokens),
                  draft_probs=None if draft_rows is None else torch.stack(draft_rows),
                  generator=torch.Generator().manual_seed(seed),
                  target_argmax=torch.stack(target_rows).argmax(-1) if greedy else None)


def test_accepts_when_target_likes_the_token_more():
    for seed in range(200):  # p(0) = 0.5 >= q(0) = 0.1: accepted whatever the draw
        v = run([P, P], [0], [Q], seed=seed)
        assert v.num_accepted == 1 and v.next_kind == BONUS and v.accept_probs == [1.0]


def test_accepts_with_probability_p_over_q():
    accepted = sum(run([P, P], [1], [Q], seed=s).num_accepted for s in range(4000))
    assert abs(accepted / 4000 - 0.3 / 0.6) < 0.03
    assert abs(run([P, P], [1], [Q]).accept_probs[0] - 0.5) < 1e-6


def test_rejection_resamples_from_the_residual():
    # max(0, p - q) = [0.4, 0, 0, 0]: every rejection of token 1 must emit token 0
    for seed in range(300):
        v = run([P, P], [1], [Q], seed=seed)
        if v.num_accepted == 0:
            assert v.next_kind == RESAMPLED and v.next_token == 0
            assert torch.allclose(v.residual, torch.tensor([1.0, 0, 0, 0]))


def test_bonus_comes_from_the_position_after_the_block():
    last = torch.tensor([0.0, 0.0, 0.0, 1.0])
    v = run([P, P, last], [0, 0], [Q, Q])
    assert (v.num_accepted, v.next_token, v.next_kind) == (2, 3, BONUS)


def test_zero_draft_probability_is_never_accepted():
    q = torch.tensor([1.0, 0.0, 0.0, 0.0])  # the drafted token 2 has q = 0 although p = 0.2
    for seed in range(200):
        assert run([P, P], [2], [q], seed=seed).num_accepted == 0


def test_zero_target_probability_is_never_accepted():
    for seed in range(200):  # p(3) = 0
        v = run([P, P], [3], [Q], seed=seed)
        assert v.num_accepted == 0 and v.next_token != 3


def test_identical_distributions_always_accept_and_never_nan():
    for seed in range(200):
        v = run([P, P, P], [1, 2], [P, P], seed=seed)
        assert v.num_accepted == 2 and v.next_kind == BONUS
        assert all(a == 1.0 for a in v.accept_probs)
    r = _residual(P, P.clone(), 1)
    assert torch.equal(r, P) and not torch.isnan(r).any()


def test_one_hot_drafts_accept_with_probability_p():
    accepted = sum(run([P, P], [1], None, seed=s).num_accepted for s in range(4000))
    assert abs(accepted / 4000 - 0.3) < 0.03
    for seed in range(300):
        v = run([P, P], [1], None, seed=seed)
        if v.num_accepted == 0:
            assert v.next_token != 1  # p without the rejected token, renormalised
            assert torch.allclose(v.residual, torch.tensor([0.5, 0.0, 0.2, 0.0]) / 0.7)


def test_first_token_follows_the_target_exactly():
    """Draft from q, verify: the emitted token is distributed as p (the whole point)."""
    gen = torch.Generator().manual_seed(0)
    counts = torch.zeros(4)
    n = 20000
    for s in range(n):
        x = int(sample(Q, gen))
        v = run([P, P], [x], [Q], seed=s)
        counts[x if v.num_accepted else v.next_token] += 1
    assert torch.allclose(counts / n, P, atol=0.012)


def test_greedy_accepts_while_draft_equals_argmax():
    rows = [torch.tensor([0.1, 0.9, 0, 0]), torch.tensor([0.8, 0.2, 0, 0]), torch.tensor([0, 0, 0.3, 0.7])]
    v = run(rows, [1, 0], None, greedy=True)
    assert (v.num_accepted, v.next_token, v.next_kind) == (2, 3, BONUS)
    v = run(rows, [1, 1], None, greedy=True)
    assert (v.num_accepted, v.next_token, v.next_kind, v.accept_probs) == (1, 0, RESAMPLED, [1.0, 0.0])
    v = run(rows, [2, 0], None, greedy=True)
    assert (v.num_accepted, v.next_token) == (0, 1)


def test_empty_draft_is_one_target_token():
    v = verify(target_probs=P[None], draft_tokens=torch.empty(0, dtype=torch.long), draft_probs=None,
               generator=torch.Generator().manual_seed(3))
    assert v.num_accepted == 0 and v.next_kind == BONUS and v.next_token in (0, 1, 2)
