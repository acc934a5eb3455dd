"""The tree accept/reject rule on hand-written distributions: greedy walks, every outcome (root
rejected, partial path, leaf bonus), duplicates, and the law of the first two emitted tokens against
the target's, for both rules (and a broken rule that the same test must catch)."""

import pytest
import torch
from scipy.stats import chisquare

from specui import tree_verify
from specui.events import Kind
from specui.tree_verify import verify_tree

V = 4
P_ROOT = torch.tensor([0.4, 0.3, 0.2, 0.1])
P_NEXT = torch.tensor([[0.1, 0.6, 0.2, 0.1], [0.25, 0.25, 0.25, 0.25], [0.7, 0.1, 0.1, 0.1], [0.0, 0.5, 0.5, 0.0]])
Q_ROOT = torch.tensor([0.1, 0.2, 0.3, 0.4])
Q_NEXT = torch.tensor([0.5, 0.1, 0.1, 0.3])


def rows(tokens, parents):
    """target_probs [N+1, V]: p at the root, then P_NEXT of each depth-1 node's token (depth 2: anything)."""
    out = [P_ROOT]
    for t, parent in zip(tokens, parents):
        out.append(P_NEXT[t] if parent == -1 else torch.full((V,), 1.0 / V))
    return torch.stack(out)


def first_two(verdict, tokens):
    emitted = [tokens[i] for i in verdict.path] + [verdict.next_token]
    return emitted[0], emitted[1] if len(emitted) > 1 else None


def law(tokens, parents, *, sampled, trials=12000, seed=0):
    """Observed counts of (t1, t2): t2 from the tree when the round got that far, else from the next
    round's p = P_NEXT[t1]. Sampled trees draw their tokens from q anew in every trial."""
    gen = torch.Generator().manual_seed(seed)
    q = torch.stack([Q_ROOT if p == -1 else Q_NEXT for p in parents])
    probs = rows(tokens, parents)
    counts = torch.zeros(V, V)
    for _ in range(trials):
        if sampled:  # each round draws its children i.i.d. from q: duplicates happen
            tokens = torch.multinomial(q, 1, generator=gen)[:, 0].tolist()
            probs = rows(tokens, parents)
        verdict = verify_tree(target_probs=probs, draft_tokens=torch.tensor(tokens), parents=parents,
                              draft_probs=q, sampled=sampled, generator=gen)
        t1, t2 = first_two(verdict, tokens)
        if t2 is None:  # the round ended at the root: the next round draws t2 from the target
            t2 = int(torch.multinomial(P_NEXT[t1], 1, generator=gen))
        counts[t1, t2] += 1
    return counts


def p_value(counts, exact):
    expected = (exact / exact.sum() * counts.sum()).flatten()
    observed = counts.flatten()
    assert observed[expected == 0].sum() == 0
    keep = expected > 0
    return chisquare(observed[keep], expected[keep]).pvalue


EXACT = P_ROOT[:, None] * P_NEXT  # the joint law of the first two tokens under the target alone

# depth-1 children [0, 1, 2]; node 0 has children [1, 2], node 1 has child [0]: a leaf-bonus path too
DETERMINISTIC = ([0, 1, 2, 1, 2, 0], [-1, -1, -1, 0, 0, 1])
# sampled: the shape only (four root children, two grandchildren); tokens are drawn per trial
SAMPLED = ([0] * 6, [-1, -1, -1, -1, 0, 2])


def test_deterministic_rule_is_exact():
    assert p_value(law(*DETERMINISTIC, sampled=False), EXACT) > 1e-3


def test_sampled_rule_with_duplicates_is_exact():
    assert p_value(law(*SAMPLED, sampled=True), EXACT) > 1e-3


def test_skipping_the_residual_update_is_caught(monkeypatch):
    monkeypatch.setattr(tree_verify, "_residual", lambda p, q, rejected: p)
    assert p_value(law(*DETERMINISTIC, sampled=False), EXACT) < 1e-6
    assert p_value(law(*SAMPLED, sampled=True), EXACT) < 1e-6


def greedy(tokens, parents, argmax):
    return verify_tree(target_probs=torch.zeros(len(tokens) + 1, V), draft_tokens=torch.tensor(tokens),
                       parents=parents, draft_probs=None, sampled=False, generator=None,
                       target_argmax=torch.tensor(argmax))


def test_greedy_walks_the_argmax():
    tokens, parents = DETERMINISTIC
    # root argmax 0 -> node 0; its argmax 2 -> node 4 (a leaf): bonus = argmax at node 4's row
    v = greedy(tokens, parents, [0, 2, 9, 9, 9, 3, 9])
    assert v.path == [0, 4] and v.next_token == 3 and v.next_kind == Kind.BONUS
    assert v.verdicts[:5] == ["accepted", "unvisited", "unvisited", "rejected", "accepted"]
    v = greedy(tokens, parents, [3, 9, 9, 9, 9, 9, 9])  # no child matches the root's argmax
    assert v.path == [] and v.next_token == 3 and v.next_kind == Kind.RESAMPLED
    assert v.verdicts[:3] == ["rejected"] * 3
    v = greedy(tokens, parents, [1, 9, 2, 9, 9, 9, 9])  # node 1 matches; its child (token 0) does not
    assert v.path == [1] and v.next_token == 2 and v.next_kind == Kind.RESAMPLED


def test_every_outcome_and_the_residual():
    tokens, parents = [0, 1], [-1, 0]
    probs = torch.tensor([[0.0, 0.0, 1.0, 0.0], [0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0]])
    gen = torch.Generator().manual_seed(0)
    kw = dict(draft_tokens=torch.tensor(tokens), parents=parents, draft_probs=None, sampled=False, generator=gen)
    v = verify_tree(target_probs=probs, **kw)  # p(0) = 0 at the root: rejected, the residual is one-hot on 2
    assert v.path == [] and v.next_token == 2 and v.next_kind == Kind.RESAMPLED
    assert torch.equal(v.residual, probs[0]) and v.accept_probs[0] == 0.0
    probs[0] = torch.tensor([1.0, 0, 0, 0])
    v = verify_tree(target_probs=probs, **kw)  # full depth: the bonus comes from node 1's row
    assert v.path == [0, 1] and v.next_token == 3 and v.next_kind == Kind.BONUS and v.residual is None
    probs[1] = torch.tensor([0.0, 0, 1.0, 0])
    v = verify_tree(target_probs=probs, **kw)  # partial path
    assert v.path == [0] and v.next_token == 2 and v.next_kind == Kind.RESAMPLED


def test_duplicate_rejected_child_is_rejected_again():
    probs = torch.tensor([[0.1, 0.9, 0.0, 0.0]] + [[0.25] * 4] * 2)
    q = torch.tensor([[0.9, 0.1, 0.0, 0.0]] * 2)
    for seed in range(50):
        v = verify_tree(target_probs=probs, draft_tokens=torch.tensor([0, 0]), parents=[-1, -1], draft_probs=q,
                        sampled=True, generator=torch.Generator().manual_seed(seed))
        if v.verdicts[0] == "rejected":
            assert v.verdicts[1] == "rejected" and v.accept_probs[1] == 0.0 and v.next_token == 1


def test_parents_must_come_first():
    with pytest.raises(ValueError, match="parent"):
        greedy([0, 1], [1, -1], [0, 0, 0])
