"""Token trees for drafters that give distributions: `DraftTree` and `grow`, the two shapes.

A drafter that can draft trees has, besides the `Drafter` methods,
    propose_tree(context, k, *, width, nodes) -> DraftTree   nodes to depth k after `context`
    observe_tree(path, *, features=None)    the accepted nodes, root to leaf (with the target's
                                            states of cur and of those nodes, in path order, when the
                                            drafter reads `target_features`)
`grow` builds the tree from one callback, `expand(frontier, tokens, parents) -> q [len(frontier), V]`:
the draft's distribution (after the shared sampling transform, on the target's vocabulary) at each
frontier node (-1 the root, i.e. after the context). Children are the top-`width` tokens of that q,
chosen deterministically (so verification uses the one-hot rule of `specui.tree_verify`):
- static (nodes == 0): every node to depth k gets `width` children: width + width^2 + ... + width^k nodes;
- dynamic (nodes >= 1, EAGLE-2: Li et al. 2024, "EAGLE-2: Faster Inference of Language Models with
  Dynamic Draft Trees"): at each depth only the `width` nodes with the highest cumulative draft
  probability (the product of q along their path) are expanded, and the best `nodes` nodes of all
  the candidates are kept. A child's cumulative probability never exceeds its parent's, so the kept
  set (ties broken by creation order) always holds every kept node's ancestors.
  Unlike EAGLE-2, the dynamic tree always holds a chain: the top-1 path of q to depth min(k, nodes)
  (the "spine", what a greedy chain of k drafts, up to ties in q) is expanded and kept first, and the
  other nodes fill the rest by cumulative probability. So in greedy decoding a tree round accepts at
  least as many tokens as that chain would from the same state. (Without it, a draft whose q
  undervalues depth, as the stdlib draft's does, spends the budget on siblings near the root: 7 nodes
  at K = 4 accepted 2.97 tokens per forward against the chain's 3.47; with it, 4.00.)
  With a `floor` (the run's draft_confidence) a dynamic tree neither expands nor keeps a node whose path
  probability is below it (the root's top child always stays), so an unsure round verifies fewer rows.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from specui.sampling import path_seen



@dataclass(frozen=True)
class DraftTree:
    tokens: torch.Tensor  # [N] int64 node tokens
    parents: list[int]  # [N] the parent of each node (-1: a child of the root, the round's cur); parents first
    probs: torch.Tensor | None  # [N, V] the q each node was chosen from (its parent's distribution)
    sampled: bool = False  # True: each node's children drawn i.i.d. from q; False: chosen deterministically

    @property
    def size(self) -> int:
        return len(self.parents)


def grow(expand: Callable, *, depth: int, width: int, nodes: int, token_ids: torch.Tensor | None = None,
         vocab_size: int = 0, floor: float = 0.0) -> tuple[DraftTree, list[int]]:
    """Build a tree by calling `expand` once per depth (see the module docstring).

    token_ids: for a drafter with a reduced vocabulary, `expand` gives q over it ([F, len(token_ids)]) and
    the tree's tokens are mapped through it; the kept nodes' q are scattered onto the target's
    `vocab_size` ids at the end (so the children are chosen among a few thousand entries, not all V).
    Returns the tree and, for each of its nodes, the index the node had when `expand` saw it (the
    dynamic shape drops and renumbers nodes; a drafter that keeps per-node state maps it with this).
    """
    low = math.log(floor) if floor > 0 else -math.inf  # dynamic trees: no node whose path is less likely
    tokens: list[int] = []
    parents: list[int] = []
    rows: list[torch.Tensor] = []  # the q each node was chosen from
    scores: list[float] = []  # cumulative log q along the path
    spine: list[int] = []  # the top-1 path from the root: the chain (dynamic trees always hold it)
    level, chosen = [-1], [-1]
    for d in range(depth):
        if d > 0:
            if nodes:  # dynamic: expand the best `width` nodes of this depth, the spine's among them
                best = sorted((i for i in level if scores[i] >= low), key=lambda i: -scores[i])[:width]
                tip = spine[-1] if len(spine) == d and len(spine) < nodes and scores[spine[-1]] >= low else None
                if tip is not None and tip not in best:
                    best = best[: width - 1] + [tip]
                chosen = sorted(best)
            else:
                chosen = level
        if not chosen:
            break
        qs = expand(chosen, tokens, parents)
        top = torch.topk(qs, min(width, qs.shape[-1]), dim=-1)  # one call for the whole frontier
        ids = top.indices if token_ids is None else token_ids.to(top.indices.device)[top.indices]
        level = []
        for node, q, values, children in zip(chosen, qs, top.values.tolist(), ids.tolist()):
            base = 0.0 if node < 0 else scores[node]
            for rank, (value, token) in enumerate(zip(values, children)):
                if value <= 0:
                    break  # tokens outside q's support (top-k, top-p, a reduced vocabulary) are never drafted
                if rank == 0 and node == (spine[-1] if spine else -1) and len(spine) == d:
                    spine.append(len(tokens))  # the top-1 child of the spine's tip
                level.append(len(tokens))
                tokens.append(token)
                parents.append(node)
                rows.append(q)
                scores.append(base + math.log(value))
    keep = list(range(len(tokens)))
    if nodes and floor > 0:  # the root's top child always (a round drafts at least one token)
        keep = [i for i in keep if scores[i] >= low or (spine and i == spine[0])]
        spine = spine[:len(set(spine) & set(keep))]  # the spine's scores fall along it: a prefix stays
    if nodes and len(keep) > nodes:  # the spine first, then the best of the rest (ancestors rank first)
        forced = spine[:nodes]
        rest = sorted(set(keep) - set(forced), key=lambda i: (-scores[i], i))
        keep = sorted(forced + rest[: nodes - len(forced)])
    new = {old: i for i, old in enumerate(keep)}
    device = rows[0].device if rows else "cpu"
    tree = DraftTree(tokens=torch.tensor([tokens[i] for i in keep], dtype=torch.long, device=device),
                     parents=[-1 if parents[i] < 0 else new[parents[i]] for i in keep],
                     probs=on_vocabulary(torch.stack([rows[i] for i in keep]), token_ids, vocab_size) if keep else None)
    return tree, keep


def on_vocabulary(q: torch.Tensor, token_ids: torch.Tensor | None, vocab_size: int) -> torch.Tensor:
    """q [.., N] over a reduced list of ids, scattered onto the full vocabulary [.., V] (zero elsewhere)."""
    if token_ids is None:
        return q
    full = q.new_zeros(*q.shape[:-1], vocab_size)
    return full.index_copy_(-1, token_ids.to(q.device), q)


def ancestry(node: int, parents: list[int]) -> list[int]:
    """node's ancestors, nearest first (-1, the root, excluded)."""
    out = []
    node = parents[node]
    while node >= 0:
        out.append(node)
        node = parents[node]
    return out


def frontier_seen(seen: torch.Tensor | None, frontier: list[int], tokens: list[int], parents: list[int],
                  above: list[list[int]] | None = None) -> torch.Tensor | None:
    """`sampling.path_seen` for a frontier's nodes: each row the context's mask `seen` with the node's path (itself and
    its ancestors) marked, as the target's row at that node sees it; None without a penalty (no path is walked).
    above: each node's `ancestry`, where the caller has walked them already."""
    if seen is None:
        return None
    above = above if above is not None else [ancestry(i, parents) for i in frontier]
    return path_seen(seen, [[tokens[j] for j in (i, *a)] for i, a in zip(frontier, above)])
