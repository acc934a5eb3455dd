"""A chat run drawn as the page shows it at one moment: its `Frame` (the message, the stats line, the charts and,
once both runs are done, the race replay) from the `Run` as it stands, streamed or final; an arena run's through
`arena_view`. Pure functions of the run, no gradio: `session.Showcase.frame` draws each frame it yields with `frame`.
"""

from __future__ import annotations

from specui import runstats
from specui.text import STOP_REASONS, fmt
from specui.ui import arena_view, charts, render, stats
from specui.ui.runs import STOPPED, Frame, Run

PHASES = {"speculative": "Decoding speculatively…", "plain": "Decoding plainly (target alone) for the comparison…",
          "arena": "Arena: decoding…", "stopped": "Stopped.", "done": ""}
# a pair's first run, before its first token: what the page says while each path runs once (`Showcase.warm_up`)
WARMING = ("Warming up: a few tokens with the drafter and without, once for this preset, so that its one-time "
           "set-up is not timed as decoding…")


def frame(run: Run, *, figures: bool = False, final: bool = False) -> Frame:
    """Render the run as it stands."""
    if run.settings.arena:
        view = arena_view.view(run, figures=figures, final=final)
        return Frame(message=view.message, stats=view.stats, figures=view.figures, table=view.table,
                     race=view.race, done=final)
    spec_stats, plain_stats = run.stats()
    streaming = "" if final else ("plain" if run.phase == "plain" else "spec")
    note = STOPPED if run.phase == "stopped" else STOP_REASONS.get(run.spec.stop_reason, "") if final else ""
    copy, lead = run.reply_text if final else None, run.left_out_note  # lead: the message's start in every frame
    if run.settings.compare:
        verdict = ""
        if final and run.phase == "done":
            verdict = render.render_verdict(
                identical=run.identical, speedup=runstats.speedup(spec_stats, plain_stats),
                first_difference=runstats.first_difference(run.spec.token_ids, run.plain.token_ids),
                explanation=_divergence_note(run) if run.identical is False else "")
        spec_title, plain_title = "speculative", "plain (target alone)"
        if spec_stats and run.phase != "speculative":
            spec_title += f" · {fmt(spec_stats.tokens_per_s, '.1f')} tokens/s"
        if plain_stats and final:
            plain_title += f" · {fmt(plain_stats.tokens_per_s, '.1f')} tokens/s"
        message = render.render_reply(run.spec_views, plain=run.plain_views, spec_title=spec_title,
                                      plain_title=plain_title, note=note, verdict=verdict, streaming=streaming,
                                      copy=copy, lead=lead)
    else:
        message = render.render_reply(run.spec_views, note=note, streaming=streaming, copy=copy, lead=lead)
    race = None
    if final and run.settings.compare and run.phase == "done" and run.plain is not None:
        race = race_replay(run)
    return Frame(message=message, stats=stats.stats_html(spec_stats, plain_stats, status=PHASES[run.phase],
                                                         seed=None if run.settings.greedy else run.spec.seed),
                 figures=all_figures(run) if figures else None, race=race, done=final)


def all_figures(run: Run) -> dict:
    """`charts.all_figures` of the run, the speculative run's own charts (all but the speed chart) built again only
    once it has rounds they do not draw: in compare mode they stand still through the plain run and the final frame,
    where each frame due a chart built them again (the same figures, 3 of its 4 charts' work)."""
    rounds = len(run.spec.rounds)
    if run.spec_charts is None or run.spec_charts[0] != rounds:
        built = charts.all_figures(run.spec, run.plain)
        run.spec_charts = (rounds, {name: figure for name, figure in built.items() if name != "chart-speed"})
        return built
    return {"chart-speed": charts.speed_figure(run.spec, run.plain), **run.spec_charts[1]}


def race_replay(run: Run, nonce: int = 0) -> str:
    """The race replay of a compare run: the speculative and the plain run, each at its measured pace (engine time)."""
    spec_s, plain_s = runstats.engine_seconds(run.spec), runstats.engine_seconds(run.plain)
    return render.render_race([(f"speculative · {fmt(spec_s, '.2f')} s", run.spec_views, spec_s),
                               (f"plain · {fmt(plain_s, '.2f')} s", run.plain_views, plain_s)], nonce=nonce)


def _divergence_note(run) -> str:
    """Why two greedy outputs differ, in words: a near-tie (reduced precision) or not explained."""
    divergence = runstats.explain_divergence(run.spec.token_ids, runstats.token_probs(run.spec),
                                             run.plain.token_ids, runstats.token_probs(run.plain))
    if divergence is None:
        return ""
    return divergence.describe()
