"""The Teach tab's tree steps in words: `render_tree_step(record, steps, index)` is one step of a tree round's
verification (`specui.tree_steps`) as HTML; `TREE_HELP` explains the walk. Pure functions, no gradio.

Every token text is model output: escaped (`render.escape_text`) and shown as repr(), so whitespace is visible.
"""

from __future__ import annotations

from specui.text import fmt_prob
from specui.tree_steps import DRAFT, END, TreeRecord, TreeStep, depth_of
from specui.ui.render import escape_text

TREE_HELP = """**Token trees, one judged child at a time.** A tree drafter proposes several continuations at once:
each node's top-w draft tokens become its children (tree width w), to depth K (tree nodes 0: the static
tree), or only the N most probable nodes (tree nodes N: EAGLE-2's dynamic tree). The target scores every node
in **one** forward pass, each node seeing only its ancestors. Then it walks down from the root:

1. At a node, it tries the children **in order**. A child x is accepted with probability **p(x)** under what is
   left of p (the children were chosen without randomness, so q plays no part): accepted when the draw **r < p(x)**.
2. A rejected child **leaves p**: its probability is set to 0 and p is renormalised, so the next sibling is judged
   against the mass still in play. (Children *sampled* from q use SpecInfer's rule instead: r < p/q, then
   p ← norm(max(0, p − q)).)
3. An accepted child becomes the new node and its children are tried next. When every child is rejected, the
   target draws its own token from what is left of p (**resampled**); at a node without children it adds a
   **bonus** token from its p there.

Greedy decoding accepts the child equal to the target's top token. Either way the text is an exact sample from
the target. Every number below is the engine's own record of this round."""


def _tok(text: str) -> str:
    return f'<code>{escape_text(repr(text))}</code>'


def _where(record: TreeRecord, node: int) -> str:
    if node < 0:
        # as the chart's legend names it: "the round's first token" read as a token the round emits
        return f"the root {_tok(record.root_text)} (the last token so far, where the tree starts)"
    return f"node {node} {_tok(record.texts[node])} (depth {record.depth(node)})"


def _try(record: TreeRecord, step: TreeStep) -> str:
    n = record.nodes[step.node]
    ok = n.verdict == "accepted"
    head = (f"At {_where(record, step.parent)}, try child {step.sibling}: node {step.node} "
            f"{_tok(record.texts[step.node])} (id {n.token_id}).")
    numbers = f"p(x) = {fmt_prob(n.target_prob)}, q(x) = {fmt_prob(n.draft_prob)} at its parent."
    if not record.greedy and not record.sampled:  # the chain's min(1, p/q) was what a student looked for here
        numbers = numbers[:-1] + " (q chose the children, no draw reads it)."
    if record.greedy:
        rule = ("It is the target's top token here: accepted." if ok
                else "It is not the target's top token here: rejected.")
    elif record.sampled:
        rule = (f"Accepted when r &lt; min(1, p/q) = {fmt_prob(n.accept_prob)}; the draw r = {fmt_prob(n.uniform)}: "
                f"{'accepted' if ok else 'rejected'}.")
    else:
        rule = (f"The mass of p still in play is {fmt_prob(step.mass_left)}, so x is accepted with probability "
                f"p(x) / {fmt_prob(step.mass_left)} = {fmt_prob(n.accept_prob)}; the draw r = {fmt_prob(n.uniform)}: "
                f"{'r &lt; ' if ok else 'r ≥ '}{fmt_prob(n.accept_prob)}, {'accepted' if ok else 'rejected'}.")
    if ok:
        has_kids = any(m.parent == step.node for m in record.nodes)
        after = ("The walk moves to it; its children are tried next." if has_kids
                 else "The walk moves to it; it has no children, so the round ends after it.")
    elif record.greedy:
        after = "The next sibling (if any) is compared with the same top token."
    elif record.sampled:
        after = "The residual update: p ← norm(max(0, p − q)) before the next sibling."
    else:
        after = (f"The residual update: x leaves p (p(x) ← 0) and p is renormalised: the mass in play falls from "
                 f"{fmt_prob(step.mass_left)} to {fmt_prob(step.mass_after)}.")
    verdict = "accepted" if ok else "rejected"
    return (f'<p>{head}</p><p>{numbers} {rule}</p><p class="verdict-{verdict}"><b>{"✓" if ok else "✗"} '
            f'{verdict}.</b> {after}</p>')


def _end(record: TreeRecord, step: TreeStep) -> str:
    if record.final_id is None:
        return "<p>An end-of-text token on the accepted path ended the generation: the round adds nothing more.</p>"
    token = f"{_tok(record.final_text)} (id {record.final_id}; the target's p there = {fmt_prob(record.final_p)})"
    if record.final_kind == "resampled":
        how = ("the target's top token" if record.greedy else "a draw from what is left of p" if not record.sampled
               else "a draw from the residual norm(max(0, p − q))")
        text = f"Every child of {_where(record, step.parent)} was rejected: the round ends with {how}: {token}."
        if record.residual:
            top = ", ".join(f"{_tok(t)} {fmt_prob(p)}" for _, t, p in record.residual[:5])
            text += f" What was left of p, most likely first: {top}."
    else:
        where = _where(record, step.parent)
        text = (f"{where[:1].upper()}{where[1:]} has no children: the target adds a "
                f"bonus token from its p there: {token}.")
    own = f"{_tok(record.final_text)} ({escape_text(record.final_kind)})"
    if not record.path:
        return f"<p>{text}</p><p>This round emits 1 token: {own}.</p>"
    accepted = " ".join(_tok(record.texts[i]) for i in record.path)
    return f"<p>{text}</p><p>This round emits {len(record.path) + 1} tokens: {accepted} (accepted), then {own}.</p>"


def _rule(record: TreeRecord) -> str:
    """How this tree's children are judged and why: they were drawn from q (SpecInfer's min(1, p/q)), or chosen as the
    draft's most likely tokens, so that q plays no part in their check (none in greedy mode: the argmax rule)."""
    if record.greedy:
        return ""
    if record.sampled:
        return ("<p>Each node's children were drawn from the draft's q, so a child is accepted with probability "
                "min(1, p/q), as in a chain; after a rejection p becomes the residual norm(max(0, p − q)).</p>")
    return ("<p>Each node's children are the draft's most likely tokens there, chosen, not drawn from q: so q plays no "
            "part in their check. A child x is accepted with probability p(x) over the mass of p still in play; after "
            "a rejection x leaves p, and the round's own token comes from what is left of p: its tokens still "
            "follow p exactly.</p>")


def render_tree_step(record: TreeRecord | None, steps: list[TreeStep], index: int) -> str:
    """One step (see `specui.tree_steps`) of `record`'s verification as HTML."""
    if record is None or not steps:
        return ('<div class="teach-step teach-empty">Press <b>Decode with a tree</b> to decode the prompt above '
                'with a token tree, then step through a round node by node.</div>')
    index = max(0, min(index, len(steps) - 1))
    step = steps[index]
    head = (f'<div class="teach-head">Round {record.round_index + 1} · step {index + 1} of {len(steps)} · '
            f'{"greedy" if record.greedy else "sampling"}</div>')
    if step.kind == DRAFT:
        body = (f"<p>The drafter proposed {len(record.nodes)} nodes to depth {depth_of(record)} after the root "
                f"{_tok(record.root_text)}. One target forward scored the root and every node: "
                f"{len(record.nodes) + 1} rows of p. The walk starts at the root.</p>{_rule(record)}")
    elif step.kind == END:
        body = _end(record, step)
    else:
        body = _try(record, step)
    return (f'<div class="teach-step teach-tree-step" data-round="{record.round_index + 1}" data-step="{index + 1}" '
            f'data-kind="{step.kind}">{head}{body}</div>')
