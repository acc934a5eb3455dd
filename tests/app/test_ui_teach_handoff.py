"""The Chat tab's "Step through this message in the Teach tab" (`specui.ui.teach_handoff`): the Teach tab gets the
settings and the seed the message ran with, not the chat's controls as they are now, so its Decode gives the very
run on screen; a download that is not the message's (↶ took it back) falls back to the controls and says so. A later
message of a chat is decoded after the conversation before it and the system prompt, as the chat decoded it."""

from __future__ import annotations

import json
from dataclasses import replace

import gradio as gr
import pytest

from specui import loading
from specui.loading import PairCache
from specui.ui import teach_handoff, teach_keys, teach_memory, teach_tree, teaching
from specui.ui.blocks import MAX_SEED_SHOWN, chat_tab
from specui.ui.chat_handlers import App, lesson_cleared, respond
from specui.ui.session import Showcase
from tests.helpers import ui_config
from tests.unit.test_chat_ids import CHATML

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
                              {**{k: v for k, v in moved.items() if k in t.settings}, teach.compare.second: None,
                               teach.index: teach_keys.Shown()})
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


def test_a_message_handed_over_mid_lesson_leaves_none_of_the_lesson_and_next_decodes_it(tabs):
    """The Teach tab on round 3 of a lesson, auto-playing: the message handed over clears its rounds, measured point,
    export and auto-play, and moves the page's step shown (`Shown`) off it, so Next decodes the message at round 1
    (the old rounds stayed beside the new prompt, and Next stepped them on)."""
    ui, teach, app = tabs
    lesson_data, lesson_last = sent(app, ui, "import os\n", temperature=0.0, seed=0)
    state, shown, second = teaching.TeachState(app.showcase), teach_keys.Shown(), "prompt lookup"
    form = teach_form(teach, teach_handoff.step_through(ui, teach, {**lesson_data, **chat_state(ui, lesson_last)},
                                                        max_seed=MAX_SEED_SHOWN), max_new=24)
    lesson = teaching.decode(state, teach, {**form, teach.index: shown, teach.compare.second: second})
    teach_keys.moving(shown, {}, teaching.pressed, teach, "++",
                      {teach.index: shown, teach.memory: lesson[teach.memory]})
    assert shown.index == 2 and shown.what is lesson[teach.run] and len(lesson[teach.run].steps) > 3
    memory = teach_memory.at_round(lesson[teach.memory], shown.index)  # as the steps wrote it: a refresh resumes
    assert teach_memory.resumed_round(memory) == 2
    data, last = sent(app, ui, CODE, temperature=0.0, seed=0)
    moved = teach_handoff.step_through(ui, teach, {**data, **chat_state(ui, last), teach.index: shown,
                                                   teach.compare.second: second, teach.memory: memory},
                                       max_seed=MAX_SEED_SHOWN)
    # a refresh (the page is on ?tab=teach now) no longer decodes the lesson left to show its round 3: it puts its
    # prompt and settings back, and Next decodes it at round 1
    assert teach_memory.resumed_round(moved[teach.memory]) is None, moved[teach.memory]
    assert moved[teach.memory]["prompt"] == memory["prompt"] and "round 1" in teach_memory.restored_note(
        moved[teach.memory])
    assert set(moved) <= set(teach_handoff.outputs(ui, teach))  # gradio updates only an event's outputs
    s = teach.step
    assert shown.what is None and shown.index == 0 and moved.get(teach.run, shown) is None, (shown.index, list(moved))
    assert "Press <b>Decode</b>" in moved[s.view] and "No run yet" in moved[s.measured] and moved[s.export] is None
    assert "prompt lookup is chosen: press Decode" in moved[teach.compare.view]
    assert moved[teach.timer].active is False and "Play" in moved[teach.controls.play]["value"]
    assert not moved[s.residual].data and not any(t.name == "measured" for t in moved[s.theory_tokens].data)
    nxt = teaching.decode_first(state, teach, {**teach_form(teach, moved), teach.run: moved[teach.run],
                                               teach.index: shown, teach.compare.second: second})
    assert nxt[teach.run].prompt == CODE and shown.what is nxt[teach.run] and shown.index == 0
    assert 'data-round="1"' in nxt[s.view]


def test_a_step_answered_just_before_a_hand_off_is_drawn_over_by_the_redraw_after_it(tabs):
    """An auto-play tick moved the lesson on round 3 just before the hand-off, its answer landing after it: the old
    round on the page and in the browser's memory (a refresh decoded the lesson left). The hand-off's redraw
    (`teach_handoff.wire`: a press "=" through the stepping event, in order after that answer) draws the handed
    message's clean view and takes the round out of the memory again; a page that never decoded is left alone."""
    ui, teach, app = tabs
    data, last = sent(app, ui, "import os\n", temperature=0.0, seed=0)
    state, shown = teaching.TeachState(app.showcase), teach_keys.Shown()
    form = teach_form(teach, teach_handoff.step_through(ui, teach, {**data, **chat_state(ui, last)},
                                                        max_seed=MAX_SEED_SHOWN), max_new=24)
    lesson = teaching.decode(state, teach, {**form, teach.index: shown})
    ticked = teach_keys.moving(shown, {}, teaching.pressed, teach, "t+",
                               {teach.index: shown, teach.memory: lesson[teach.memory]})
    assert teach_memory.resumed_round(ticked[teach.memory]) == 2
    lesson_cleared(teach, {teach.index: shown})  # the hand-off; the tick's answer lands after it
    second = "prompt lookup"
    redrawn = teach_keys.moving(shown, {}, teaching.pressed, teach, "=",
                                {teach.index: shown, teach.memory: ticked[teach.memory], teach.compare.second: second})
    assert "Press <b>Decode</b>" in redrawn[teach.step.view] and "data-round" not in redrawn[teach.step.view]
    assert "prompt lookup is chosen: press Decode" in redrawn[teach.compare.view]
    memory = redrawn[teach.memory]
    assert teach_memory.resumed_round(memory) is None and memory["prompt"] == "import os\n", memory
    assert shown.what is None
    fresh = teaching.pressed(teach, "=", {teach.index: teach_keys.Shown(), teach.memory: ticked[teach.memory]})
    assert teach.memory not in fresh  # nothing decoded on this page, nothing handed: its memory stays as it is


def test_a_hand_off_clears_the_tree_stepper_and_a_tree_decode_answered_after_it_changes_nothing(tabs):
    """The tree stepper kept the last prompt's trees, round list and step beside the handed message; and a Decode with
    a tree in the engine's queue as the message was handed over put them back when it answered."""
    ui, teach, app = tabs
    tree, data, last = teach.tree, *sent(app, ui, "import os\n", temperature=0.0, seed=0)
    form = teach_form(teach, teach_handoff.step_through(ui, teach, {**data, **chat_state(ui, last)},
                                                        max_seed=MAX_SEED_SHOWN), max_new=16)
    work, shown = teaching.TeachState(app.showcase).work, teach_keys.Shown()
    panel = {**form, tree.width: 2, tree.nodes: 0, tree.step: shown}
    assert teach_tree.decode(tree, teach.controls, work, panel)[tree.trees] and shown.what is not None
    moved = teach_handoff.step_through(ui, teach, {**data, **chat_state(ui, last), tree.step: shown},
                                       max_seed=MAX_SEED_SHOWN)
    assert shown.what is None and moved[tree.trees] == {} and moved[tree.pick]["choices"] == []
    assert "Decode with a tree" in moved[tree.view] and moved[tree.status] == ""
    assert set(moved) <= set(teach_handoff.outputs(ui, teach))

    def handed_meanwhile(*args):
        done = work(*args)
        teach_tree.cleared(tree, shown)  # the hand-off, as the trees are decoded
        return done

    answer = teach_tree.decode(tree, teach.controls, handed_meanwhile, panel)
    assert shown.what is None and list(answer) == [tree.status] and answer[tree.status] == gr.update(), answer
    # a step pressed with no tree moves nothing: a Decode with a tree on its way still shows its first tree
    moves = shown.moves
    teach_keys.moving(shown, {}, teach_tree.pressed, tree, "+", {tree.step: shown})
    assert shown.moves == moves
    assert teach_tree.decode(tree, teach.controls, work, panel)[tree.trees] and shown.what is not None


def test_a_decode_answered_after_a_hand_off_leaves_the_handed_message_alone(tabs):
    """Decode in the engine's queue as the Chat tab hands a message over (not queued: it lands first) answers after
    it: it put the lesson left back (its round 1, run, export, status line and memory beside the handed message's
    prompt, and Next stepped the old rounds). Now its answer changes nothing and the page's `Shown` stays off it."""
    ui, teach, app = tabs
    data, last = sent(app, ui, "import os\n", temperature=0.0, seed=0)
    state, shown = teaching.TeachState(app.showcase), teach_keys.Shown()
    form = teach_form(teach, teach_handoff.step_through(ui, teach, {**data, **chat_state(ui, last)},
                                                        max_seed=MAX_SEED_SHOWN), max_new=8)
    real = state.work

    def work(*args):
        done = real(*args)
        lesson_cleared(teach, {teach.index: shown})  # the hand-off, as the run is decoded
        return done

    state.work = work
    answer = teaching.decode(state, teach, {**form, teach.index: shown})
    assert shown.what is None and shown.index == 0, shown.what
    kept = [teach.run, teach.step.view, teach.step.export, teach.step.status, teach.memory, teach.compare.view]
    assert all(answer.get(c, gr.update()) == gr.update() for c in kept), answer


def test_a_decode_clicked_before_a_hand_off_and_run_after_it_changes_nothing(tabs):
    """Decode (or Decode with a tree) clicked on the last lesson waited in the engine's queue as the Chat tab handed a
    message over (not queued: it lands first), then ran, reading the Shown the hand-off had moved: it put the lesson's
    round 1 (its trees) back beside the handed message. The click now carries the page's count of hand-offs
    (`teach.handed`): it runs no model and changes nothing. A Decode clicked after the hand-off decodes."""
    ui, teach, app = tabs
    tree, (data, last) = teach.tree, sent(app, ui, "import os\n", temperature=0.0, seed=0)
    chat = {**data, **chat_state(ui, last)}
    lesson = teach_form(teach, teach_handoff.step_through(ui, teach, chat, max_seed=MAX_SEED_SHOWN), max_new=8)
    shown, tree_shown = teach_keys.Shown(), teach_keys.Shown()
    clicked = {**lesson, teach.index: shown, teach.handed: 0, tree.width: 2, tree.nodes: 0, tree.step: tree_shown}
    moved = teach_handoff.step_through(ui, teach, {**chat, teach.index: shown, tree.step: tree_shown},
                                       max_seed=MAX_SEED_SHOWN)  # the hand-off, as both decodes wait in the queue
    assert moved[teach.handed] == 1 and set(moved) <= set(teach_handoff.outputs(ui, teach))
    def no_run(*args):
        pytest.fail("a decode clicked before the hand-off ran the model")
    state, real = teaching.TeachState(app.showcase), teaching.TeachState(app.showcase)
    state.work = no_run
    answer = teaching.decode(state, teach, clicked)
    assert list(answer) == [teach.step.status] and answer[teach.step.status] == gr.update() and shown.what is None
    answer = teach_tree.decode(tree, teach.controls, no_run, clicked)
    assert list(answer) == [tree.status] and answer[tree.status] == gr.update() and tree_shown.what is None
    after = {**clicked, teach.handed: moved[teach.handed]}  # clicked once the hand-off's answer is on the page
    assert 'data-round="1"' in teaching.decode(real, teach, after)[teach.step.view] and shown.what is not None
    assert teach_tree.decode(tree, teach.controls, real.work, after)[tree.trees] and tree_shown.what is not None


def test_the_hand_off_reads_and_writes_the_browsers_memory(tabs):
    """`teach_handoff.wire` gives `step_through` the Teach tab's memory and takes it back (`lesson_cleared`): without
    it among the click's inputs the memory kept the lesson's round, and a refresh brought the lesson back there."""
    ui, teach, app = tabs
    with gr.Blocks() as demo, gr.Tabs() as tabs_:
        chat = chat_tab(ui_config())
        tab = teaching.teaching_tab(app.showcase)
        chat.tabs = tabs_
        teach_handoff.wire(chat, tab, max_seed=MAX_SEED_SHOWN)
    click, = [f for f in demo.fns.values() if any(t[0] == chat.results.to_teach._id for t in f.targets)]
    assert tab.memory in click.inputs and tab.memory in click.outputs and tab.index in click.inputs
    assert tab.tree.step in click.inputs and set(teach_tree.outputs(tab.tree)) <= set(click.outputs)
    # both steps shown drawn again after it, through their stepping events (a step's answer could land after it)
    after = [f.js for f in demo.fns.values() if f.trigger_after == click._id]
    assert any("specuiRedraw('step')" in (js or "") for js in after), after
    assert any("specuiRedraw('tree-step')" in (js or "") for js in after), after
    # the page's count of hand-offs set by it, and sent with every Decode (a click before it then changes nothing)
    assert tab.handed in click.outputs and tab.tree.handed is tab.handed
    first, = [b._id for b in demo.blocks.values() if getattr(b, "elem_id", None) == "step-first"]
    starts = {tab.controls.start._id, tab.tree.start._id, first}
    decodes = [f for f in demo.fns.values() if any(t[0] in starts and t[1] == "click" for t in f.targets) and f.fn]
    assert len(decodes) == 3 and all(tab.handed in f.inputs for f in decodes), [f.name for f in decodes]


def chat_state(ui, last) -> dict:
    """The conversation's states and the run's download after a chat run's `last` frame."""
    return {ui.messages: last[ui.messages], ui.turns: last[ui.turns], ui.exchanges: last[ui.exchanges],
            ui.results.export: last[ui.results.export]["value"]}


# -- a later message of a chat: the conversation before it comes along ----------------------------------------


@pytest.fixture(scope="module")
def chat():
    """The tiny pair as a chat preset (`bundled-chat`: the bundled pair with a ChatML template, which it ships
    without), its chat tab, its Teach tab with a tree stepper, and a fresh app."""
    config = ui_config()
    preset = replace(config.get("bundled"), name="bundled-chat", chat_template=True)
    config = replace(config, presets={**config.presets, preset.name: preset}, default=preset.name)
    showcase = Showcase(config, PairCache())
    read = loading.read_tokenizer

    def with_template(*args, **kwargs):  # given as the tokenizer is read: the load refuses a chat preset whose
        tokenizer = read(*args, **kwargs)  # tokenizer has none (load_checks.check_chat_template)
        tokenizer.chat_template = CHATML
        return tokenizer

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(loading, "read_tokenizer", with_template)
        assert showcase.cache.get(preset).tokenizer.chat_template == CHATML
    with gr.Blocks(), gr.Tabs() as tabs:
        ui = chat_tab(config)
        teach = teaching.teaching_tab(showcase)
        tree = teach_tree.tree_panel(teach.controls, work=teaching.TeachState(showcase).work)
    ui.tabs = tabs
    return ui, teach, App(showcase), tree


TURNS = ("def add(a, b):\n    ", "class Stack:\n    ", CODE)


def conversation(app, ui, **values) -> tuple[dict, dict]:
    """Three turns of a real chat on `bundled-chat`: the last turn's inputs and last frame."""
    state = {}
    for prompt in TURNS:
        data = {**chat_form(ui, prompt, preset="bundled-chat", **values), **state}
        *_, last = respond(app, ui, data)
        state = {ui.messages: last[ui.messages], ui.turns: last[ui.turns], ui.exchanges: last[ui.exchanges]}
    assert len(last[ui.turns]) == 6 and last[ui.exchanges][-1]["kept"]
    return data, last


def handed_off(app, ui, teach, data, last) -> dict:
    """The Teach tab's updates from "Step through this message in the Teach tab", as the page wires it."""
    state = {ui.messages: last[ui.messages], ui.turns: last[ui.turns], ui.exchanges: last[ui.exchanges]}
    return teach_handoff.step_through(ui, teach, {**data, **state, ui.results.export: last[ui.results.export]["value"]},
                                      max_seed=MAX_SEED_SHOWN, chats=app.showcase.chats)


def teach_form(teach, moved: dict, **changes) -> dict:
    """The Teach tab's inputs after the handoff `moved` (the controls it set), with `changes` by control name."""
    t = teach.controls
    return {**{k: v for k, v in moved.items() if k in t.settings}, teach.compare.second: None,
            teach.index: teach_keys.Shown(), **{getattr(t, name): value for name, value in changes.items()}}


def replied(ui, last) -> list[int]:
    """The reply's tokens, as its run's JSON has them."""
    return [token["id"] for token in json.load(open(last[ui.results.export]["value"], encoding="utf-8"))["tokens"]]


@pytest.mark.parametrize("temperature, seed", [(0.0, 0), (0.9, 5)])
def test_a_later_message_is_stepped_through_after_the_conversation_before_it(chat, temperature, seed):
    """The third message of a chat, handed to the Teach tab: its Decode gives the chat's reply token for token
    (greedy, and sampled with the message's seed), reading the four messages before it as the chat did."""
    ui, teach, app, _ = chat
    data, last = conversation(app, ui, temperature=temperature, seed=seed)
    moved = handed_off(app, ui, teach, data, last)
    status = moved[teach.step.status]
    assert "after the 4 messages before it, as the chat did" in status and "alone" not in status
    decoded = teaching.decode(teaching.TeachState(app.showcase), teach, teach_form(teach, moved))
    assert decoded[teach.run].spec.token_ids == replied(ui, last)
    assert "after the 4 messages before it, as the chat decoded it" in decoded[teach.step.status]
    assert decoded[teach.run].extra["messages_before"] == 4
    # the browser's memory keeps how many messages came before the prompt, none of their text
    memory = decoded[teach.memory]
    assert memory["messages_before"] == 4 and TURNS[0] not in json.dumps(memory)
    assert "decodes the prompt alone" in teach_memory.restored_note(memory)
    alone = teach_memory.restored_note({**memory, "messages_before": 0, "system_prompt": False})
    assert "conversation" not in alone and "decodes it at round 1" in alone


def test_another_prompt_typed_is_decoded_alone_and_the_status_line_says_so(chat):
    ui, teach, app, _ = chat
    data, last = conversation(app, ui, temperature=0.0, seed=0)
    moved = handed_off(app, ui, teach, data, last)
    t, state = teach.controls, teaching.TeachState(app.showcase)
    typed = teach_form(teach, moved, prompt="x = 1\n")
    edited = teaching.prompt_edited(teach, {**typed, teach.run: None})[teach.step.status]
    assert "decoded alone" in edited and "no longer used" in edited
    alone = teaching.decode(state, teach, typed)[teach.run]
    pair = app.showcase.cache.get(app.showcase.config.get("bundled-chat"))
    assert alone.prompt_ids == app.showcase.encode(pair, "x = 1\n", ()) and "messages_before" not in alone.extra
    # typed back: the message again, with its conversation
    back = teaching.prompt_edited(teach, {**typed, t.prompt: CODE, teach.run: alone})[teach.step.status]
    assert "after the 4 messages before it" in back
    again = teaching.decode(state, teach, teach_form(teach, moved))[teach.run]
    assert again.prompt_ids == app.showcase.encode(pair, CODE, last[ui.turns][:-2])


def shape(trees: dict) -> dict:
    """Each tree round's tokens, structure, verdicts and own token (the draft's q differs in its last digits: the chat
    read the conversation's cache, the Teach tab reads the prompt whole)."""
    return {i: ([(n.token_id, n.parent, n.verdict) for n in r.nodes], r.path, r.final_id) for i, r in trees.items()}


def test_the_tree_step_through_and_the_second_drafter_read_the_conversation_too(chat):
    ui, teach, app, tree = chat
    data, last = conversation(app, ui, temperature=0.0, seed=0, tree_width=2)
    moved = handed_off(app, ui, teach, data, last)
    form = teach_form(teach, moved)
    work = teaching.TeachState(app.showcase).work
    out = teach_tree.decode(tree, teach.controls, work, {**form, tree.width: 2, tree.nodes: 0,
                                                            tree.step: teach_keys.Shown()})
    assert out[tree.trees] and shape(out[tree.trees]) == shape(last[ui.tree.trees])  # the chat's trees, round for round
    second = teaching.decode(teaching.TeachState(app.showcase), teach, {**form, teach.compare.second: "prompt lookup"})
    run, compared = second[teach.run], form[teach.index].beside  # kept beside the rounds
    pair = app.showcase.cache.get(app.showcase.config.get("bundled-chat"))
    assert run.prompt_ids == app.showcase.encode(pair, CODE, last[ui.turns][:-2])
    assert compared.rounds[0].context_tokens == len(run.prompt_ids)


def test_the_system_prompt_travels_with_the_message(chat):
    ui, teach, app, _ = chat
    system = "You write short Python."
    data, last = conversation(app, ui, temperature=0.9, seed=3, system=system)
    moved = handed_off(app, ui, teach, {**data, ui.controls.system: "another system prompt, typed later"}, last)
    assert moved[teach.controls.context]["system"] == system  # the message's own, from its run's JSON
    assert "the 4 messages before it and the system prompt" in moved[teach.step.status]
    decoded = teaching.decode(teaching.TeachState(app.showcase), teach, teach_form(teach, moved))
    assert decoded[teach.run].spec.token_ids == replied(ui, last)
    pair = app.showcase.cache.get(app.showcase.config.get("bundled-chat"))
    assert system in pair.tokenizer.decode(decoded[teach.run].prompt_ids)
