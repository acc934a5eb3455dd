"""Verification of one drafted token tree: exact multi-draft speculative sampling.

A tree round drafts N nodes; node i holds token x_i and its parent (-1: a child of the root, the
round's first token "cur"). One target forward gives p at the root (row 0) and at every node (row
i + 1). Starting at the root, the target walks down the tree: at a node it tries the node's children
in index order; an accepted child becomes the next node; when every child is rejected, the round ends
with a token from what is left of p ("resampled"); at a node without children the round ends with a
token from the target's p there ("bonus"). Each walk emits tokens distributed exactly as the target
alone would emit them, by one of two rules, chosen by how the drafter picked the children:

- sampled children (SpecInfer, Miao et al. 2024, "multi-step speculative sampling"): the children of
  a node are drawn i.i.d. from one q, with replacement (duplicates allowed). Child x is accepted when
  r < p(x)/q(x), i.e. with probability min(1, p(x)/q(x)); on rejection p <- norm(max(0, p - q)) before
  the next child. A duplicate of a rejected child has p(x) = 0 by then and is rejected again.
- deterministic children (distinct tokens chosen without randomness, e.g. the draft's top-w: the
  static trees and EAGLE-2's dynamic trees): the rule above with a one-hot q. Child x is accepted when
  r < p(x) (the current p); on rejection p(x) <- 0 and p is renormalised. q plays no part in it.
Either way the first child is accepted with the right probability and, given a rejection, the rest
is exactly the target's law conditioned on that rejection; by induction over children and depth the
emitted tokens follow p.

Names, once:
    p(x)    target distribution at a node      -> target_probs[row]  (after the shared sampling transform)
    q(x)    draft distribution a child came from -> draft_probs[i]  (sampled rule only)
    x_i     drafted token of node i            -> draft_tokens[i];  parent -> parents[i]
    r       uniform draw of a judged child     -> TreeVerdict.uniforms[i]
Greedy decoding follows the target's argmax (taken of the logits, as plain decoding takes it) down
the tree: the child equal to it is accepted; otherwise the argmax ends the round.

This module is pure: tensors in, a TreeVerdict out. No model calls, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from specui.events import Kind
from specui.sampling import sample
from specui.verify_rule import _residual  # one residual rule for chains and trees

ACCEPTED, REJECTED, UNVISITED = "accepted", "rejected", "unvisited"  # a node's verdict


@dataclass(frozen=True)
class TreeVerdict:
    path: list[int]  # the accepted nodes, root to leaf (indices into the tree)
    next_token: int  # the round's last token: resampled at the last accepted node, or the bonus
    next_kind: str  # Kind.RESAMPLED (its children were all rejected) or Kind.BONUS (it has none)
    verdicts: list[str]  # per node: "accepted", "rejected" or "unvisited" (never judged)
    accept_probs: list[float | None]  # per node: min(1, p/q) (sampled), p(x) (deterministic), 1/0 (greedy)
    uniforms: list[float | None]  # per node: the draw r it was judged with (None: unjudged or greedy)
    residual: torch.Tensor | None  # [V] what was left of p when every child was rejected, else None


def children_of(parents: list[int]) -> dict[int, list[int]]:
    """parent (-1 the root) -> its children in index order."""
    out: dict[int, list[int]] = {}
    for i, parent in enumerate(parents):
        out.setdefault(parent, []).append(i)
    return out


def check_tree(parents: list[int]) -> None:
    """Parents come before their children: parents[i] in [-1, i)."""
    for i, parent in enumerate(parents):
        if not -1 <= parent < i:
            raise ValueError(f"tree node {i} has parent {parent}; a parent must be -1 (the root) or an earlier node")


def verify_tree(*, target_probs: torch.Tensor, draft_tokens: torch.Tensor, parents: list[int],
                draft_probs: torch.Tensor | None, sampled: bool, generator: torch.Generator | None,
                target_argmax: torch.Tensor | None = None) -> TreeVerdict:
    """Decide one tree round.

    target_probs: [N+1, V] p at the root (row 0) and at node i (row i + 1). Unused in greedy mode.
    draft_tokens: [N] int64 node tokens; parents: [N] ints (-1: a child of the root), parents first.
    draft_probs:  [N, V] the q node i was drawn from; needed when `sampled`, ignored otherwise.
    sampled:      True: children drawn i.i.d. from q (SpecInfer's rule); False: chosen deterministically.
    generator:    the source of every draw (on target_probs' device). Unused in greedy mode.
    target_argmax: greedy decoding: [N+1] int64 argmax of the target's logits per row; None: sampling.
    """
    check_tree(parents)
    n = len(parents)
    tokens = draft_tokens.tolist()
    kids = children_of(parents)
    verdicts, accept_probs, uniforms = [UNVISITED] * n, [None] * n, [None] * n
    if target_argmax is not None:
        best = target_argmax.tolist()
        node, path = -1, []
        while True:
            hit = None
            for c in kids.get(node, []):
                ok = tokens[c] == best[node + 1]
                verdicts[c], accept_probs[c] = (ACCEPTED if ok else REJECTED), float(ok)
                if ok:
                    hit = c
                    break
            if hit is None:
                kind = Kind.RESAMPLED if kids.get(node) else Kind.BONUS
                return TreeVerdict(path, best[node + 1], kind, verdicts, accept_probs, uniforms, None)
            path.append(hit)
            node = hit
    if sampled and draft_probs is None:
        raise ValueError("sampled children need draft_probs (the q they were drawn from)")
    node, path = -1, []
    while True:
        p = target_probs[node + 1]
        children = kids.get(node, [])
        hit = None
        for c in children:
            x = tokens[c]
            r = float(torch.rand(1, generator=generator, device=p.device))
            p_x = float(p[x])
            if sampled:
                q = draft_probs[c]
                q_x = float(q[x])
                ok = q_x > 0 and r * q_x < p_x  # r < p/q without dividing by zero
                accept_probs[c] = min(1.0, p_x / q_x) if q_x > 0 else 0.0
            else:
                ok = r < p_x
                accept_probs[c] = p_x
            verdicts[c], uniforms[c] = (ACCEPTED if ok else REJECTED), r
            if ok:
                hit = c
                break
            p = _residual(p, q if sampled else None, x)
        if hit is None:
            if not children:  # a leaf: the bonus comes from the target's p at it
                return TreeVerdict(path, int(sample(p, generator)), Kind.BONUS, verdicts, accept_probs, uniforms, None)
            return TreeVerdict(path, int(sample(p, generator)), Kind.RESAMPLED, verdicts, accept_probs, uniforms, p)
        path.append(hit)
        node = hit
