"""Teaching mode: the "Teach" tab, built inside a caller's `gr.Blocks` by `teaching_tab(showcase)`.

A teacher decodes one prompt, then steps through it a round at a time (#step-next, or auto-play with
a speed control): the context, the K drafts with q(x), p(x), min(1, p/q), the uniform draw u and the
verdict, the residual distribution at a rejection, the bonus token after full acceptance. Beside it
the theory (eq. 1 and Theorem 3.8 over alpha for several K) with this run's measured point and the
best K, a second drafter's round beside each round (the same context, the same draws), a JSON export of
the run, and the experiments (`specui.ui.teach_experiments`): a K sweep, a temperature sweep, weaker
drafters, the verify cost and where the time goes. Every number shown comes from the engine's `Round`
records (`specui.lesson`). Here the tab is put together and wired, with the handlers of its step-through; its
controls and step view are laid out in `specui.ui.teach_layout`.

Element ids: #teach-prompt #teach-preset #teach-drafter #teach-k #teach-confidence #teach-temperature #teach-penalty
#teach-max-new-tokens #teach-seed #step-start #step-prev #step-next #step-play #step-speed #step-status #step-view
#step-residual #teach-theory-tokens #teach-theory-speedup #teach-measured #teach-export #sweep-run
#sweep-chart #sweep-table #temp-run #temp-chart #temp-table #drafters-run #drafters-noise
#drafters-chart #drafters-table #verify-cost-run #verify-cost-chart #verify-cost-table #budget-run
#budget-chart #budget-table, for a second
drafter judged on the same rounds (`specui.ui.teach_compare`) #teach-second #compare-view, and the tree
stepper's (`specui.ui.teach_tree`). Every model or user string is escaped before it becomes HTML.

Three hidden buttons of the step-through that the page clicks, never a user (`teach_keys`; the tree stepper has its own
#tree-step-redraw): #step-first, clicked by Next while no round is on show, decodes the prompt and shows round 1
(`decode_first`; with a round on show Next sends its step alone); #step-redraw, clicked once an event that changed
the run or round shown another way has answered (Decode, a second drafter, a refresh's decode, the Chat tab's
hand-off), draws the round the server holds again through the stepping event, a press "=" that moves nothing;
#step-tick, clicked by the auto-play's timer, steps one round as a press "t" among Next's and Previous's. One more,
#teach-preset-picked, is clicked once a preset is picked, by the mouse or the keys (`teach_keys.on_pick`).
"""

from __future__ import annotations

import functools
import html
from dataclasses import dataclass, field, replace
from types import SimpleNamespace

import gradio as gr

from specui import lesson, lesson_compare
from specui.events import GenerationResult
from specui.ui import (teach_charts, teach_compare, teach_experiments, teach_keys, teach_layout, teach_memory,
                       teach_tree, teach_work)
from specui.ui.exports import Exports
from specui.ui.gpu_calls import GpuWork
from specui.ui.preset_view import on_drafter, on_preset
from specui.ui.request import DRAFTER_CHOICES
from specui.ui.teach_compare_view import NONE, render_compare, waiting
from specui.ui.teach_experiments import Experiment
from specui.ui.teach_layout import TEACH_K_MAX, TEACH_MAX_NEW, Controls, StepView  # noqa: F401 (the Chat tab's)
from specui.ui.teach_prepare import prepare
from specui.ui.teach_status import decoded_note, prompt_edited
from specui.ui.teach_view import INTRO, render_measured, render_step
from specui.ui.toasts import Refusal, calmly, refusal

NAV = {"api_visibility": "private", "show_progress": "hidden"}
SHOW_STATUS = teach_keys.into_view("step-status")  # Decode's progress, then its round 1


@dataclass
class TeachState:
    """What the tab keeps between events: the export folder and the one noisy draft it made, and `work`, through
    which every action that runs a model does so (one ZeroGPU allocation each: `teach_work`)."""

    showcase: object
    exports: Exports = field(default_factory=lambda: Exports("specui-teach-"))
    weak_drafts: dict = field(default_factory=dict)  # (preset, noise, seed) -> the noisy draft, one kept
    work: GpuWork = field(init=False, repr=False)

    def __post_init__(self):
        self.work = GpuWork(self)

    def prepare(self, values: dict, *, drafter: str | None = None):
        """`teach_prepare.prepare` on the controls' values by name (`teach_work.values`): (Prepared, its lock)."""
        return prepare(self.showcase, teach_work.NAMED, values, drafter=drafter)


@dataclass
class TeachTab:
    """The whole tab's components, as its handlers address them."""

    controls: Controls
    step: StepView
    sweep: Experiment
    temps: Experiment
    drafters: Experiment
    verify: Experiment
    budget: Experiment
    compare: teach_compare.CompareView
    run: gr.State
    index: gr.State  # a `teach_keys.Shown`: the run whose round the step view shows, and that round's index
    timer: gr.Timer
    memory: gr.BrowserState  # the last decoded run's settings, kept in the browser (teach_memory)
    tree: teach_tree.TreePanel  # the token-tree stepper (a hand-off clears it too: teach_handoff)
    handed: gr.Number  # hidden: the messages handed to the page, sent with each Decode (teach_keys.handed_since)


def teaching_tab(showcase, *, concurrency_id: str = "engine", tab: bool = True,
                 memory: gr.BrowserState | None = None) -> TeachTab:
    """Build the teaching tab inside the current `gr.Blocks`. `showcase` is the app's `Showcase` (its
    config, pair cache and per-pair locks); `concurrency_id` is the app's engine queue, so teaching runs
    wait their turn with every other generation. `memory` (teach_memory.build(), made outside every tab: a tab's
    components are made when it is first shown, too late for the page's load) keeps the last decoded settings and
    the round on show; given, a page that opens on the Teach tab decodes that run again and shows that round."""
    container = gr.Tab("Teach", id="teach", elem_id="teach-tab") if tab else gr.Column(elem_id="teach-tab")
    with container:
        gr.Markdown(INTRO)
        controls = teach_layout.controls(showcase.config)
        step, compare = teach_layout.step_view()
        state = TeachState(showcase)
        handed = gr.Number(0, visible=False)  # set by the page's hand-offs only (teach_handoff), never by a user
        tree = teach_tree.tree_panel(controls, work=state.work, concurrency_id=concurrency_id, handed=handed)
        gr.Markdown("## Experiments")
        ui = TeachTab(controls=controls, step=step, **teach_experiments.build(), compare=compare,
                      run=gr.State(None), index=gr.State(teach_keys.Shown()),
                      timer=gr.Timer(1.5, active=False),
                      memory=memory if memory is not None else teach_memory.build(), tree=tree, handed=handed)
        _wire(ui, state, concurrency_id, resume=memory is not None)
    return ui


def _wire(ui: TeachTab, state: TeachState, concurrency_id: str, *, resume: bool = False) -> None:
    c, s, cmp = ui.controls, ui.step, ui.compare
    queued = {"concurrency_id": concurrency_id, "concurrency_limit": 1, "api_visibility": "private"}
    compared = [cmp.view, cmp.second]  # the comparison itself is kept beside the rounds, in ui.index's Shown
    decoded = [ui.run, s.view, s.residual, s.theory_tokens, s.theory_speedup, s.measured, s.export,
               s.status, ui.timer, c.play, ui.memory, *compared]
    # a refusal (an empty prompt, a setting out of range) says why in the status line; the rest keeps what it showed
    said = functools.partial(refused, ui)
    # the status line brought into view as Decode starts: on a projector the controls fill the screen, and the run's
    # progress (and then round 1) was below it, a minute of nothing to see at the largest settings
    # Decode clicked again while a run is on its way (new settings, a changed mind) decodes again after it: gradio's
    # default ("once") dropped that click, and the rounds shown were the first run's, with no word
    # a press's answer could land before Decode's (round 1): the round the server holds is drawn again after it
    teach_keys.redraw_after("step", c.start.click(
        calmly(functools.partial(decode, state, ui), said), c.settings | {cmp.second, ui.index, ui.handed}, decoded,
        js=SHOW_STATUS, trigger_mode="always_last", **queued))
    if resume:  # a page refreshed on the Teach tab: the remembered run decoded again, at the round it was on
        teach_memory.resume(gr.context.Context.root_block, state.showcase.config, ui,
                            functools.partial(decode, state, ui), said,
                            c.settings | {cmp.second, ui.index, ui.memory, ui.handed},
                            decoded, **queued)
    # the round shown moves in place (ui.index, a teach_keys.Shown), one move of a page at a time: never an output
    nav_outputs = [s.view, s.residual, cmp.view, ui.timer, c.play, ui.memory]
    # every press of Next and Previous counts, however fast they come (a clicker double-tapped), and the auto-play's
    # ticks are presses among them: one stepping event of a page in flight, its answers in order (teach_keys)
    teach_keys.stepper("step", back=c.prev, on=c.next, tick=c.tick, shown=ui.index,
                       fn=functools.partial(pressed, ui), inputs=[ui.index, cmp.second, ui.memory],
                       outputs=nav_outputs, **NAV)
    teach_keys.ticking("step", ui.timer)
    # Next before any run decodes the prompt shown (in the engine's queue) and lands on round 1; with a round on show
    # the page sends its step alone (a no-op decode waited its turn in the engine's queue, then a redraw after it)
    first = teach_keys.unless_shown(c.next, "#step-view .teach-step[data-round]", "step-first")
    teach_keys.redraw_after("step", first.click(calmly(functools.partial(decode_first, state, ui), said),
                                                c.settings | {ui.run, ui.index, cmp.second, ui.handed}, decoded,
                                                **queued))
    # a new prompt typed mid-lesson: Next and Previous still step the rounds decoded, and the status line says so
    # always_last, as every `.input` of the tab: a key typed (a preset picked) while the last one's event is on its way
    # is answered after it (gradio's default, "once", dropped it: "The prompt changed" stayed by the decoded prompt)
    c.prompt.input(functools.partial(prompt_edited, ui), {c.prompt, ui.run, c.context, ui.memory, s.status}, [s.status],
                   trigger_mode="always_last", **NAV)
    c.play.click(functools.partial(toggle, ui), {ui.run, c.play, c.speed}, [ui.timer, c.play], **NAV)
    # the auto-play's pace set in the page (teach_keys.paced): Escape on the slider at its value sent a call too
    c.speed.change(None, [c.speed], [ui.timer], js=teach_keys.paced(c.speed.minimum, c.speed.maximum), **NAV)
    # as in the Chat tab: a preset the user picks brings its drafter, a drafter its own K (a pick, not `change`: what
    # the Chat tab's "step through it" sets stays). One call a pick, none for the list left as it came (a Tab through
    # it): gradio fires `input` then too, and twice for a mouse's pick; `select` missed the keys' (teach_keys.on_pick)
    config = state.showcase.config
    teach_keys.on_pick(c.preset, "teach-preset", functools.partial(on_preset, config, k_max=TEACH_K_MAX), [c.preset],
                       [c.drafter, c.k], trigger_mode="always_last", **NAV)
    c.drafter.input(functools.partial(on_drafter, config, k_max=TEACH_K_MAX), [c.preset, c.drafter], [c.k],
                    trigger_mode="always_last", **NAV)
    # the export says what the view shows: the second drafter's rounds with the run's, or none; the comparison kept
    # beside the rounds (ui.index's Shown) and the round shown drawn again with it through the stepping event: its
    # answers land in order, an answer of this event could land after a step's and show the round it left.
    # always_last: a drafter picked while the last pick's comparison is on its way is compared after it ("once"
    # dropped it); `change`, not `input`: that fired as the focus left the list unchanged (a Tab through it)
    teach_keys.redraw_after("step", cmp.second.change(
        calmly(functools.partial(second_chosen, state, ui), functools.partial(compare_refused, ui)),
        {ui.run, ui.index, cmp.second}, [*compared, s.export], trigger_mode="always_last", **queued))
    for experiment, handler, extra in teach_experiments.handlers(ui):
        run = calmly(functools.partial(handler, state, ui), functools.partial(experiment_refused, experiment))
        experiment.run.click(run, c.settings | extra, [experiment.chart, experiment.table], **queued)


# -- handlers (each gets the tab's state, its components, and the inputs by component) -----------------------


def show_round(ui: TeachTab, run, index, beside=None, second: str | None = None) -> dict:
    """Round `index` of `run`: the step view, its residual chart and the second drafter's view of it (`beside`: its
    `Comparison`, or the HTML the view shows instead, e.g. why it compared none; without either, what the dropdown's
    choice `second` waits for)."""
    step = run.steps[index] if run is not None and run.steps else None
    side = beside if isinstance(beside, str) else render_compare(beside, index,
                                                                  note=waiting(second, decoded=run is not None))
    return {ui.step.view: render_step(run, index), ui.step.residual: teach_charts.residual_figure(step),
            ui.compare.view: side}


def _move_to(ui: TeachTab, shown: teach_keys.Shown, run, index: int, beside, second: str | None = None) -> dict:
    """Show round `index` of `run` with the second drafter's `beside` it (`show_round`), kept in `shown` for the steps
    after (the caller holds `shown`'s lock: `teach_keys.moving`)."""
    shown.move(run, index, beside)
    return show_round(ui, run, index, beside, second)


def _beside(ui: TeachTab, comparison, out: dict):
    """What goes beside the rounds from a comparison and its answer `out`: the comparison, or its view's line (none)."""
    return comparison if comparison is not None else out[ui.compare.view]


# the tab's components that `teach_compare.run_comparison` reads and answers, standing as their names (`teach_work`)
COMPARE = SimpleNamespace(compare=teach_compare.CompareView("second", "view"), run="run", index="index")


def decoded(state: TeachState, values: dict, second: str):
    """Decode's model work (a `GpuWork` task): the run, what its ids hold besides the prompt (`conversation`) and the
    second drafter's comparison with its answer for round 1, by name (`_compared`)."""
    p, lock = state.prepare(values)
    try:
        state.showcase.warm_up(p.engine, p.pair, p.ids)
        run = lesson.teaching_run(p.engine, p.pair.tokenizer, p.ids, p.settings.decode, prompt=values["prompt"],
                                  lock=lock, extra={"preset": p.preset.name, **p.conversation})
    except ValueError as e:  # e.g. a prompt longer than the context
        raise refusal(str(e)) from None
    yield run, p.conversation, _compared(state, run, second, 0)


def compared_with(state: TeachState, run, second: str, index: int):
    """The second drafter's model work (a `GpuWork` task): its comparison, and its answer for `run`'s round `index` by
    name (`_compared`)."""
    yield _compared(state, run, second, index)


def _compared(state: TeachState, run, second: str, index: int) -> tuple:
    """(the `Comparison` or None, the answer to the compare view and the dropdown by name): `run_comparison`'s."""
    return teach_compare.run_comparison(state.showcase, COMPARE,
                                        {"run": run, "second": second, "index": teach_keys.Shown(run, index)})


def decode(state: TeachState, ui: TeachTab, data: dict, *, at: int = 0) -> dict:
    """Decode the prompt and show its round `at` (the last if it has fewer), or a round a press made since moved to.
    A message the Chat tab handed over since the click (`chat_handlers.lesson_cleared`: not queued, it lands first;
    `teach_keys.handed_since`), while the run waited in the engine's queue or ran, is left alone: the answer changes
    nothing (it put the lesson left back, its round 1 beside the handed message's prompt)."""
    if teach_keys.handed_since(data[ui.index], data.get(ui.handed)):  # handed as it waited: no run (a GPU call)
        return teach_keys.unchanged([ui.step.status])
    moves = data[ui.index].moves
    [(run, conversation_of, (comparison, compared))] = state.work(decoded, teach_work.values(ui.controls, data),
                                                                  data[ui.compare.second])
    s, shown, at = ui.step, data[ui.index], max(0, min(at, len(run.steps) - 1))
    compared = teach_work.by_component(ui.compare, compared)
    # round 1 unless a press made since the run arrived has moved it on already (that press's answer shows its round)
    kept = teach_memory.kept(ui.controls, data, conversation=conversation_of, seed=run.spec.seed)  # -1: the one drawn
    view = teach_keys.moving(shown, {}, _move_unless_cleared, ui, shown, (moves, data.get(ui.handed)), run, at,
                             _beside(ui, comparison, compared))
    if view is None:
        return teach_keys.unchanged([s.status])
    return {ui.run: run, **compared, ui.step.view: gr.update(), ui.compare.view: gr.update(), **view,
            s.theory_tokens: teach_charts.theory_tokens_figure(run.measured),
            s.theory_speedup: teach_charts.theory_speedup_figure(run.measured), s.measured: render_measured(run),
            s.export: exported(state, run, comparison),
            s.status: decoded_note(run) + (f" Back at round {at + 1}, where this browser left it." if at else ""),
            **stopped(ui), ui.memory: teach_memory.at_round(kept, shown.index)}


def _move_unless_cleared(ui: TeachTab, shown: teach_keys.Shown, since: tuple, run, index: int, beside) -> dict | None:
    """`_move_to`, or None when a hand-off cleared the step shown since (`since`: `shown`'s moves as the run began and
    the page's count of hand-offs at the click): the caller holds `shown`'s lock (`teach_keys.moving`)."""
    return None if teach_keys.cleared_since(shown, since) else _move_to(ui, shown, run, index, beside)


def exported(state: TeachState, run, compared) -> str:
    """The export of `run` (a JSON file's path), with the second drafter's rounds (`compared`) when one is shown."""
    data = {**lesson.export_run(run),
            "second_drafter": lesson.json_safe(lesson_compare.export_comparison(compared)) if compared else None}
    return state.exports.write(data, f"specui-run-seed{run.spec.seed}.json")


def second_chosen(state: TeachState, ui: TeachTab, data: dict) -> dict:
    """A second drafter picked for the run on show: its rounds kept beside the run's (the round shown is drawn again
    with them through the stepping event: `teach_keys.redraw_after`) and in the export. What this run has beside it
    already is not computed again (one engine round per round of the run, in the queue every visitor's runs wait in):
    its drafter's comparison, or none for its note (the list set back to none by a refusal or a preset without it)."""
    run, shown, choice = data[ui.run], data[ui.index], data[ui.compare.second]
    held = shown.beside if shown.what is run and run is not None else None
    if held is not None and DRAFTER_CHOICES.get(choice) == getattr(held, "second", None):
        return {ui.compare.second: gr.update()}  # a no-op: gradio reads an empty dict as one value, an error
    # what the comparison reads of the run (its preset, prompt ids and settings) goes to the call, not its rounds
    bare = replace(run, spec=GenerationResult(), plain=None, steps=[]) if run is not None else None
    # nothing decoded, nothing to compare: no model, so no GPU call (on ZeroGPU a visitor's quota and a queue wait)
    asked = (bare, choice, shown.index)
    try:
        [(comparison, out)] = state.work(compared_with, *asked) if run is not None else compared_with(state, *asked)
    except Refusal as e:  # the view says why: the steps after show no comparison, nor the last drafter's
        with shown.lock:
            shown.beside = render_compare(None, 0, note=f"⚠ {e.text}") if shown.what is run else shown.beside
        raise
    out = teach_work.by_component(ui.compare, out)
    if run is None:
        return out
    with shown.lock:  # beside the run it compared, whatever round it is on now (another run: not this one's)
        if shown.what is run:
            shown.beside = _beside(ui, comparison, out)
    del out[ui.compare.view]  # drawn by the redraw after, for the round shown then
    return {**out, ui.step.export: exported(state, run, comparison)}


def compare_refused(ui: TeachTab, text: str) -> dict:
    """A second drafter's comparison refused: its line goes beside the rounds (`second_chosen` kept it in the Shown,
    the redraw after draws it) and the list says none, so that the drafter picked again tries again."""
    return {ui.compare.second: gr.update(value=NONE)}


def refused(ui: TeachTab, text: str) -> dict:
    """What the step-through says when Decode is refused (the rounds, charts and export keep what they showed)."""
    return {ui.step.status: f"⚠ Not decoded: {html.escape(text)}"}


def experiment_refused(experiment: Experiment, text: str) -> dict:
    """What an experiment says when its run is refused (its chart keeps what it showed)."""
    return {experiment.table: f'<div class="teach-step teach-empty">⚠ Not run: {html.escape(text)}</div>'}


def decode_first(state: TeachState, ui: TeachTab, data: dict) -> dict:
    """After Next with no round on show in the page (`teach_keys.unless_shown`): decode if no run is on show, nor came
    since (a refresh's own decode, a Decode on its way as Next was pressed): round 1 is then shown."""
    if data[ui.run] is not None or data[ui.index].what is not None:
        return {ui.controls.play: gr.update()}  # a no-op: gradio reads an empty dict as one value, an error
    return decode(state, ui, data)


def pressed(ui: TeachTab, presses: str, data: dict) -> dict:
    """The round after `presses` of Next ("+"), Previous ("-") and auto-play ticks ("t") in turn, from the round
    shown (`teach_keys`: the caller holds its lock); a tick at the last round ends the auto-play (a late tick never
    resumes it)."""
    shown = data[ui.index]
    run = shown.what
    if run is None and "=" in presses and shown.moves:  # a hand-off's redraw: a step answered before it may have
        # landed after it, the last lesson's round over the handed message and in the browser's memory
        return {**show_round(ui, None, 0, shown.beside, data.get(ui.compare.second)),
                ui.memory: teach_memory.at_round(data[ui.memory], 0), **stopped(ui)}
    if run is None or not run.steps:
        return {**teach_keys.unchanged([ui.step.view]), **(stopped(ui) if "t" in presses else {})}
    index, ended = teach_keys.played(shown.index, presses, len(run.steps))
    moved = {**_move_to(ui, shown, run, index, shown.beside, data.get(ui.compare.second)),
             ui.memory: teach_memory.at_round(data[ui.memory], index)}  # a refresh comes back to it
    return {**moved, **stopped(ui)} if ended else moved


def toggle(ui: TeachTab, data: dict) -> dict:
    """Play or Pause as the button read when it was clicked (its label, an input), not the opposite of the server's
    play state it kept: a Pause clicked as the last round's tick ended the auto-play (its answer on its way) turned it
    back on, and the page, which drops ticks from a Pause click on (keys.js), left it at "Pause", nothing playing."""
    on = "Play" in str(data[ui.controls.play]) and data[ui.run] is not None
    return {ui.timer: gr.Timer(value=float(data[ui.controls.speed]), active=on),
            ui.controls.play: gr.update(value="❚❚ Pause" if on else "▶ Play")}


def stopped(ui: TeachTab) -> dict:
    """The auto-play off: its timer stopped, the button back to Play."""
    return {ui.timer: gr.Timer(active=False), ui.controls.play: gr.update(value="▶ Play")}


