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
    for bad in (True, -1, 0, 2.5, "3", None):
        assert resumed_round({**saved, "round": bad}) is None
    for nothing in (None, {}, [], {"round": 3}):
        assert at_round(nothing, 4) == nothing and resumed_round(nothing) is None



@pytest.fixture(scope="module")
def lesson(tmp_path_factory):
    """The Teach tab over a real tiny pair, with the browser's memory (so a page's load decodes it again), its
    handlers' state, the controls' values of a page as it opens, the handler that decodes it again and the app."""
    from specui.ui.teach_memory import build
    from specui.ui.teaching import TeachState, teaching_tab
    from tests.app.teach_page import tiny_showcase

    showcase = tiny_showcase(tmp_path_factory.mktemp("teach-memory-pair"))
    with gr.Blocks() as demo:
        ui = teaching_tab(showcase, tab=False, memory=build())
    c = ui.controls
    page = {component: component.value for component in (c.preset, c.drafter, c.k, c.confidence, c.temperature,
                                                          c.penalty, c.max_new, c.seed)}
    page |= {c.prompt: "", ui.compare.second: "none", c.context: None}
    [resumed] = [f.fn for f in demo.fns.values() if getattr(f.fn, "__name__", "") == "resumed"]
    return ui, TeachState(showcase), page, resumed, demo


def _stepped(lesson, presses: str, **settings) -> tuple:
    """A run decoded with `settings` (by control name) and stepped by `presses`: (the run, the browser's memory)."""
    from specui.ui.teach_keys import Shown
    from specui.ui.teaching import decode, pressed
    from tests.app.teach_page import PROMPT

    ui, state, page, _, _ = lesson
    c = ui.controls
    data = {**page, c.prompt: PROMPT, **{getattr(c, name): value for name, value in settings.items()},
            ui.index: Shown()}
    out = decode(state, ui, data)
    moved = pressed(ui, presses, {**data, ui.memory: out[ui.memory]})
    return out[ui.run], moved[ui.memory]


def test_a_refresh_after_a_blank_seed_decodes_the_same_run_again(lesson):
    """A Seed box left blank decodes with a seed drawn for it (as -1 does); the memory kept the blank, which no longer
    fits the box, so the refreshed page decoded its default seed (then 1) and said it was 'back at round N, where this
    browser left it' over other rounds (other draws at temperature 0.8). The refreshed page's own load handler, over a
    real tiny pair: the memory keeps the seed drawn."""
    from specui.ui.teach_keys import Shown

    ui, _, page, resumed, _ = lesson
    run, memory = _stepped(lesson, "++", k=2, temperature=0.8, max_new=24, seed=None)
    assert run.spec.seed is not None and memory["seed"] == run.spec.seed
    again = resumed({**page, ui.index: Shown(), ui.memory: memory})
    assert again[ui.run].spec.seed == run.spec.seed
    assert again[ui.run].spec.token_ids == run.spec.token_ids
    assert "Back at round 3" in again[ui.step.status]


@pytest.mark.parametrize("seed", [-1, None])
def test_a_greedy_lessons_refresh_leaves_the_seed_box_as_it_was_set(lesson, seed):
    """A greedy run with Seed -1 (or blank) drew a seed that plays no part, and the memory kept it: the refreshed page
    put that random number in the box, as though the lesson had been decoded with it. The box comes back as the user
    set it (a blank as -1, what it means), the same rounds are decoded again, and the status line says the seed plays
    no part."""
    from specui.ui.teach_keys import Shown
    from specui.ui.teach_memory import restored

    ui, state, page, resumed, _ = lesson
    run, memory = _stepped(lesson, "++", k=2, temperature=0.0, max_new=24, seed=seed)
    assert memory["seed"] == -1
    assert restored(state.showcase.config, ui.controls, memory)[ui.controls.seed] == -1
    again = resumed({**page, ui.index: Shown(), ui.memory: memory})
    assert again[ui.run].spec.token_ids == run.spec.token_ids and "Back at round 3" in again[ui.step.status]
    assert "(greedy: the seed plays no part)" in again[ui.step.status] and "(seed" not in again[ui.step.status]
    assert again[ui.memory]["seed"] == -1


def test_next_pressed_while_a_refreshed_page_decodes_keeps_the_round(lesson):
    """A refreshed page decodes its run again on its own, and a presenter presses Next (the clicker) meanwhile: that
    press's decode-first, which read no run on the page, waited behind the refresh's in the engine's queue and then
    decoded the whole run a second time (another ZeroGPU call) and put the lesson back at round 1, the round the
    refresh had come back to lost (and the browser's memory of it). It finds the run the refresh put on show."""
    from specui.ui.teach_keys import Shown
    from specui.ui.teach_memory import restored
    from specui.ui.teaching import decode_first

    ui, state, page, resumed, _ = lesson
    _, memory = _stepped(lesson, "+++", k=2, temperature=0.8, max_new=24, seed=5)
    shown = Shown()  # the refreshed page's own: its events get this object itself
    back = resumed({**page, ui.index: shown, ui.memory: memory})
    assert shown.index == 3 and back[ui.memory]["round"] == 3
    settings = {k: v for k, v in restored(state.showcase.config, ui.controls, memory).items() if v != gr.update()}
    clicked = {**page, **settings, ui.run: None, ui.index: shown, ui.memory: memory}  # the page as Next was pressed
    out = decode_first(state, ui, clicked)
    assert ui.run not in out and ui.memory not in out  # nothing decoded again, the memory left at round 4
    assert shown.index == 3 and shown.what is back[ui.run]


def test_a_run_never_stepped_past_round_1_is_not_decoded_again_on_a_refresh(lesson):
    """Every Decode kept round 1 (index 0) as the round to come back to, so every later page opened on ?tab=teach
    decoded the whole run again (an engine's queue wait, a ZeroGPU call) to show what one press of Next gives, even
    for a teacher who never stepped. Only a round past the first is kept; the page says the prompt is back instead,
    and stepping back to round 1 forgets the round as well."""
    from specui.ui.teach_memory import ROUND, resumed_round, restored_note
    from specui.ui.teach_keys import Shown
    from specui.ui.teaching import pressed

    ui, _, page, _, demo = lesson
    [due] = [f.fn for f in demo.fns.values() if f.name == "due"]
    teach = gr.Request(query_params={"tab": "teach"})
    _, never = _stepped(lesson, "", k=2, max_new=24, seed=1)  # decoded, on round 1: no press
    assert ROUND not in never and resumed_round(never) is None and due(never, 0, teach) == gr.skip()
    assert "decodes it at round 1" in restored_note(never)
    run, memory = _stepped(lesson, "++", k=2, max_new=24, seed=1)
    assert due(memory, 0, teach) == 1 and "decoding it again" in restored_note(memory) and "round 3" in \
        restored_note(memory)
    assert "decodes it at round 1" in restored_note(memory, teach=False)  # a page opened on the Chat tab
    back = pressed(ui, "--", {ui.index: Shown(run, 2), ui.memory: memory})
    assert ROUND not in back[ui.memory] and due(back[ui.memory], 0, teach) == gr.skip()


def test_only_a_page_with_a_run_to_come_back_to_joins_the_engines_queue(lesson):
    """Every page's load (any tab, any visitor, nothing remembered) was one queued event of the engine's: it waited
    behind the run in progress, counted against a ZeroGPU Space's queue (a Send refused as busy) and laid gradio's
    queue overlay over the step view. Loads now ask outside the queue; only a resume due decodes, in the queue."""
    ui, _, page, _, demo = lesson
    fns = list(demo.fns.values())
    loads = [f for f in fns if any(trigger == "load" for _, trigger in f.targets)]
    assert loads and all(not f.queue for f in loads), [(f.name, f.queue) for f in loads]
    [due] = [f.fn for f in loads if f.name == "due"]
    [resume] = [f for f in fns if f.name == "resumed"]
    assert resume.queue and [trigger for _, trigger in resume.targets] == ["change"]
    run, memory = _stepped(lesson, "++", k=2, max_new=24, seed=1)
    teach, chat = gr.Request(query_params={"tab": "teach"}), gr.Request(query_params={})
    assert due(memory, 0, teach) == 1 and due(memory, 1, teach) == 2  # a change each time: the decode runs
    for saved, request in (({}, teach), (memory, chat), ({"prompt": "x"}, teach)):
        assert due(saved, 0, request) == gr.skip(), (saved, request.query_params)  # no change: nothing queued


def test_a_prompt_too_long_to_keep_is_not_decoded_again_as_another(tmp_path):
    """A prompt over MAX_PROMPT characters (a long file pasted to show prompt lookup copying from it) was kept, but
    never put back (it does not fit the memory's limit): the refreshed page said the lesson was back and decoded the
    prompt box's default instead, "Back at round 3, where this browser left it" over another prompt's rounds. A
    prompt too long to keep is not kept (nor written to the browser's storage at every step): the settings come back,
    nothing claims the prompt did, nothing is decoded again. A real tiny pair whose tokenizer drops whitespace, so
    that 20,000 spaces cost no tokens."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    from specui.loading import PairCache
    from specui.presets import load_config
    from specui.ui.session import Showcase
    from specui.ui.teach_keys import Shown
    from specui.ui.teach_memory import MAX_PROMPT, build, restored, restored_note
    from specui.ui.teaching import TeachState, decode, pressed, teaching_tab
    from tests.app.teach_page import PROMPT
    from tests.helpers import make_model, noisy_copy, save_tiny_model

    vocab = {"[UNK]": 0, **{chr(c): c - 32 for c in range(33, 127)}}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(),
                                                 pre_tokenizers.Split("", behavior="isolated")])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]")
    target = make_model("llama", layers=2, seed=0)
    save_tiny_model(tmp_path / "target", "llama", layers=2, seed=0, model=target, tokenizer=tokenizer)
    save_tiny_model(tmp_path / "draft", "llama", layers=1, seed=1, model=noisy_copy(target, noise=0.1, seed=1),
                    tokenizer=tokenizer)
    (tmp_path / "models.yaml").write_text(f"default: tiny\npresets:\n  tiny:\n    target: {tmp_path / 'target'}\n"
                                          f"    draft: {tmp_path / 'draft'}\n    dtype: float32\n    device: cpu\n")
    showcase = Showcase(load_config(tmp_path / "models.yaml"), PairCache())
    with gr.Blocks() as demo:
        ui = teaching_tab(showcase, tab=False, memory=build())
    [resumed] = [f.fn for f in demo.fns.values() if getattr(f.fn, "__name__", "") == "resumed"]
    c, state = ui.controls, TeachState(showcase)
    page = {component: component.value for component in (c.prompt, c.preset, c.drafter, c.k, c.confidence,
                                                          c.temperature, c.penalty, c.max_new, c.seed)}
    page |= {ui.compare.second: "none", c.context: None}
    long = PROMPT + " " * MAX_PROMPT
    data = {**page, c.prompt: long, c.k: 2, c.max_new: 24, c.temperature: 0.8, c.seed: 3, ui.index: Shown()}
    out = decode(state, ui, data)
    assert out[ui.run].prompt == long and len(out[ui.run].steps) >= 3  # decoded: a lesson of its own
    memory = pressed(ui, "++", {**data, ui.memory: out[ui.memory]})[ui.memory]
    assert long not in memory.values()  # not in the browser's storage
    back = restored(showcase.config, c, memory)
    assert back[c.prompt] == gr.update() and back[c.seed] == 3 and back[c.k] == 2  # the settings come back
    note = restored_note(memory)
    assert note is None or ("back" not in note and "decoding" not in note), note
    again = resumed({**page, ui.index: Shown(), ui.memory: memory})  # the refreshed page: its default prompt shown
    assert ui.run not in again or again[ui.run].prompt == long, again.get(ui.step.status)


def test_a_prompt_typed_after_a_refresh_is_not_said_to_be_the_last_lessons():
    """A refreshed page that decodes nothing says the last lesson's prompt and settings are back and that Next decodes
    it (0442d56); a teacher then typing another prompt still read that line, though Next now decodes the new one. The
    line says the prompt changed, and comes back with the lesson's prompt; a line of another's (a chat message handed
    off) is left as it is."""
    from specui.loading import PairCache
    from specui.ui.session import Showcase
    from specui.ui.teach_memory import build, restored_note
    from specui.ui.teaching import teaching_tab

    with gr.Blocks() as demo:
        ui = teaching_tab(Showcase(ui_config(), PairCache()), tab=False, memory=build())
    c, status = ui.controls, ui.step.status
    [edited] = [f for f in demo.fns.values() if any(t == "input" and i == c.prompt._id for i, t in f.targets)]
    assert {ui.memory, status} <= set(edited.inputs)  # what the page sends it
    saved = {"prompt": "def f(x):\n", "seed": 3}
    note = restored_note(saved, teach=False)
    page = {c.prompt: "a prompt of the teacher's", ui.run: None, c.context: None, ui.memory: saved, status: note}
    typed = edited.fn(page)[status]
    assert typed != gr.update() and "changed" in typed and "are back" not in typed, typed
    assert edited.fn({**page, status: typed, c.prompt: saved["prompt"]})[status] == note  # the lesson's prompt again
    handed = "The Chat tab's last message and settings: press **Decode** to step through it round by round."
    assert edited.fn({**page, status: handed})[status] == gr.update()


def test_a_refreshs_decode_waiting_as_a_message_is_handed_over_changes_nothing(lesson):
    """A page refreshed on the Teach tab decodes its remembered run again, in the engine's queue; a message the Chat
    tab handed over meanwhile (not queued: it lands first) was then buried under the old lesson's round, as Decode's
    was (teaching.decode): the refresh's decode now sends the page's count of hand-offs too, and runs no model."""
    from specui.ui.teach_keys import Shown

    ui, _, page, resumed, demo = lesson
    [resume] = [f for f in demo.fns.values() if f.name == "resumed"]
    assert ui.handed in resume.inputs
    _, memory = _stepped(lesson, "++", k=2, max_new=24, seed=1)
    shown = Shown()
    shown.handed = 1  # the hand-off answered while the refresh's decode waited; the page sent 0
    answer = resumed({**page, ui.memory: memory, ui.index: shown, ui.handed: 0})
    assert ui.run not in answer and ui.memory not in answer and shown.what is None
