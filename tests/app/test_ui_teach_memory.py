"""The Teach tab's memory of its last decoded settings (`specui.ui.teach_memory`): what it keeps, and what it puts
back: each value that still fits its control, the tab's default for the rest (a preset gone from models.yaml, a
number outside its slider, a value of the wrong type, a memory that is not a dict)."""

from __future__ import annotations

import gradio as gr
import pytest

from tests.helpers import ui_config


@pytest.fixture(scope="module")
def tab():
    from specui.loading import PairCache
    from specui.ui import teaching
    from specui.ui.session import Showcase

    config = ui_config()
    with gr.Blocks():
        ui = teaching.teaching_tab(Showcase(config, PairCache()), tab=False)
    return config, ui


def test_what_decode_read_comes_back(tab):
    from specui.ui.teach_memory import FIELDS, kept, restored

    config, ui = tab
    c = ui.controls
    data = {c.prompt: "def f(x):\n", c.preset: config.names[0], c.drafter: "prompt lookup", c.k: 3,
            c.confidence: 0.25, c.temperature: 0.4, c.penalty: 1.1, c.max_new: 16, c.seed: 42}
    saved = kept(c, data)
    assert set(saved) == set(FIELDS) and saved["seed"] == 42
    assert restored(config, c, saved) == data


def test_what_no_longer_fits_stays_at_the_default(tab):
    from specui.ui.teach_memory import FIELDS, restored

    config, ui = tab
    c = ui.controls
    saved = {"prompt": 5, "preset": "a preset since removed", "drafter": "<b>nope</b>", "k": 99, "confidence": -1,
             "temperature": float("nan"), "penalty": True, "max_new": "16", "seed": float("inf")}
    back = restored(config, c, saved)
    assert all(back[getattr(c, name)] == gr.update() for name in FIELDS)  # nothing changed
    for memory in (None, [], "text", {}):
        assert all(value == gr.update() for value in restored(config, c, memory).values())


def test_the_round_to_come_back_to_after_a_refresh():
    """A refresh decodes the remembered run again at its round: only a run decoded alone (a chat's conversation is
    not kept, so its rounds would differ) with a round that is a whole number."""
    from specui.ui.teach_memory import at_round, resumed_round

    saved = {"prompt": "def f(x):\n", "seed": 3}
    assert resumed_round(saved) is None  # decoded, never stepped: nothing to come back to
    assert resumed_round(at_round(saved, 4)) == 4 and saved == {"prompt": "def f(x):\n", "seed": 3}
    assert resumed_round(at_round({**saved, "messages_before": 2}, 4)) is None
    for bad in (True, -1, 2.5, "3", None):
        assert resumed_round({**saved, "round": bad}) is None
    for nothing in (None, {}, [], {"round": 3}):
        assert at_round(nothing, 4) == nothing and resumed_round(nothing) is None


def test_a_refresh_after_a_blank_seed_decodes_the_same_run_again(tmp_path):
    """A Seed box left blank decodes with seed 0; the memory kept the blank, which no longer fits the box, so the
    refreshed page decoded its default seed (1) and said it was 'back at round N, where this browser left it' over
    other rounds (other draws at temperature 0.8). The refreshed page's own load handler, over a real tiny pair."""
    from specui.ui.teach_memory import build
    from specui.ui.teach_keys import Shown
    from specui.ui.teaching import TeachState, decode, pressed, teaching_tab
    from tests.app.test_browser_teaching import PROMPT, tiny_showcase

    showcase = tiny_showcase(tmp_path)
    with gr.Blocks() as demo:
        ui = teaching_tab(showcase, tab=False, memory=build())
    c, state = ui.controls, TeachState(showcase)
    page = {component: component.value for component in (c.preset, c.drafter, c.confidence, c.penalty, c.seed)}
    page |= {ui.compare.second: "none", c.context: None}  # a page as it opens
    data = {**page, c.prompt: PROMPT, c.k: 2, c.temperature: 0.8, c.max_new: 24, c.seed: None, ui.index: Shown()}
    out = decode(state, ui, data)
    run = out[ui.run]
    assert run.spec.seed == 0
    memory = pressed(ui, "++", {**data, ui.compare.compared: out[ui.compare.compared], ui.memory: out[ui.memory]})
    memory = memory[ui.memory]
    [resumed] = [f.fn for f in demo.fns.values() if getattr(f.fn, "__name__", "") == "resumed"]
    refreshed = {**page, c.prompt: "", c.k: c.k.value, c.temperature: c.temperature.value, c.max_new: c.max_new.value,
                 ui.index: Shown(), ui.memory: memory}
    again = resumed(refreshed, gr.Request(query_params={"tab": "teach"}))
    assert again[ui.run].spec.seed == run.spec.seed
    assert again[ui.run].spec.token_ids == run.spec.token_ids
    assert "Back at round 3" in again[ui.step.status]
