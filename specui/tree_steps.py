"""A tree round, told in order: `TreeRecord` (one round's tree with token texts) and `tree_steps` (its
verification, one judged child at a time).

`specui.tree_verify` walks a drafted token tree from the root: at each node it tries the children in
index order until one is accepted (the walk moves to it) or all are rejected (the round ends with a
token from what is left of p); at a node without children the round ends with a bonus token. The
engine records every node's verdict, p, q, acceptance probability and draw (`events.TreeNode`); this
module replays that walk from the records, nothing recomputed but the bookkeeping between them:

    draft   the tree as drafted: N nodes to depth D, scored by one target forward
    try     one child judged: its p and q at its parent, the acceptance probability, the draw, the verdict
            and, after a rejection, what is left of p for the next sibling
    end     the round's own token: resampled from the residual (every child rejected), the bonus (a
            leaf was reached), or nothing (EOS inside the path ended the generation)

The residual after a rejection, by the rule the drafter's children call for (`Round.tree_sampled`):
deterministic children (top-w, the static and EAGLE-2 trees): the rejected token leaves p and p is
renormalised, so the next sibling x' is accepted with p(x') / (the mass of p still in play): `mass_left`
tracks that mass, and each child's recorded acceptance probability equals p(x') / mass_left. Sampled
children (SpecInfer): p <- norm(max(0, p - q)), which the records cannot replay (no mass_left).
Greedy: the child equal to the target's argmax is accepted; no draws, no residual.

`tree_record` is the only function here that reads a tokenizer (for the texts); the rest is pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from specui.events import Round, TreeNode
from specui.text import TokenText
from specui.tree_verify import ACCEPTED, REJECTED, children_of

DRAFT, TRY, END = "draft", "try", "end"  # the kinds of step


@dataclass(frozen=True)
class TreeRecord:
    """One tree round with every token's text: what the tree chart and the tree steps are drawn from."""

    round_index: int
    nodes: tuple[TreeNode, ...]
    path: tuple[int, ...]  # the accepted nodes, root to leaf
    texts: tuple[str, ...]  # per node: its token's text after its ancestors
    root_text: str  # the round's first token ("cur", the context's last): the tree's root
    greedy: bool
    sampled: bool  # children drawn i.i.d. from q (SpecInfer's rule); False: chosen deterministically
    final_id: int | None  # the round's own token (None: EOS inside the path ended the generation)
    final_text: str
    final_kind: str  # "resampled" | "bonus" ("" when there is none)
    final_p: float | None  # p of the round's own token at the last accepted node
    residual: tuple[tuple[int, str, float], ...] = ()  # at a resample: the residual's top (id, text, prob)

    def depth(self, node: int) -> int:
        """1 for a child of the root; the root itself (-1) is at depth 0."""
        d = 0
        while node >= 0:
            node, d = self.nodes[node].parent, d + 1
        return d


@dataclass(frozen=True)
class TreeStep:
    """One step of a tree round's verification (see the module docstring)."""

    index: int
    kind: str  # draft | try | end
    tried: tuple[int, ...]  # the nodes judged so far, this one included, in order
    path: tuple[int, ...]  # the nodes accepted so far
    node: int | None = None  # try: the child judged
    parent: int = -1  # try: its parent (-1 the root); end: the node the round ended at
    sibling: int = 0  # try: 1 for the first child tried at this parent, 2 for the next...
    mass_left: float | None = None  # try, deterministic: the mass of the parent's p still in play before it
    mass_after: float | None = None  # try, deterministic, rejected: the mass left for the next sibling


def tree_record(round_: Round, *, tokenizer, context_ids: Sequence[int], greedy: bool) -> TreeRecord:
    """The tree of `round_` (a tree round) with texts: `context_ids` are the tokens before the round
    (the prompt and every earlier round's tokens; its last is the root)."""
    nodes, path = tuple(round_.tree or ()), tuple(round_.tree_path or ())
    context = list(context_ids)

    def text_after(node: int, token: int) -> str:  # `token`'s text after `node` and its ancestors
        chain = []
        while node >= 0:
            chain.append(nodes[node].token_id)
            node = nodes[node].parent
        return TokenText(tokenizer, context[-4:] + chain[::-1]).peek(token)

    texts = tuple(text_after(n.parent, n.token_id) for n in nodes)
    root_text = TokenText(tokenizer, context[-5:-1]).peek(context[-1]) if context else ""
    n = len(path)
    final = n < len(round_.token_ids)
    final_id = int(round_.token_ids[n]) if final else None
    last = path[-1] if path else -1
    residual = tuple((int(t), text_after(last, int(t)), float(prob)) for t, prob in round_.residual_top)
    return TreeRecord(round_index=round_.index, nodes=nodes, path=path, texts=texts, root_text=root_text,
                      greedy=greedy, sampled=round_.tree_sampled, final_id=final_id,
                      final_text=text_after(last, final_id) if final else "",
                      final_kind=str(round_.kinds[n]) if final else "",
                      final_p=float(round_.token_target_probs[n]) if final else None, residual=residual)


def tree_steps(record: TreeRecord) -> list[TreeStep]:
    """The verification of `record`'s tree in order: the draft, each judged child, the round's own token."""
    kids = children_of([n.parent for n in record.nodes])
    steps = [TreeStep(index=0, kind=DRAFT, tried=(), path=())]
    tried: list[int] = []
    path: list[int] = []
    node = -1
    replay = not record.greedy and not record.sampled  # the deterministic rule: the residual mass is known
    while True:
        mass, hit = 1.0, None
        for sibling, child in enumerate(kids.get(node, []), 1):
            verdict = record.nodes[child].verdict
            if verdict not in (ACCEPTED, REJECTED):
                break  # never judged (a sibling before it was accepted)
            tried.append(child)
            after = None
            if verdict == ACCEPTED:
                hit = child
                path.append(child)
            elif replay:
                after = max(0.0, mass - record.nodes[child].target_prob)
            steps.append(TreeStep(index=len(steps), kind=TRY, tried=tuple(tried), path=tuple(path), node=child,
                                  parent=node, sibling=sibling, mass_left=mass if replay else None,
                                  mass_after=after))
            if hit is not None:
                break
            mass = after if after is not None else mass
        if hit is None:
            steps.append(TreeStep(index=len(steps), kind=END, tried=tuple(tried), path=tuple(path), parent=node))
            return steps
        node = hit


def depth_of(record: TreeRecord) -> int:
    """The tree's depth (0 for an empty tree)."""
    return max((record.depth(i) for i in range(len(record.nodes))), default=0)
