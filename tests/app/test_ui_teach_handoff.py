"""The Chat tab's "Step through this message in the Teach tab" (`specui.ui.teach_handoff`): the Teach tab gets the
settings and the seed the message ran with, not the chat's controls as they are now, so its Decode gives the very
run on screen; a download that is not the message's (↶ took it back) falls back to the controls and says so."""

from __future__ import annotations

import json

import gradio as gr
import pytest

from specui.loading import PairCache
from specui.ui import teach_handoff, teaching
from specui.ui.blocks import MAX_SEED_SHOWN, chat_tab
from specui.ui.chat_handlers import App, respond
from specui.ui.session import Showcase
from tests.helpers import ui_config

pytestmark = pytest.mark.slow  # runs the bundled pair

CODE = "def main(argv):\n    "


@pytest.fixture(scope="module")
def tabs():
    config = ui_config()
    showcase = Showcase(config, PairCache())
    with gr.Blocks(), gr.Tabs() as tabs:
        ui = chat_tab(config)
        teach = teaching.teaching_tab(showcase)
    ui.tabs = tabs
    return ui, teach, App(showcase)


def chat_form(ui, prompt: str, **values) -> dict:
    c = ui.controls
    data = {ui.panel.prompt: prompt, ui.messages: [], ui.turns: [], ui.exchanges: [], c.preset: "bundled",
            c.drafter: "draft model", c.k: 3, c.adaptive: False, c.confidence: 0.0, c.temperature: 0.9, c.top_p: 1.0,
            c.top_k: 0, c.penalty: 1.0, c.max_new: 16, c.seed: -1, c.compare: False, c.arena: False,
            c.tree_width: 1, c.tree_nodes: 0, c.system: ""}
    return {**data, **{getattr(c, name): value for name, value in values.items()}}


def sent(app, ui, prompt: str, **values) -> tuple[dict, dict]:
    """A real chat run of `prompt`: the inputs it was sent with and its last frame."""
    data = chat_form(ui, prompt, **values)
    *_, last = respond(app, ui, data)
    return data, last


def test_the_message_goes_to_the_teach_tab_with_the_settings_and_seed_it_ran_with(tabs):
    ui, teach, app = tabs
    data, last = sent(app, ui, CODE, seed=5)  # sampled
    export = last[ui.results.export]["value"]
    ran = json.load(open(export, encoding="utf-8"))
    c, t = ui.controls, teach.controls
    state = {ui.messages: last[ui.messages], ui.turns: last[ui.turns], ui.exchanges: last[ui.exchanges]}
    # the teacher moves K, the temperature, the drafter, the budget and the seed after the message
    later = {**data, **state, c.k: 6, c.temperature: 0.0, c.drafter: "prompt lookup", c.max_new: 64, c.seed: 7,
             ui.results.export: export}
    moved = teach_handoff.step_through(ui, teach, later, max_seed=MAX_SEED_SHOWN)
    assert (moved[t.k], moved[t.temperature], moved[t.drafter], moved[t.max_new]) == (3, 0.9, "draft model", 16)
    assert moved[t.seed] == ran["seed"] == 5
    assert "not known" not in moved[teach.step.status]
    # and the Teach tab's Decode with what it was given is the message's own run, token for token
    decoded = teaching.decode(teaching.TeachState(app.showcase), teach,
                              {**{k: v for k, v in moved.items() if k in t.settings}, teach.compare.second: None})
    assert decoded[teach.run].spec.token_ids == [token["id"] for token in ran["tokens"]]


def test_a_download_that_is_not_the_messages_leaves_the_controls_and_says_so(tabs):
    ui, teach, app = tabs
    data, last = sent(app, ui, CODE, temperature=0.0, seed=0)
    c, t = ui.controls, teach.controls
    state = {ui.messages: last[ui.messages], ui.turns: last[ui.turns], ui.exchanges: last[ui.exchanges]}
    # ↶ took a later message back: the last reply kept is another than the download's
    taken_back = {**data, **state, ui.turns: [*state[ui.turns][:-1], {"role": "assistant", "content": "other"}],
                  ui.results.export: last[ui.results.export]["value"], c.k: 5}
    moved = teach_handoff.step_through(ui, teach, taken_back, max_seed=MAX_SEED_SHOWN)
    assert moved[t.k] == 5 and "not known here" in moved[teach.step.status]
    missing = teach_handoff.step_through(ui, teach, {**data, **state, ui.results.export: None, c.k: 4},
                                         max_seed=MAX_SEED_SHOWN)
    assert missing[t.k] == 4 and "not known here" in missing[teach.step.status]


def test_a_random_seed_too_long_for_the_seed_box_is_said_to_be_random(tabs):
    """The engine draws a random seed of 63 bits: the page's seed box (a javascript number) cannot hold it."""
    ui, teach, app = tabs
    data, last = sent(app, ui, CODE, seed=-1, k=2)
    state = {ui.messages: last[ui.messages], ui.turns: last[ui.turns], ui.exchanges: last[ui.exchanges]}
    moved = teach_handoff.step_through(ui, teach, {**data, **state, ui.results.export: last[ui.results.export]["value"],
                                                   ui.controls.k: 6}, max_seed=MAX_SEED_SHOWN)
    assert moved[teach.controls.k] == 2 and teach.controls.seed not in moved
    assert "seed was random" in moved[teach.step.status]
