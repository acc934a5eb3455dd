"""Teaching mode: the "Teach" tab, built inside a caller's `gr.Blocks` by `teaching_tab(showcase)`.

A teacher decodes one prompt, then steps through it a round at a time (#step-next, or auto-play with
a speed control): the context, the K drafts with q(x), p(x), min(1, p/q), the uniform draw u and the
verdict, the residual distribution at a rejection, the bonus token after full acceptance. Beside it
the theory (eq. 1 and Theorem 3.8 over alpha for several K) with this run's measured point and the
best K, a JSON export of the run, and three experiments: a K sweep, a temperature sweep and weaker
drafters. Every number shown comes from the engine's `Round` records (`specui.teach`).

Element ids: #teach-prompt #teach-preset #teach-drafter #teach-k #teach-temperature #teach-max-new-tokens
#teach-seed #step-start #step-prev #step-next #step-play #step-speed #step-status #step-view
#step-residual #teach-theory-tokens #teach-theory-speedup #teach-measured #teach-export #sweep-run
#sweep-chart #sweep-table #temp-run #temp-chart #temp-table #drafters-run #drafters-noise
#drafters-chart #drafters-table #verify-cost-run #verify-cost-chart #verify-cost-table, and the tree stepper's
(`specui.ui.teach_tree`). Every model or user string is escaped before it becomes HTML.
"""

from __future__ import annotations

import functools
import json
import logging
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import gradio as gr

from specui import lesson
from specui.drafters import LABELS, MODEL, PROMPT_LOOKUP
from specui.engine import SpeculativeEngine
from specui.text import fmt
from specui.ui import teach_charts, teach_tree
from specui.verify_cost import measure_verify_cost
from specui.ui.request import DRAFTER_CHOICES, Settings, SettingsError
from specui.ui.teach_view import (DEFAULT_PROMPT, DRAFTERS_HELP, INTRO, STEP_HELP, SWEEP_HELP, SWEEP_KS, TEMP_HELP,
                                  TEMPERATURES, THEORY_HELP, VERIFY_HELP, render_measured, render_points,
                                  render_step, render_verify_cost)

log = logging.getLogger("specui.ui")
EXPORTS_KEPT = 16  # export files kept on disk per process (gradio serves its own copy of each)
TEACH_K_MAX = 8  # the Teach tab's K slider: enough for a lesson, small enough to read a round
NAV = {"api_visibility": "private", "show_progress": "hidden"}


class Exports:
    """The JSON exports of this app: a temporary folder, removed when the process exits; the newest
    EXPORTS_KEPT stay on disk."""

    def __init__(self):
        self._folder: tempfile.TemporaryDirectory | None = None

    def write(self, run: lesson.TeachingRun) -> str:
        """Write the run's JSON export to a fresh file; returns its path."""
        if self._folder is None:
            self._folder = tempfile.TemporaryDirectory(prefix="specui-teach-")
        root = Path(self._folder.name)
        folder = root / f"{time.monotonic_ns()}"  # a folder per export keeps the file's plain name
        folder.mkdir()
        path = folder / f"specui-run-seed{run.spec.seed}.json"
        path.write_text(json.dumps(lesson.export_run(run), indent=1, allow_nan=False), encoding="utf-8")
        for old in sorted(root.iterdir(), key=lambda p: int(p.name))[:-EXPORTS_KEPT]:
            shutil.rmtree(old, ignore_errors=True)
        return str(path)


@dataclass
class TeachState:
    """What the tab keeps between events: the export folder and the one noisy draft it made."""

    showcase: object
    exports: Exports = field(default_factory=Exports)
    weak_drafts: dict = field(default_factory=dict)  # (preset, noise) -> the noisy draft, one kept


# -- layout --------------------------------------------------------------------------------------------


@dataclass
class Controls:
    prompt: gr.Textbox
    start: gr.Button
    prev: gr.Button
    next: gr.Button
    play: gr.Button
    speed: gr.Slider
    preset: gr.Dropdown
    drafter: gr.Radio
    k: gr.Slider
    temperature: gr.Slider
    max_new: gr.Slider
    seed: gr.Number

    @property
    def settings(self) -> set:
        """The inputs every decoding handler reads (by name)."""
        return {self.prompt, self.preset, self.drafter, self.k, self.temperature, self.max_new, self.seed}


@dataclass
class StepView:
    status: gr.Markdown
    view: gr.HTML
    residual: gr.Plot
    theory_tokens: gr.Plot
    theory_speedup: gr.Plot
    measured: gr.HTML
    export: gr.File


@dataclass
class Experiment:
    chart: gr.Plot
    table: gr.HTML
    run: gr.Button
    control: gr.components.Component | None = None


@dataclass
class TeachTab:
    controls: Controls
    step: StepView
    sweep: Experiment
    temps: Experiment
    drafters: Experiment
    verify: Experiment
    run: gr.State
    index: gr.State
    playing: gr.State
    timer: gr.Timer


def _controls(config) -> Controls:
    default = config.get(None)
    with gr.Row(equal_height=False):
        with gr.Column(scale=3, min_width=360):
            prompt = gr.Textbox(DEFAULT_PROMPT, label="Prompt", lines=4, max_lines=10, elem_id="teach-prompt")
            with gr.Row():
                start = gr.Button("Decode", variant="primary", elem_id="step-start")
                prev = gr.Button("◀ Previous", elem_id="step-prev")
                nxt = gr.Button("Next round ▶", elem_id="step-next")
                play = gr.Button("▶ Play", elem_id="step-play")
            speed = gr.Slider(0.2, 5.0, value=1.5, step=0.1, label="Auto-play: seconds per round", elem_id="step-speed")
        with gr.Column(scale=2, min_width=280):
            preset = gr.Dropdown(config.names, value=default.name, label="Preset", elem_id="teach-preset")
            drafter = gr.Radio(list(DRAFTER_CHOICES), value=LABELS[default.drafter], label="Drafter",
                               elem_id="teach-drafter")
            k = gr.Slider(1, TEACH_K_MAX, value=min(TEACH_K_MAX, default.num_draft_tokens), step=1,
                          label="K (draft tokens per round)", elem_id="teach-k")
            temperature = gr.Slider(0.0, 2.0, value=0.8, step=0.05, label="Temperature (0 = greedy)",
                                    elem_id="teach-temperature")
            max_new = gr.Slider(8, 128, value=32, step=8, label="New tokens", elem_id="teach-max-new-tokens")
            seed = gr.Number(1, label="Seed", precision=0, elem_id="teach-seed")
    return Controls(prompt, start, prev, nxt, play, speed, preset, drafter, k, temperature, max_new, seed)


def _step_view() -> StepView:
    status = gr.Markdown("", elem_id="step-status")
    with gr.Row(equal_height=False):
        with gr.Column(scale=3, min_width=420):
            view = gr.HTML(render_step(None, 0), elem_id="step-view")
            residual = gr.Plot(teach_charts.residual_figure(), elem_id="step-residual", show_label=False)
        with gr.Column(scale=2, min_width=280):
            gr.Markdown(STEP_HELP)
    with gr.Row(equal_height=False):
        with gr.Column(scale=3):
            with gr.Row():
                tokens = gr.Plot(teach_charts.theory_tokens_figure(), elem_id="teach-theory-tokens", show_label=False)
                speedup = gr.Plot(teach_charts.theory_speedup_figure(), elem_id="teach-theory-speedup",
                                  show_label=False)
            measured = gr.HTML(render_measured(None), elem_id="teach-measured")
            export = gr.File(label="Export this run (JSON: tokens, kinds, rounds, p and q, timings)",
                             interactive=False, elem_id="teach-export")
        with gr.Column(scale=1, min_width=260):
            gr.Markdown(THEORY_HELP)
    return StepView(status, view, residual, tokens, speedup, measured, export)


def _experiment(name: str, figure, help_text: str, label: str, *, extra=None) -> Experiment:
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
    return gr.Slider(0.0, 5.0, value=2.0, step=0.1, label="Noise on the weaker draft's weights", elem_id="drafters-noise")


def teaching_tab(showcase, *, concurrency_id: str = "engine", tab: bool = True) -> TeachTab:
    """Build the teaching tab inside the current `gr.Blocks`. `showcase` is the app's `Showcase` (its
    config, pair cache and per-pair locks); `concurrency_id` is the app's engine queue, so teaching runs
    wait their turn with every other generation."""
    container = gr.Tab("Teach", id="teach", elem_id="teach-tab") if tab else gr.Column(elem_id="teach-tab")
    with container:
        gr.Markdown(INTRO)
        controls = _controls(showcase.config)
        step = _step_view()
        state = TeachState(showcase)
        teach_tree.tree_panel(controls, prepare=functools.partial(prepare, state), concurrency_id=concurrency_id)
        gr.Markdown("## Experiments")
        ui = TeachTab(
            controls=controls, step=step,
            sweep=_experiment("sweep", teach_charts.k_sweep_figure(), SWEEP_HELP, "Run the K sweep (K = 1…8)"),
            temps=_experiment("temp", teach_charts.temperature_figure(), TEMP_HELP, "Run the temperature sweep"),
            drafters=_experiment("drafters", teach_charts.drafter_figure(), DRAFTERS_HELP, "Compare drafters",
                                 extra=_noise_slider),
            verify=_experiment("verify-cost", teach_charts.verify_cost_figure(), VERIFY_HELP,
                               "Time the verify forward (n = 1…16)"),
            run=gr.State(None), index=gr.State(0), playing=gr.State(False), timer=gr.Timer(1.5, active=False))
        _wire(ui, state, concurrency_id)
    return ui


def _wire(ui: TeachTab, state: TeachState, concurrency_id: str) -> None:
    c, s = ui.controls, ui.step
    queued = {"concurrency_id": concurrency_id, "concurrency_limit": 1, "api_visibility": "private"}
    decoded = [ui.run, ui.index, s.view, s.residual, s.theory_tokens, s.theory_speedup, s.measured, s.export,
               s.status, ui.playing, ui.timer, c.play]
    c.start.click(functools.partial(decode, state, ui), c.settings, decoded, **queued)
    nav_outputs = [ui.index, s.view, s.residual]
    # Next before any run decodes the prompt shown (in the engine's queue) and lands on round 1
    c.next.click(functools.partial(move, ui, 1), {ui.run, ui.index}, nav_outputs, **NAV).then(
        functools.partial(decode_first, state, ui), c.settings | {ui.run}, decoded, **queued)
    c.prev.click(functools.partial(move, ui, -1), {ui.run, ui.index}, nav_outputs, **NAV)
    c.play.click(functools.partial(toggle, ui), {ui.run, ui.playing, c.speed}, [ui.playing, ui.timer, c.play], **NAV)
    ui.timer.tick(functools.partial(tick, ui), {ui.run, ui.index}, [*nav_outputs, ui.playing, ui.timer, c.play],
                  **NAV)
    c.speed.change(lambda seconds: gr.Timer(value=float(seconds)), [c.speed], [ui.timer], **NAV)
    for experiment, handler, extra in ((ui.sweep, sweep, set()), (ui.temps, temperatures, set()),
                                       (ui.drafters, drafters, {ui.drafters.control}), (ui.verify, verify_costs, set())):
        experiment.run.click(functools.partial(handler, state, ui), c.settings | extra,
                             [experiment.chart, experiment.table], **queued)


# -- handlers (each gets the tab's state, its components, and the inputs by component) -----------------------


@dataclass(frozen=True)
class Prepared:
    settings: Settings
    preset: object
    pair: object
    engine: SpeculativeEngine
    ids: list[int]


def prepare(state: TeachState, c: Controls, data: dict, *, drafter: str | None = None) -> tuple[Prepared, object]:
    """Check the settings and load the pair: (Prepared, the pair's lock) or raise gr.Error."""
    showcase = state.showcase
    try:
        settings = Settings.from_ui(preset=data[c.preset], drafter=drafter or data[c.drafter],
                                    num_draft_tokens=data[c.k], temperature=data[c.temperature],
                                    max_new_tokens=data[c.max_new], seed=data[c.seed])
        chosen = showcase.config.get(settings.preset)
    except (SettingsError, ValueError) as e:
        raise gr.Error(str(e)) from None
    text = data[c.prompt]
    if not text or not text.strip():
        raise gr.Error("Type a prompt first.")
    try:
        pair = showcase.cache.get(chosen)
    except Exception as e:  # noqa: BLE001 - LoadError or anything a loader throws: a message, not a traceback
        log.warning("teaching: %s", e)
        raise gr.Error(str(e)) from None
    if settings.drafter == MODEL and pair.draft is None:
        raise gr.Error(f"Preset '{chosen.name}' has no draft model: choose prompt lookup.")
    try:
        ids = showcase.encode(pair, text, ())
    except Exception as e:  # noqa: BLE001 - e.g. a tokenizer without a chat template
        raise gr.Error(f"The prompt could not be encoded: {type(e).__name__}: {e}") from None
    settings = settings.but(seed=0 if settings.seed is None else settings.seed)
    prepared = Prepared(settings, chosen, pair, pair.engine(), ids)
    return prepared, showcase.lock(chosen.name)


def _show(ui: TeachTab, run, index) -> dict:
    step = run.steps[index] if run is not None and run.steps else None
    return {ui.step.view: render_step(run, index), ui.step.residual: teach_charts.residual_figure(step)}


def decode(state: TeachState, ui: TeachTab, data: dict) -> dict:
    p, lock = prepare(state, ui.controls, data)
    try:
        state.showcase.warm_up(p.engine, p.pair, p.ids)
        run = lesson.teaching_run(p.engine, p.pair.tokenizer, p.ids, p.settings.decode, prompt=data[ui.controls.prompt],
                                  lock=lock, extra={"preset": p.preset.name})
    except ValueError as e:  # e.g. a prompt longer than the context
        raise gr.Error(str(e)) from None
    note = (f"Decoded {len(run.spec.token_ids)} tokens in {len(run.steps)} rounds (seed {run.spec.seed}), and the "
            "same prompt with the target alone for the measured speedup. Step through the rounds below.")
    s = ui.step
    return {ui.run: run, ui.index: 0, **_show(ui, run, 0),
            s.theory_tokens: teach_charts.theory_tokens_figure(run.measured),
            s.theory_speedup: teach_charts.theory_speedup_figure(run.measured), s.measured: render_measured(run),
            s.export: state.exports.write(run), s.status: note, ui.playing: False, ui.timer: gr.Timer(active=False),
            ui.controls.play: gr.update(value="▶ Play")}


def decode_first(state: TeachState, ui: TeachTab, data: dict) -> dict:
    """After Next: decode when nothing has been decoded yet (round 1 is then shown), else change nothing."""
    if data[ui.run] is not None:
        return {}
    return decode(state, ui, data)


def move(ui: TeachTab, delta: int, data: dict) -> dict:
    run, index = data[ui.run], data[ui.index]
    if run is None or not run.steps:
        return {ui.index: index}
    index = max(0, min(len(run.steps) - 1, index + delta))
    return {ui.index: index, **_show(ui, run, index)}


def toggle(ui: TeachTab, data: dict) -> dict:
    on = not data[ui.playing] and data[ui.run] is not None
    return {ui.playing: on, ui.timer: gr.Timer(value=float(data[ui.controls.speed]), active=on),
            ui.controls.play: gr.update(value="⏸ Pause" if on else "▶ Play")}


def tick(ui: TeachTab, data: dict) -> dict:
    run, index = data[ui.run], data[ui.index]
    if run is None or index >= len(run.steps) - 1:
        return {ui.playing: False, ui.timer: gr.Timer(active=False), ui.controls.play: gr.update(value="▶ Play")}
    return {ui.index: index + 1, **_show(ui, run, index + 1)}  # a late tick never resumes


def _stream_points(experiment: Experiment, points, figure):
    """Redraw an experiment's chart and table as each of its points arrives."""
    shown = []
    for point in points:
        shown.append(point)
        yield {experiment.chart: figure(shown), experiment.table: render_points(shown)}


def sweep(state: TeachState, ui: TeachTab, data: dict):
    p, lock = prepare(state, ui.controls, data)
    points = lesson.k_sweep(p.engine, p.ids, p.settings.decode, ks=SWEEP_KS, lock=lock)
    yield from _stream_points(ui.sweep, points, teach_charts.k_sweep_figure)


def temperatures(state: TeachState, ui: TeachTab, data: dict):
    p, lock = prepare(state, ui.controls, data)
    points = lesson.temperature_sweep(p.engine, p.ids, p.settings.decode, temperatures=TEMPERATURES, lock=lock)
    yield from _stream_points(ui.temps, points, teach_charts.temperature_figure)


def drafters(state: TeachState, ui: TeachTab, data: dict):
    p, lock = prepare(state, ui.controls, data, drafter=LABELS[PROMPT_LOOKUP])
    noise = float(data[ui.drafters.control])
    choices = []
    if p.pair.draft is not None:
        key = (p.preset.name, round(noise, 3))
        if key not in state.weak_drafts:
            state.weak_drafts.clear()
            state.weak_drafts[key] = lesson.weakened_draft(p.pair.draft, noise=noise, seed=p.settings.seed)
        choices += [lesson.DrafterChoice(LABELS[MODEL], p.engine, MODEL),
                    lesson.DrafterChoice(f"draft + noise {fmt(noise, 'g')}",
                                         SpeculativeEngine(p.pair.target, state.weak_drafts[key]), MODEL)]
    choices.append(lesson.DrafterChoice(LABELS[PROMPT_LOOKUP], p.engine, PROMPT_LOOKUP))
    points = lesson.drafter_comparison(choices, p.ids, p.settings.decode, lock=lock)
    yield from _stream_points(ui.drafters, points, teach_charts.drafter_figure)


def verify_costs(state: TeachState, ui: TeachTab, data: dict):
    p, lock = prepare(state, ui.controls, data)
    with lock:  # one engine run at a time, like every other generation
        curve = measure_verify_cost(p.pair.target, cache_length=len(p.ids), max_tokens=16, repeats=3).as_dict()
    yield {ui.verify.chart: teach_charts.verify_cost_figure(curve), ui.verify.table: render_verify_cost(curve)}
