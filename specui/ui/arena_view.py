"""The chat tab's arena mode, drawn: the message, the stats line, the table, the charts and the race replay
of an arena run as it stands (plain decoding, then every drafter of the preset, one after another: `specui.arena`).

Pure functions of the session's `Run` (its `arena` results and `arena_views`); no gradio. The numbers are
`specui.arena.summarise`'s, formatted by `specui.ui.stats`, drawn by `specui.ui.charts` and `render`.
"""

from __future__ import annotations

from dataclasses import dataclass

from specui import arena, runstats
from specui.text import fmt
from specui.ui import charts, render, stats
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
                           ks=run.arena_ks)


def _title(name: str, standing: arena.Standing | None) -> str:
    title = arena.label(name)
    if standing is not None and standing.finished:
        title += f" · {fmt(standing.stats.tokens_per_s, '.1f')} tokens/s"
        if name != arena.PLAIN:
            rate = fmt(standing.stats.acceptance_rate, ".2f")  # the table's column; α is the stats line's fitted one
            title += (f" · {fmt(standing.speedup, '.2f×')} · acceptance rate {rate}"
                      f" · {fmt(standing.stats.mean_accepted_length, '.2f')} tokens/round")
    return title


def _verdict(run, result: arena.Arena | None, *, final: bool) -> str:
    if result is None or not final or run.phase != "done":
        return ""
    plain = result.standing(arena.PLAIN).result.token_ids
    differ = [(s.label, runstats.first_difference(s.result.token_ids, plain))
              for s in result.standings if s.identical is False]
    return render.render_arena_verdict(greedy=result.greedy, differ=differ, finished=True)


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

    A streamed frame grows at its end alone (`render.render_arena`, left open after the streaming lane's last token):
    the who-proposed-it line credits the runs done and the streaming lane's title is its name, so a contestant's frames
    after its first go as appends (gradio's queue sends what they gained), where each frame went whole (20-40 kB)."""
    result = outcome(run)
    streaming = "" if final else run.contestant
    standings = {s.name: s for s in result.standings if s.name != streaming} if result is not None else {}
    lanes = [(name, _title(name, standings.get(name)), views) for name, views in run.arena_views.items()]
    done = {name: ran for name, ran in run.arena.items() if name != streaming}  # the runs the who line credits
    credits = [] if arena.PLAIN not in done else list(zip(run.arena_views.get(arena.PLAIN, []), (
        result.credits if streaming not in run.arena else arena.credits(done))))  # all done: the summary's
    message = render.render_arena(credits, lanes, labels={name: arena.label(name) for name in done},
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
