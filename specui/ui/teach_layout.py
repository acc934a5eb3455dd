"""The Teach tab's layout (`specui.ui.teaching` wires it): the controls a decode reads with the stepping buttons, and
the step view with the second drafter's view of the same round and the theory charts beside it, as built, each
component with the element id the docs, the keys (`keys.js`) and the tests address it by.
"""

from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from specui.drafters import LABELS
from specui.ui import teach_charts, teach_compare, teach_work
from specui.ui.request import DRAFTER_CHOICES, MAX_CONFIDENCE, Settings
from specui.ui.teach_view import DEFAULT_PROMPT, STEP_HELP, TEACH_K_MAX, THEORY_HELP, render_measured, render_step
from specui.ui.theme import PLOT_MIN_WIDTH

TEACH_MAX_NEW = 128  # its new-tokens slider (from 8, one token at a time: 20 asked is 20 decoded)
# what proposes the drafts, under the radio: the step help says what prompt lookup and "+ lookup" do, nothing said what
# EAGLE, Medusa or early exit are (docs/drafters.md does)
DRAFTER_INFO = ("what proposes the drafts: a small draft model; a head trained on the target's hidden state (EAGLE, "
                "Medusa); the target's first layers (early exit); or text copied from earlier (prompt lookup)")


# -- layout --------------------------------------------------------------------------------------------


@dataclass
class Controls:
    """The Teach tab's inputs: what Decode reads (`teach_work.SETTINGS`, by these names) and the stepping buttons."""

    prompt: gr.Textbox
    start: gr.Button
    prev: gr.Button
    next: gr.Button
    play: gr.Button
    tick: gr.Button  # hidden (#step-tick): the auto-play timer clicks it in the page, a press among the presses
    speed: gr.Slider
    preset: gr.Dropdown
    drafter: gr.Radio
    k: gr.Slider
    confidence: gr.Slider  # DecodeSettings.draft_confidence: 0 (the default) drafts K every round
    temperature: gr.Slider
    penalty: gr.Slider  # DecodeSettings.repetition_penalty: 1 (the default) leaves p as the target gives it
    max_new: gr.Slider
    seed: gr.Number
    # a chat message's conversation (history, system, the message's text), set by the Chat tab's handoff: the prompt
    # is decoded after it while the box holds that message (`teach_prepare`); never kept in the browser
    context: gr.State

    @property
    def settings(self) -> set:
        """The inputs every decoding handler reads (by name)."""
        return {getattr(self, name) for name in teach_work.SETTINGS}


@dataclass
class StepView:
    """What a run fills: the round on show, its residual, the theory charts with the measured point, the export."""

    status: gr.Markdown
    view: gr.HTML
    residual: gr.Plot
    theory_tokens: gr.Plot
    theory_speedup: gr.Plot
    measured: gr.HTML
    export: gr.File


def controls(config) -> Controls:
    """The prompt, the stepping buttons and every setting a decode reads, in two columns."""
    default = config.get(None)
    with gr.Row(equal_height=False):
        with gr.Column(scale=3, min_width=360):
            prompt = gr.Textbox(DEFAULT_PROMPT, label="Prompt", lines=4, max_lines=10, elem_id="teach-prompt")
            with gr.Row():
                start = gr.Button("Decode", variant="primary", elem_id="step-start")
                prev = gr.Button("◀ Previous", elem_id="step-prev")
                nxt = gr.Button("Next round ▶", elem_id="step-next")
                play = gr.Button("▶ Play", elem_id="step-play")
                tick = gr.Button("Auto-play tick", visible="hidden", elem_id="step-tick")
            speed = gr.Slider(0.2, 5.0, value=1.5, step=0.1, label="Auto-play: seconds per round", elem_id="step-speed")
            # here, where the prompt's column has room: the settings' column, and the step view under both, stay put
            penalty = gr.Slider(1.0, 2.0, value=1.0, step=0.05, label="Repetition penalty (1 = off)",
                                info="every token already seen gets a lower p before the check; still exact",
                                elem_id="teach-penalty")
        with gr.Column(scale=2, min_width=280):
            preset = gr.Dropdown(config.names, value=default.name, label="Preset (models.yaml)",
                                 elem_id="teach-preset")
            drafter = gr.Radio(list(DRAFTER_CHOICES), value=LABELS[default.drafter], label="Drafter",
                               info=DRAFTER_INFO, elem_id="teach-drafter")
            k = gr.Slider(1, TEACH_K_MAX, value=min(TEACH_K_MAX, default.k_for()), step=1,
                          label="K (draft tokens per round)", elem_id="teach-k")
            confidence = gr.Slider(0.0, MAX_CONFIDENCE, value=0.0, step=0.05, label="Confidence stop (0 = off)",
                                   info="a round stops drafting once the draft's confidence falls below it",
                                   elem_id="teach-confidence")
            temperature = gr.Slider(0.0, 2.0, value=0.8, step=0.05, label="Temperature (0 = greedy)",
                                    elem_id="teach-temperature")
            max_new = gr.Slider(8, TEACH_MAX_NEW, value=32, step=1, label="Max new tokens",
                                elem_id="teach-max-new-tokens")
            # the Chat tab's, /generate's and a lesson's default seed: the same settings decode the same tokens
            seed = gr.Number(Settings.seed, label="Seed (-1 = random)", precision=0, elem_id="teach-seed")
    return Controls(prompt, start, prev, nxt, play, tick, speed, preset, drafter, k, confidence, temperature, penalty,
                    max_new, seed, gr.State(None))


def step_view() -> tuple[StepView, teach_compare.CompareView]:
    """The step view and its residual, then the second drafter's view of the same round, then the theory."""
    status = gr.Markdown("", elem_id="step-status")
    with gr.Row(equal_height=False):
        with gr.Column(scale=3, min_width=420):
            view = gr.HTML(render_step(None, 0), elem_id="step-view")
            residual = gr.Plot(teach_charts.residual_figure(), elem_id="step-residual", show_label=False)
        with gr.Column(scale=2, min_width=280):
            gr.Markdown(STEP_HELP)
    compare = teach_compare.build()
    with gr.Row(equal_height=False):
        with gr.Column(scale=3):
            with gr.Row():
                tokens = gr.Plot(teach_charts.theory_tokens_figure(), elem_id="teach-theory-tokens", show_label=False,
                                 min_width=PLOT_MIN_WIDTH)
                speedup = gr.Plot(teach_charts.theory_speedup_figure(), elem_id="teach-theory-speedup",
                                  show_label=False, min_width=PLOT_MIN_WIDTH)
            measured = gr.HTML(render_measured(None), elem_id="teach-measured")
            export = gr.File(label="Export this run (JSON: tokens, kinds, rounds, p and q, timings, a second drafter)",
                             interactive=False, elem_id="teach-export")
        with gr.Column(scale=1, min_width=260):
            gr.Markdown(THEORY_HELP)
    return StepView(status, view, residual, tokens, speedup, measured, export), compare
