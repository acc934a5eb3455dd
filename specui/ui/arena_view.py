"""The chat tab's arena mode, drawn: the message, the stats line, the table, the charts and the race replay
of an arena run as it stands (plain decoding, then every drafter of the preset, one after another: `specui.arena`).

Pure functions of the session's `Run` (its `arena` results and `arena_views`); no gradio. The numbers are
`specui.arena.summarise`'s, formatted by `specui.ui.stats`, drawn by `specui.ui.charts` and `render`. The arena's
own HTML is here too (`render_arena`: who proposed each token, every contestant's lane; `render_arena_verdict`),
from `render`'s token spans; every text in it goes through `render.escape_text` or `render.attribute`.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass

from specui import arena, runstats
from specui.events import Kind
from specui.text import fmt
from specui.ui import charts, render, stats
from specui.ui.render import (PART_NOTE, SPECIAL_NOTE, TEXT_STYLE, TokenView, attribute, closed_bidi, escape_text,
                              open_tokens, part_class, render_copy, render_note, render_tokens)
from specui.ui.runs import STOPPED


@dataclass(frozen=True)
class ArenaView:
    message: str  # the assistant's message (HTML)
    stats: str  # the stats line (HTML)
    table: list[list[str]] | None  # the table's rows, when figures are due
    figures: dict | None  # element id -> plotly figure, when due
    race: str | None = None  # every run replayed at its measured pace, once the arena is done


def outcome(run) -> arena.Arena | None:
    """The arena so far (None before plain decoding starts)."""
    if arena.PLAIN not in run.arena:
        return None
    return arena.summarise(run.arena, greedy=run.settings.greedy, skipped=run.skipped, settings=run.settings.decode,
                           ks=run.arena_ks, confidences=run.arena_confidences)


def _title(name: str, standing: arena.Standing | None) -> str:
    title = arena.label(name)
    if standing is not None and standing.finished:
        title += f" · {fmt(standing.stats.tokens_per_s, '.1f')} tokens/s"
        if name != arena.PLAIN:
            rate = fmt(standing.stats.acceptance_rate, ".2f")  # the table's column; α is the stats line's fitted one
            said = "acceptance along the path" if standing.stats.trees else "acceptance rate"  # as the stats line
            title += (f" · {fmt(standing.speedup, '.2f×')} · {said} {rate}"
                      f" · {fmt(standing.stats.mean_accepted_length, '.2f')} tokens/round")
    return title


def _verdict(run, result: arena.Arena | None, *, final: bool) -> str:
    if result is None or not final or run.phase != "done":
        return ""
    plain = result.standing(arena.PLAIN).result.token_ids
    differ = [(s.label, runstats.first_difference(s.result.token_ids, plain))
              for s in result.standings if s.identical is False]
    return render_arena_verdict(greedy=result.greedy, differ=differ, finished=True)


def _status(run, *, final: bool) -> str:
    if run.phase == "stopped":
        return "Stopped."
    if final:
        left_out = "".join(f" {arena.label(name)}: skipped, it {arena.skip_reason(name)}." for name in run.skipped)
        plain = run.arena.get(arena.PLAIN)  # the seed every contestant took: a sampled arena's replays with it
        seed = f" ({plain.seed})" if plain is not None and not run.settings.greedy else ""
        return f"Arena: {len(run.arena)} runs, one after another, the same prompt, settings and seed{seed}.{left_out}"
    return f"Arena: decoding with {arena.label(run.contestant)}…" if run.contestant else "Arena…"


def view(run, *, figures: bool = False, final: bool = False) -> ArenaView:
    """The arena run as it stands: who proposed each token, every contestant's lane, the verdict at the end.

    A streamed frame grows at its end alone (`render_arena`, left open after the streaming lane's last token):
    the who-proposed-it line credits the runs done and the streaming lane's title is its name, so a contestant's frames
    after its first go as appends (gradio's queue sends what they gained), where each frame went whole (20-40 kB)."""
    result = outcome(run)
    streaming = "" if final else run.contestant
    standings = {s.name: s for s in result.standings if s.name != streaming} if result is not None else {}
    lanes = [(name, _title(name, standings.get(name)), views) for name, views in run.arena_views.items()]
    done = {name: ran for name, ran in run.arena.items() if name != streaming}  # the runs the who line credits
    credits = [] if arena.PLAIN not in done else list(zip(run.arena_views.get(arena.PLAIN, []), (
        result.credits if streaming not in run.arena else arena.credits(done))))  # all done: the summary's
    message = render_arena(credits, lanes, labels={name: arena.label(name) for name in done},
                                  verdict=_verdict(run, result, final=final),
                                  note=STOPPED if run.phase == "stopped" else "", lead=run.left_out_note,
                                  streaming=streaming, copy=run.reply_text if final else None)
    charts_now = ({**charts.arena_run_figures(run.arena), "chart-arena": charts.arena_figure(result)} if figures
                  else None)
    return ArenaView(message=message, stats=stats.stats_html(None, status=_status(run, final=final)),
                     table=stats.arena_rows(result) if figures else None, figures=charts_now,
                     race=race(run) if final and run.phase == "done" else None)


def race(run) -> str:
    """The race replay of every contestant, each at its measured pace (engine time)."""
    lanes = []
    for name, views in run.arena_views.items():
        seconds = runstats.engine_seconds(run.arena[name])
        lanes.append((f"{arena.label(name)} · {fmt(seconds, '.2f')} s", views, seconds))
    return render.render_race(lanes)


# -- the arena's HTML ----------------------------------------------------------------------------------

ARENA_KINDS = {Kind.ACCEPTED: "proposed it", Kind.RESAMPLED: "proposed another token (the target resampled)",
               Kind.BONUS: "had no draft left here (the target's bonus token)"}
NOT_REACHED = "has not decoded this far (or its output parted before)"


def credit_span(text: str, credit, labels: dict[str, str], *, special: bool = False) -> str:
    """One token of plain decoding's output, coloured by the drafter that proposed it in its own run
    (`arena-NAME`; `arena-many` for several, `arena-none` for none); the tooltip says what each did there.
    special: a special token (an end of turn), shown small as a marker, as in the chat (`tok-special`)."""
    by = credit.drafted_by
    cls = f"arena-{by[0]}" if len(by) == 1 else "arena-many" if by else "arena-none"
    cls += " tok-special" if special else ""
    did: dict[str, list[str]] = {}  # what a drafter did here -> who did it (a tooltip per token: kept short)
    for name, kind in credit.kinds.items():
        did.setdefault(ARENA_KINDS.get(kind, NOT_REACHED), []).append(labels.get(name, name))
    says = [f"{what}: {', '.join(names)}" for what, names in did.items()]
    says += [SPECIAL_NOTE] if special else [] if text else [PART_NOTE]
    title = " · ".join([f"token {credit.index + 1}: {credit.token_id} {text!r}", *says])
    cls += part_class(text, special=special)
    shown = escape_text(closed_bidi(text))
    return f'<span class="tok {html.escape(cls)}" title="{attribute(title)}">{shown}</span>'


def arena_key(names: Sequence[str], labels: dict[str, str]) -> str:
    """The colour key of the who-proposed-it line."""
    items = [(f"arena-{n}", labels.get(n, n)) for n in names] + [("arena-many", "several drafters"),
                                                                ("arena-none", "no drafter (the target's own)")]
    spans = "".join(f'<span class="tok {html.escape(c)}">{escape_text(t)}</span>' for c, t in items)
    return f'<div class="arena-key">{spans}</div>'


def render_arena(credits: Sequence[tuple[str, object]], lanes: Sequence[tuple[str, str, Sequence[TokenView]]], *,
                 labels: dict[str, str], verdict: str = "", note: str = "", streaming: str = "",
                 copy: str | None = None, lead: str = "") -> str:
    """The arena's message: plain decoding's output with each token coloured by the drafter(s) that proposed
    it, then every contestant's own run (its tokens coloured by kind, as in the chat).

    credits: (token view, `specui.arena.Credit`) per token of plain decoding's output.
    lanes: (contestant name, title, token views); streaming names the last, still streaming: the message is left open
    after its last token, with the caret, and nothing after it (as `render_reply`'s streamed frames).
    copy: the reply's text (plain decoding's), for a "Copy reply" button. lead: as `render_reply`'s, its start.
    """
    drafters = [name for name, _, _ in lanes if name in labels and name != "plain"]
    who = ""
    if credits and drafters:
        spans = "".join(credit_span(view.text, credit, labels, special=view.special) for view, credit in credits)
        who = (f'<div class="arena-head">Who proposed each token (in its own run; hover for every drafter)</div>'
               f'{arena_key(drafters, labels)}<div class="specui-text" style="{TEXT_STYLE}">{spans}</div>')
    rows = "".join(f'<div class="arena-lane"><div class="specui-col-title">{escape_text(title)}</div>'
                   + (open_tokens(views, cursor=True) if streaming == name else f"{render_tokens(views)}</div>")
                   for name, title, views in lanes)
    start = f'<div class="specui-out specui-arena">{render_note(lead)}{who}{rows}'
    return start if streaming else f"{start}{verdict}{render_note(note)}{render_copy(copy)}</div>"


def render_arena_verdict(*, greedy: bool, differ: Sequence[tuple[str, int | None]], finished: bool) -> str:
    """The arena's result line: in greedy mode, whether every drafter's output equals plain decoding's
    (differ: (label, first differing token) of those that do not)."""
    if not greedy:
        text = ('<span class="specui-sampled">sampling: every run is an exact draw from the target, so the '
                'outputs may differ; a token is credited while a run agrees with plain decoding</span>')
    elif differ:
        where = ", ".join(f"{label} at token {i}" for label, i in differ)
        text = f'<span class="specui-different">✗ outputs differ from plain decoding: {escape_text(where)}</span>'
    elif finished:
        text = '<span class="specui-identical">✓ every drafter\'s output identical to plain decoding (greedy)</span>'
    else:
        return ""
    return f'<div class="specui-verdict">{text}</div>'
