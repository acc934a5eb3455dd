"""The Teach tab's two-drafter view as HTML: one round of the primary's run and the second drafter's round
from the same context with the same draws, side by side, and both tallies so far. Pure functions of
`specui.lesson_compare` records, no gradio. Every model or user string is escaped before it becomes HTML.
"""

from __future__ import annotations

from specui.lesson_compare import Comparison, ComparedRound, Tally
from specui.text import fmt
from specui.ui.render import escape_text
from specui.ui.teach_view import added, drafts_table, outcome

NONE = "none"  # the dropdown's "no second drafter"

COMPARE_HELP = """**Two drafters, one round.** Pick a second drafter of this preset: at every round of the run above,
it drafts from the *same context* (the prompt and every token emitted so far), the target checks its block in
one forward, and its drafts are judged with the *same uniform draws u* as the primary's, so a difference in
how many get accepted is the drafters', not luck. Step with **Next round** / **Play** as usual.

In **greedy** mode the target's text is the same whichever drafter drafts: the second drafter's tokens are the
same text, only the number of rounds differs. When **sampling**, the walk follows the primary's text; the
second drafter's tokens show what its round would have drawn. Each round the engine starts the second drafter
afresh on the context (its caches hold the context either way)."""


def waiting(second: str | None, *, decoded: bool) -> str:
    """What the view says while it shows no comparison, by the dropdown's choice (`second`) and whether a run is on
    show (`decoded`): how to get one ("" for the view's own line, when none is chosen)."""
    if not second or second == NONE:
        return ""
    if not decoded:
        return (f"{second} is chosen: press Decode (or Next round ▶) and it drafts beside every round of the run, "
                "from the same context, judged with the same draws.")
    return f"{second} was not compared with this run: pick it again to see why."


def render_compare(compared: Comparison | None, index: int, *, note: str = "") -> str:
    """Round `index` of the comparison (clamped), or a line saying how to get one (`note` when given: `waiting`)."""
    if compared is None or not compared.rounds:
        text = note or "Choose a second drafter (on the right) to see it draft from the same context as the run above."
        return f'<div class="teach-compare teach-empty">{escape_text(text)}</div>'
    index = max(0, min(index, len(compared.rounds) - 1))
    r = compared.rounds[index]
    first, second = compared.tally("primary"), compared.tally("second")
    mode = "greedy" if compared.greedy else "sampling"
    head = (f'<div class="teach-head">Round <span class="teach-round">{index + 1}</span> of {len(compared.rounds)}'
            f' · the same context ({r.context_tokens} tokens) · {mode} · seed {compared.seed}</div>')
    sides = (f'<div class="teach-compare-sides">{_side(r, "primary", first.label)}'
             f'{_side(r, "second", second.label)}</div>')
    return (f'<div class="teach-compare" data-round="{index + 1}" data-rounds="{len(compared.rounds)}">'
            f'{head}{_verdict(compared, r)}{sides}{_tallies(compared, index)}</div>')


def _side(r: ComparedRound, which: str, label: str) -> str:
    step = getattr(r, which)
    role = "primary: the run you step through" if which == "primary" else "second: the same context, the same draws"
    verb = "adds" if which == "primary" else "would add"
    return (f'<div class="teach-side" data-side="{which}" data-accepted="{step.num_accepted}" '
            f'data-drafted="{len(step.drafts)}"><div class="teach-label">{escape_text(role)}</div>'
            f'<div class="teach-head">{escape_text(label)}</div>{drafts_table(step)}{outcome(step, chart=False)}'
            f'{added(step, verb=verb)}</div>')


def _verdict(compared: Comparison, r: ComparedRound) -> str:
    """One line: how many each gets accepted here, and what they share (drafts, draws, text)."""
    a, b = r.primary, r.second
    names = compared.tally("primary").label, compared.tally("second").label
    parts = [f"{escape_text(names[0])}: {a.num_accepted} of {len(a.drafts)} accepted, {len(a.emitted)} "
             f"{_tokens(len(a.emitted))}; {escape_text(names[1])}: {b.num_accepted} of {len(b.drafts)} accepted, "
             f"{len(b.emitted)} {_tokens(len(b.emitted))}."]
    if r.same_drafts:
        parts.append(f"Their first {r.same_drafts} {_drafts(r.same_drafts)} agree.")
    if compared.greedy:
        parts.append("Greedy: no draws; a draft is kept when it is the target's top token, so both add the same text.")
    elif r.shared_draws:
        parts.append(f"Both were judged with the same u for the first {r.shared_draws} {_drafts(r.shared_draws)}.")
    return f'<div class="teach-outcome teach-compare-verdict">{" ".join(parts)}</div>'


def _tokens(n: int) -> str:
    return "token" if n == 1 else "tokens"


def _drafts(n: int) -> str:
    return "draft" if n == 1 else "drafts"


def _tallies(compared: Comparison, index: int) -> str:
    """Both drafters added up over rounds 1..index+1 and over the whole run."""
    heads = ["drafter", "rounds", "accepted / drafted", "acceptance rate", "tokens per round"]
    rows = []
    for which in ("primary", "second"):
        so_far = "round 1" if index == 0 else f"rounds 1–{index + 1}"
        for upto, when in ((index + 1, so_far), (None, "whole run")):
            t: Tally = compared.tally(which, upto=upto)
            rows.append(f'<tr class="teach-point" data-side="{which}"><td class="text">{escape_text(t.label)}'
                        f' ({when})</td><td class="num">{t.rounds}</td><td class="num">{t.accepted} / {t.drafted}</td>'
                        f'<td class="num">{fmt(t.acceptance_rate)}</td>'
                        f'<td class="num">{fmt(t.tokens_per_round, ".2f")}</td></tr>')
    head = "".join(f'<th class="num">{h}</th>' for h in heads)
    return (f'<table class="teach-table teach-points teach-compare-tally"><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table>')
