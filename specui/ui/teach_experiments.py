"""The Teach tab's experiments, built and wired by `specui.ui.teaching`: a K sweep, a temperature sweep,
weaker drafters, what verification costs and where the time goes. Each has a chart and a table on the
left, its explanation, any extra control and its run button on the right (#NAME-chart, #NAME-table,
#NAME-run), and a handler that redraws both as each point is measured; its model work is a task of the tab's
`GpuWork` (one ZeroGPU allocation: `specui.ui.teach_work`). Every number comes from `specui.lesson`. A table names
the seed its run drew with (-1: the one drawn, `request.seeded`), so that it can be run again, or says that a greedy
run reads none; the verify cost times forwards, which draw nothing."""

from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from specui import lesson, lesson_budget
from specui.drafters import LABELS, MODEL, PROMPT_LOOKUP
from specui.engine import SpeculativeEngine
from specui.text import fmt
from specui.ui import teach_charts, teach_work
from specui.ui.request import seed_words
from specui.ui.teach_view import (BUDGET_HELP, DRAFTERS_HELP, SWEEP_HELP, SWEEP_KS, TEMP_HELP, TEMPERATURES,
                                  VERIFY_HELP, render_budget, render_points, render_verify_cost)
from specui.ui.toasts import refusal
from specui.verify_cost import measure_verify_cost


@dataclass
class Experiment:
    chart: gr.Plot
    table: gr.HTML
    run: gr.Button
    control: gr.components.Component | None = None


def experiment(name: str, figure, help_text: str, label: str, *, extra=None) -> Experiment:
    """One experiment: its chart and table on the left; the explanation, any extra control and the run
    button on the right. Element ids: #NAME-chart, #NAME-table, #NAME-run."""
    with gr.Row(equal_height=False):
        with gr.Column(scale=3):
            chart = gr.Plot(figure, elem_id=f"{name}-chart", show_label=False)
            table = gr.HTML("", elem_id=f"{name}-table")
        with gr.Column(scale=1, min_width=260):
            gr.Markdown(help_text)
            control = extra() if extra is not None else None
            button = gr.Button(label, elem_id=f"{name}-run")
    return Experiment(chart, table, button, control)


def _noise_slider() -> gr.Slider:
    return gr.Slider(0.0, 5.0, value=2.0, step=0.1, label="Noise on the weaker draft's weights",
                     elem_id="drafters-noise")


def build() -> dict[str, Experiment]:
    """The five experiments, in the order the tab shows them (keys: sweep, temps, drafters, verify, budget)."""
    return {"sweep": experiment("sweep", teach_charts.k_sweep_figure(), SWEEP_HELP, "Run the K sweep (K = 1…8)"),
            "temps": experiment("temp", teach_charts.temperature_figure(), TEMP_HELP, "Run the temperature sweep"),
            "drafters": experiment("drafters", teach_charts.drafter_figure(), DRAFTERS_HELP, "Compare drafters",
                                   extra=_noise_slider),
            "verify": experiment("verify-cost", teach_charts.verify_cost_figure(), VERIFY_HELP,
                                 "Time the verify forward (n = 1…16)"),
            "budget": experiment("budget", teach_charts.time_budget_figure(), BUDGET_HELP,
                                 "Split plain and speculative runs")}


def handlers(ui) -> tuple:
    """(experiment, handler, extra inputs) per experiment of the tab `ui`."""
    return ((ui.sweep, sweep, set()), (ui.temps, temperatures, set()),
            (ui.drafters, drafters, {ui.drafters.control}), (ui.verify, verify_costs, set()),
            (ui.budget, time_budget, set()))


# -- handlers (each gets the tab's state, its components, and the inputs by component) -----------------------


def _stream_points(experiment: Experiment, points, figure):
    """Redraw an experiment's chart and table as each of its points (with its run's seed in words) arrives."""
    shown = []
    for seed, point in points:
        shown.append(point)
        yield {experiment.chart: figure(shown), experiment.table: render_points(shown, seed=seed)}


def sweep(state, ui, data: dict):
    points = state.work(k_sweep_points, teach_work.values(ui.controls, data))
    yield from _stream_points(ui.sweep, points, teach_charts.k_sweep_figure)


def temperatures(state, ui, data: dict):
    points = state.work(temperature_points, teach_work.values(ui.controls, data))
    yield from _stream_points(ui.temps, points, teach_charts.temperature_figure)


def drafters(state, ui, data: dict):
    points = state.work(drafter_points, teach_work.values(ui.controls, data), float(data[ui.drafters.control]))
    yield from _stream_points(ui.drafters, points, teach_charts.drafter_figure)


def verify_costs(state, ui, data: dict):
    for curve in state.work(verify_cost_curve, teach_work.values(ui.controls, data)):
        yield {ui.verify.chart: teach_charts.verify_cost_figure(curve), ui.verify.table: render_verify_cost(curve)}


def time_budget(state, ui, data: dict):
    for seed, budget in state.work(time_budget_split, teach_work.values(ui.controls, data)):
        yield {ui.budget.chart: teach_charts.time_budget_figure(budget),
               ui.budget.table: render_budget(budget, seed=seed)}


# -- their model work: `GpuWork` tasks (state: the tab's `TeachState`; values: the controls' by name, `teach_work`),
# each yielding what its chart is drawn from, after the run's seed in words (`_seeded`)

def _seeded(settings, items, *, greedy: bool | None = None):
    """Each of `items` after the seed `settings` drew with, in words (`greedy`: whether the runs read none; by
    default the settings' own temperature says)."""
    words = seed_words(settings.greedy if greedy is None else greedy, settings.seed)
    for item in items:
        yield words, item


def k_sweep_points(state, values: dict):
    p, lock = state.prepare(values)
    yield from _seeded(p.settings, lesson.k_sweep(p.engine, p.ids, p.settings.decode, ks=SWEEP_KS, lock=lock))


def temperature_points(state, values: dict):
    p, lock = state.prepare(values)
    points = lesson.temperature_sweep(p.engine, p.ids, p.settings.decode, temperatures=TEMPERATURES, lock=lock)
    yield from _seeded(p.settings, points, greedy=False)  # its points above 0 sample, whatever the box's temperature


def drafter_points(state, values: dict, noise: float):
    p, lock = state.prepare(values, drafter=LABELS[PROMPT_LOOKUP])
    choices = []
    if p.pair.draft is not None:
        key = (p.preset.name, round(noise, 3), p.settings.seed)  # the noise drawn with the run's seed
        if key not in state.weak_drafts:
            state.weak_drafts.clear()
            state.weak_drafts[key] = lesson.weakened_draft(p.pair.draft, noise=noise, seed=p.settings.seed)
        choices += [lesson.DrafterChoice(LABELS[MODEL], p.engine, MODEL),
                    lesson.DrafterChoice(f"draft + noise {fmt(noise, 'g')}",
                                         SpeculativeEngine(p.pair.target, state.weak_drafts[key]), MODEL)]
    choices.append(lesson.DrafterChoice(LABELS[PROMPT_LOOKUP], p.engine, PROMPT_LOOKUP))
    # the noisy draft's weights are drawn with the seed, greedy or not
    yield from _seeded(p.settings, lesson.drafter_comparison(choices, p.ids, p.settings.decode, lock=lock),
                       greedy=p.settings.greedy and p.pair.draft is None)


def verify_cost_curve(state, values: dict):
    p, lock = state.prepare(values)
    with lock:  # one engine run at a time, like every other generation
        curve = measure_verify_cost(p.pair.target, cache_length=len(p.ids), max_tokens=16, repeats=3, floor=True)
    yield curve.as_dict()


def time_budget_split(state, values: dict):
    p, lock = state.prepare(values)
    try:
        budget = lesson_budget.time_budget_run(p.engine, p.ids, p.settings.decode, lock=lock)
    except ValueError as e:  # a one-token prompt, or a run that drafted nothing
        raise refusal(str(e)) from None
    yield from _seeded(p.settings, [budget])
