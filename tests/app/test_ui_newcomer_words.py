"""What a newcomer found unsaid on the page, said: a drafter's confidence stop in the arena's K column ("≤ 6", as the
benchmark's table writes "<=6") and in the preset's line; a speedup below 1× in the stats line, with why in its
tooltip; the Teach tab's best K one its K slider can set. Hand-made runs and records: no model, no server."""

from __future__ import annotations

import html
import re

from specui import arena
from specui.runstats import RunStats
from specui.settings import DecodeSettings
from specui.ui import arena_view, stats
from specui.ui.request import Settings
from specui.ui.runs import Run
from tests.app.test_ui_arena import result_of


def _results(*names):
    drafted = [[(1, "accepted"), (2, "accepted"), (3, "resampled")], [(4, "bonus")]]
    return {"plain": result_of([[(t, "plain")] for t in (1, 2, 3, 4)], plain=True),
            **{name: result_of(drafted) for name in names}}


def _k_column(outcome) -> dict[str, str]:
    return {row[0]: row[1] for row in stats.arena_rows(outcome)}


def test_the_arena_says_k_at_most_where_a_confidence_stop_may_end_a_round_sooner():
    """The chat preset's arena: the draft model at K 4 with its own stop 0.5 drafts up to 4 ("≤ 4"), EAGLE under the
    slider's stop too; Medusa at K 1 drafts its one token whatever its confidence, and prompt lookup has none to stop
    on: their K is exact. Without any stop, K is exact for all."""
    results = _results("model", "eagle", "medusa", "prompt_lookup")
    slider = DecodeSettings(num_draft_tokens=4, draft_confidence=0.6)
    ks, own = {"medusa": 1, "prompt_lookup": 2}, {"model": 0.5}
    k = _k_column(arena.summarise(results, greedy=True, settings=slider, ks=ks, confidences=own))
    assert k == {"plain (target alone)": "–", "draft model": "≤ 4", "EAGLE": "≤ 4", "Medusa": "1", "prompt lookup": "2"}
    none = DecodeSettings(num_draft_tokens=4)  # the slider at 0: only the drafter with its own stop
    k = _k_column(arena.summarise(results, greedy=True, settings=none, ks=ks, confidences=own))
    assert k["draft model"] == "≤ 4" and k["EAGLE"] == "4"
    tree = DecodeSettings(num_draft_tokens=4, tree_width=2, tree_nodes=7)  # a tree: the settings' floor, not its own
    assert _k_column(arena.summarise(results, greedy=True, settings=tree, ks=ks, confidences=own))["draft model"] == "4"
    assert arena.k_said(6, 0.6, "eagle", at_most="<=") == "<=6"  # the benchmark's table, the same rule
    assert arena.k_said(2, 0.6, "prompt_lookup", at_most="<=") == "2" and arena.k_said(None, 0.6, "plain") == "–"
    # a drafter that copies drafts past a K below its copy's length (6 tokens with the draft model): K as chosen
    assert arena.k_said(4, 0.5, "model_lookup") == "4" and arena.k_said(4, 0.5, "early_exit_lookup") == "4"


def test_the_served_arena_gives_the_table_each_drafters_own_stop():
    """The page's table comes from `arena_view.outcome(run)`: the preset's own stops, which the run raced with
    (`runs.streams` keeps them on the run), reach it."""
    run = Run(settings=Settings(arena=True, num_draft_tokens=6), arena=_results("model", "medusa"),
              arena_ks={"medusa": 1}, arena_confidences={"model": 0.5})
    assert _k_column(arena_view.outcome(run)) == {"plain (target alone)": "–", "draft model": "≤ 6", "Medusa": "1"}


def test_the_served_arenas_k_column_says_what_each_contestant_raced_with_whatever_the_slider():
    """The Chat tab's arena as `runs.streams` opens it for the chat preset, its confidence slider at 0 and at 0.6,
    chains and a tree: each contestant's K reads "≤ K" exactly where the settings it raced with (those the engine got)
    hold a stop that may end its rounds sooner. The drafters with their own stop race with it whatever the slider;
    the others with the slider's."""
    from specui.presets import load_config
    from specui.ui import runs

    class Engine:  # the engine's part the arena opens: each contestant's settings, recorded
        drafters = ("model", "model_lookup", "eagle", "medusa", "early_exit", "prompt_lookup")

        def __init__(self):
            self.raced = {}

        def stream(self, ids, settings, into):
            self.raced[settings.drafter if settings.speculative else "plain"] = settings
            return iter(())

    chat = load_config(None).get("smollm2-chat")
    for slider, width in ((0.0, 1), (0.6, 1), (0.0, 2), (0.4, 2)):
        engine = Engine()
        run = Run(settings=Settings(arena=True, num_draft_tokens=6, draft_confidence=slider, tree_width=width,
                                    tree_nodes=7 if width > 1 else 0))
        for _phase, _result, _views, stream in runs.streams(run, engine, [1, 2, 3], chat):
            list(stream)
        run.arena = _results(*run.arena.keys() - {"plain"})  # each contestant's rounds, as if it had run
        said = _k_column(arena_view.outcome(run))
        raced = {arena.label(name): arena.k_said(s.num_draft_tokens, s.draft_confidence, name)
                 for name, s in engine.raced.items() if name != "plain"}
        assert raced and all(said[label] == k for label, k in raced.items()), (slider, width, said, raced)
        if width == 1:  # the draft model's own 0.5 at any slider; EAGLE's own 0.6 too
            assert said["draft model"] == said["EAGLE"] == "≤ 6" and said["Medusa"] == "1", (slider, said)


def _stats(tokens_per_s: float) -> RunStats:
    return RunStats(tokens=32, rounds=12, seconds=32 / tokens_per_s, tokens_per_s=tokens_per_s, acceptance_rate=0.5,
                    mean_accepted_length=2.7, mean_k=4, cost_ratio=0.1)


def _speedup(line: str) -> tuple[str, str]:
    tip, value = re.search(r'<span class="stat" title="([^"]*)"><span class="stat-name">speedup</span> '
                           r'<span class="stat-value">([^<]*)</span>', line).groups()
    return html.unescape(value), html.unescape(tip)


def test_a_speedup_below_one_says_so_and_why_and_that_the_identity_check_stands():
    value, tip = _speedup(stats.stats_html(_stats(58.0), _stats(100.0)))
    assert value == "0.58× (slower this run)"
    assert "other programs" in tip and "short reply" in tip and "prompt" in tip
    assert "identical does not depend on the timing" in tip
    value, tip = _speedup(stats.stats_html(_stats(150.0), _stats(100.0)))
    assert value == "1.50×" and tip == stats.HINTS["speedup"]
    value, tip = _speedup(stats.stats_html(_stats(99.6), _stats(100.0)))  # shown as 1.00×: not "slower"
    assert value == "1.00×" and tip == stats.HINTS["speedup"]
    value, tip = _speedup(stats.stats_html(_stats(99.4), _stats(100.0)))
    assert value == "0.99× (slower this run)"


def test_the_teach_tabs_best_k_is_one_its_k_slider_can_set():
    """The theory searches K 1..16; this tab's K slider stops at 8. Where the theory's best lies past it, the best K
    the tab gives first is the best the slider reaches (and its speedup), the theory's beside it for the Chat tab;
    the measured panel, the theory chart and the K sweep's title say it alike."""
    from specui import metrics
    from specui.lesson import Point
    from specui.ui import teach_charts
    from specui.ui.teach_view import TEACH_K_MAX, best_k_said, render_measured
    from tests.app.test_ui_teach_best_k import _measured

    far = _measured(0.95, 0.02)
    assert far.best_k > TEACH_K_MAX
    here = metrics.best_k(0.95, 0.02, k_max=TEACH_K_MAX)
    said = best_k_said(0.95, 0.02, far.best_k, far.best_k_speedup)
    assert said.startswith(f"{here} ({metrics.theoretical_speedup(0.95, here, 0.02):.2f}×; the theory's best, "
                           f"{far.best_k} at {far.best_k_speedup:.2f}×, is past this tab's K {TEACH_K_MAX}")
    shown = html.unescape(re.sub(r"<[^>]+>", "", render_measured(type("View", (), {"measured": far}))))
    assert f"best K {said}" in shown
    # a number beside what it is is kept on one line (no-break spaces): read as spaces
    title = teach_charts.theory_speedup_figure(far).layout.title.text.replace("<br>", " ").replace("\u00a0", " ")
    assert f"best K={here} (" in re.sub(r"</?sub>", "", title)
    near = _measured(0.6, 0.1)
    assert best_k_said(0.6, 0.1, near.best_k, near.best_k_speedup) == f"{near.best_k} ({near.best_k_speedup:.2f}×)"
    points = [Point(label=f"K={k}", k=k, temperature=0.0, drafter="model", tokens=32, rounds=10, acceptance_rate=0.95,
                    alpha=0.95, mean_accept_prob=None, tokens_per_round=2.0, tokens_per_s=20.0, plain_tokens_per_s=10.0,
                    speedup=1.0 + k / 10, cost_ratio=0.02, theory_speedup=None) for k in (1, 2)]
    sweep = teach_charts.k_sweep_figure(points).layout.title.text
    assert re.sub(r"</?sub>|<br>", " ", sweep).split("best K: theory ")[1].startswith(f"{here} (")


def test_the_theory_charts_star_sits_at_the_best_k_its_title_gives_first():
    """The theory chart's green star and "(best)" curve are at the best K this tab's slider can set, the K its title
    gives first; the theory's own best past the slider keeps its curve, named as the theory's best for the Chat tab.
    The star sat at the theory's K 16 (8.82×) under a title giving K 8 (6.38×)."""
    from specui import metrics
    from specui.ui import teach_charts
    from specui.ui.teach_view import TEACH_K_MAX
    from tests.app.test_ui_teach_best_k import _measured

    far = _measured(0.95, 0.02)
    here = metrics.best_k(0.95, 0.02, k_max=TEACH_K_MAX)
    assert far.best_k > TEACH_K_MAX >= here
    fig = teach_charts.theory_speedup_figure(far)
    star = next(t for t in fig.data if t.marker is not None and t.marker.symbol == "star")
    assert star.name == f"best K = {here}"
    assert star.y[0] == round(metrics.theoretical_speedup(0.95, here, 0.02), 4)
    names = [t.name for t in fig.data]
    assert f"K={here} (best)" in names and f"K={far.best_k} (the theory's best: Chat tab)" in names
    near = _measured(0.6, 0.1)  # a best the slider reaches: the star and its curve as before
    fig = teach_charts.theory_speedup_figure(near)
    star = next(t for t in fig.data if t.marker is not None and t.marker.symbol == "star")
    assert star.name == f"best K = {near.best_k}" and star.y[0] == round(near.best_k_speedup, 4)
    assert not any("theory's best" in t.name for t in fig.data)


def test_the_presets_line_says_each_drafters_own_confidence_stop():
    """The line under the preset menu gave only the default drafter's stop; the others' own K came without theirs (the
    chat preset's draft model drafts up to 6 while confident ≥ 0.5). Now each drafter's own stop is said where it may
    end a round sooner, its K written as the arena's table writes it; at K 1 none."""
    from dataclasses import replace

    from specui.drafters import LABELS
    from specui.drafters.registry import COPIES
    from specui.presets import load_config
    from specui.ui.preset_view import about

    config = load_config(None)
    chat = config.get("smollm2-chat")
    line = about(chat).split("\n\n")[-1]
    others = [(name, c) for name, c in chat.draft_confidence if name != chat.drafter]
    assert others and all(f"{LABELS[name]} {'' if name in COPIES else '≤ '}{chat.k_for(name)} while confident ≥ {c:g}"
                          in line for name, c in others)  # a copy runs past a K below its length: no "≤"
    bundled = config.get("bundled")
    own = replace(bundled, num_draft_tokens=5, drafter_tokens=(("medusa", 1), ("prompt_lookup", 2)),
                  draft_confidence=(("model", 0.3), ("eagle", 0.4), ("medusa", 0.5)))
    assert ("Drafter: draft model · K = 5, drafting while confident ≥ 0.3 (EAGLE ≤ 5 while confident ≥ 0.4, Medusa 1, "
            "prompt lookup 2) ·") in about(own)
    medusa = replace(own, drafter="medusa")  # the default drafter by the same rule: at K 1 no stop to say
    assert "Drafter: Medusa · K = 1 (draft model ≤ 5 while confident ≥ 0.3," in about(medusa)


def test_the_compare_verdict_and_the_terminals_compare_line_say_a_speedup_below_one_as_the_stats_line_does():
    """The verdict under a Compare run (its tooltip the why) and `python -m specui --compare`'s line gave "0.58×" with
    no word where the stats line says "(slower this run)"; at 1.00× and above none."""
    from specui import runstats
    from specui.events import GenerationResult
    from specui.terminal_view import Reply, compare_line
    from specui.text import SLOWER_WHY
    from specui.ui import render

    slow = render.render_verdict(identical=True, speedup=0.58)
    assert "speedup 0.58× (slower this run)" in slow and html.escape(SLOWER_WHY) in slow
    assert "slower" not in render.render_verdict(identical=True, speedup=0.996) + render.render_verdict(
        identical=None, speedup=1.5)

    def reply(seconds: float) -> Reply:
        return Reply(GenerationResult(token_ids=[1, 2, 3, 4], prefill_s=seconds))  # no rounds: the prompt's time

    spec, plain = reply(2.0), reply(1.0)
    assert runstats.speedup(runstats.run_stats(spec.result), runstats.run_stats(plain.result)) == 0.5
    assert "speedup 0.50x (slower this run)" in compare_line(spec, plain, greedy=True)
    assert "slower" not in compare_line(plain, spec, greedy=True)
