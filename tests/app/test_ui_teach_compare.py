"""The Teach tab's second drafter without a server: the side-by-side view shows the comparison's own numbers
and escapes model text, the handlers (Decode, the dropdown, Next) fill and step the view over a real tiny
pair loaded from a models.yaml, and a drafter the preset lacks is explained, not run."""

from __future__ import annotations

from dataclasses import replace

import pytest

from specui import lesson_compare
from specui.ui.teach_compare_view import render_compare
from specui.ui.teach_keys import Shown
from tests.helpers import make_model, noisy_copy, save_tiny_model

PROMPT = "def add(a, b):\n    return a + b\n\ndef add(a, b):\n"
INJECTION = "<img src=x onerror=alert(1)>"


@pytest.fixture(scope="module")
def tab(tmp_path_factory):
    """The Teach tab built in a Blocks over a tiny pair (target + noisy draft) and its handlers' state."""
    import gradio as gr

    from specui.loading import PairCache
    from specui.presets import load_config
    from specui.ui.session import Showcase
    from specui.ui.teaching import TeachState, teaching_tab

    root = tmp_path_factory.mktemp("teach-compare-pair")
    target = make_model("llama", layers=2, seed=0)
    save_tiny_model(root / "target", "llama", layers=2, seed=0, model=target)
    save_tiny_model(root / "draft", "llama", layers=2, seed=1, model=noisy_copy(target, noise=0.1, seed=1))
    (root / "models.yaml").write_text(f"default: tiny\npresets:\n  tiny:\n    target: {root / 'target'}\n"
                                      f"    draft: {root / 'draft'}\n    dtype: float32\n    device: cpu\n")
    showcase = Showcase(load_config(root / "models.yaml"), PairCache())
    with gr.Blocks() as demo:
        ui = teaching_tab(showcase)
    return demo, ui, TeachState(showcase)


def _inputs(ui, *, second: str, temperature: float = 0.8, confidence: float = 0.0, penalty: float = 1.0) -> dict:
    c = ui.controls
    return {c.prompt: PROMPT, c.preset: "tiny", c.drafter: "draft model", c.k: 4, c.confidence: confidence,
            c.temperature: temperature, c.penalty: penalty, c.max_new: 16, c.seed: 3, ui.compare.second: second,
            ui.index: Shown()}


def _decoded(state, ui, **settings) -> tuple:
    """Decode with `settings` (`_inputs`): (its answer, the second drafter's comparison kept beside its rounds)."""
    from specui.ui.teaching import decode

    data = _inputs(ui, **settings)
    out = decode(state, ui, data)
    return out, data[ui.index].beside


def test_the_tab_has_the_second_drafter_and_its_view(tab):
    demo, _, _ = tab
    ids = {c.get("props", {}).get("elem_id") for c in demo.config["components"]}
    assert {"teach-second", "compare-view", "step-view", "sweep-run", "drafters-run", "verify-cost-run"} <= ids


def test_every_state_the_tab_writes_is_read(tab):
    """The comparison was written to a gr.State of its own after it moved beside the rounds (`Shown.beside`), read
    by no event: a Comparison kept per page for nothing. Every State an event of the tab writes, one reads."""
    import gradio as gr

    demo, _, _ = tab
    fns = list(demo.fns.values())
    read = {id(c) for f in fns for c in f.inputs}
    written = {id(c): c for f in fns for c in f.outputs if isinstance(c, gr.State)}
    assert written and not [c for i, c in written.items() if i not in read]


@pytest.mark.parametrize("temperature", [0.0, 0.8])
def test_decode_compares_and_next_steps_both(tab, temperature):
    from specui.ui.teaching import decode, pressed

    _, ui, state = tab
    data = _inputs(ui, second="prompt lookup", temperature=temperature)
    out = decode(state, ui, data)
    run, compared = out[ui.run], data[ui.index].beside
    assert compared.primary == "model" and compared.second == "prompt_lookup" and compared.seed == run.spec.seed
    assert compared.result.token_ids == run.spec.token_ids and len(compared.rounds) == len(run.steps)
    assert 'data-round="1"' in out[ui.compare.view] and 'data-side="second"' in out[ui.compare.view]
    assert out[ui.compare.second]["choices"] == ["none", "draft model + lookup", "prompt lookup"]  # the preset's others
    moved = pressed(ui, "+", {**data, ui.memory: out[ui.memory]})
    assert moved[ui.memory]["round"] == 1  # the round a refresh comes back to
    html = moved[ui.compare.view]
    r = compared.rounds[1]
    assert 'data-round="2"' in html and f"({r.context_tokens} tokens)" in html
    for which in ("primary", "second"):
        step = getattr(r, which)
        assert f'data-side="{which}" data-accepted="{step.num_accepted}" data-drafted="{len(step.drafts)}"' in html
    for d in r.second.drafts:
        assert f'data-token="{d.token_id}" data-q="{d.q!r}" data-p="{d.p!r}"' in html


@pytest.mark.parametrize("temperature", [0.0, 0.8])
def test_a_confidence_stop_drafts_fewer_and_the_step_says_why(tab, temperature):
    """With the Teach tab's confidence stop the engine's rounds draft fewer than K where the draft is unsure, the
    step view's head says so (and only then), and the second drafter is judged on the same rounds with the same
    stop; plain K rounds say nothing of it."""
    from specui.ui.teaching import decode, show_round

    _, ui, state = tab
    out, compared = _decoded(state, ui, second="draft model + lookup", temperature=temperature, confidence=0.9)
    run = out[ui.run]
    assert run.decode.draft_confidence == 0.9 and compared.result.token_ids == run.spec.token_ids
    short = [i for i, step in enumerate(run.steps) if 0 < len(step.drafts) < step.num_draft_tokens]
    assert short, "a confidence stop of 0.9 left every round at K"
    for i, step in enumerate(run.steps):
        html = show_round(ui, run, i, compared)[ui.step.view]
        said = f"drafted {len(step.drafts)} of {step.num_draft_tokens}: the product of the draft" in html
        assert said == (i in short), i
    plain = decode(state, ui, _inputs(ui, second="none", temperature=temperature))[ui.run]
    assert all(len(s.drafts) == s.num_draft_tokens for s in plain.steps[:-1])
    assert "confidence stop" not in "".join(show_round(ui, plain, i, None)
                                            [ui.step.view] for i in range(len(plain.steps)))


@pytest.mark.parametrize("temperature", [0.0, 0.8])
def test_the_repetition_penalty_reaches_the_rounds_and_the_step_says_so(tab, temperature):
    """The Teach tab's penalty decodes as the chat's would (greedy: plain decoding with it, token for token), the
    second drafter is judged under it too, and a step's head names it (greedy or sampled: it moves the argmax too)."""
    from specui.ui.teaching import decode, show_round

    _, ui, state = tab
    out, compared = _decoded(state, ui, second="prompt lookup", temperature=temperature, penalty=1.5)
    run = out[ui.run]
    assert run.decode.repetition_penalty == 1.5 and compared.result.token_ids == run.spec.token_ids
    if temperature == 0:
        unpenalised = decode(state, ui, _inputs(ui, second="none", temperature=0.0))[ui.run]
        assert run.plain.token_ids == run.spec.token_ids != unpenalised.spec.token_ids
    head = show_round(ui, run, 0, compared)[ui.step.view]
    assert "repetition penalty 1.5" in head


def test_the_dropdown_clears_and_explains(tab):
    from specui.ui.teach_compare import run_comparison
    from specui.ui.teaching import decode

    _, ui, state = tab
    run = decode(state, ui, _inputs(ui, second="none"))[ui.run]
    data = {ui.run: run, ui.index: Shown(run, 2), ui.compare.second: "none"}
    compared, cleared = run_comparison(state.showcase, ui, data)
    assert compared is None and "teach-empty" in cleared[ui.compare.view]
    for missing, why in (("EAGLE", "cannot be compared here"), ("draft model", "drafts this run itself")):
        # not in the preset, the primary
        compared, out = run_comparison(state.showcase, ui, {**data, ui.compare.second: missing})
        assert compared is None and out[ui.compare.second]["value"] == "none"
        assert why in out[ui.compare.view] and "prompt lookup" in out[ui.compare.view]
    compared, out = run_comparison(state.showcase, ui, {**data, ui.compare.second: "prompt lookup"})
    assert compared.second == "prompt_lookup" and 'data-round="3"' in out[ui.compare.view]  # the round shown
    compared, nothing = run_comparison(state.showcase, ui, {**data, ui.run: None})
    assert compared is None and "teach-empty" in nothing[ui.compare.view]


def test_the_view_says_what_a_chosen_drafter_waits_for(tab):
    """The view said "Choose a second drafter" whenever it showed no comparison: with one chosen before any Decode,
    at every step after a comparison that could not be made (its reason replaced at the first press), and after a
    Decode whose drafter became the second's (the reason replaced by the round's view)."""
    from specui.ui.teaching import decode, pressed, second_chosen

    _, ui, state = tab
    view = ui.compare.view
    chosen = second_chosen(state, ui, {ui.run: None, ui.index: Shown(), ui.compare.second: "prompt lookup"})
    assert "prompt lookup is chosen: press Decode" in chosen[view] and "Choose" not in chosen[view]
    run = decode(state, ui, _inputs(ui, second="none"))[ui.run]
    shown = Shown(run, 0)
    stepped = pressed(ui, "+", {ui.index: shown, ui.compare.second: "prompt lookup",
                                ui.memory: {}})  # the comparison was refused: its reason was on show
    assert "prompt lookup was not compared with this run" in stepped[view] and "Choose" not in stepped[view]
    none = pressed(ui, "+", {ui.index: shown, ui.compare.second: "none", ui.memory: {}})
    assert "Choose a second drafter" in none[view]
    primary = decode(state, ui, _inputs(ui, second="draft model"))  # the run's own drafter picked as the second
    assert "drafts this run itself" in primary[view] and primary[ui.compare.second]["value"] == "none"


def test_the_list_set_back_to_none_keeps_the_note_of_why_and_runs_nothing(tab):
    """The list follows `change` (its `input` fired as the focus left it, unchanged: a Tab through it ran its answer
    again). A Decode that sets it back to none (the run's own drafter picked) changes it, as a refusal does (back to
    none, so that the drafter picked again tries again): the answer for none keeps the note that says why, runs
    nothing and writes no export."""
    from specui.ui.teaching import compare_refused, decode, second_chosen

    demo, ui, state = tab
    second = ui.compare.second._id
    events = {name for f in demo.fns.values() for target, name in f.targets if target == second}
    assert events == {"change"}, events
    data = _inputs(ui, second="draft model")
    decode(state, ui, data)
    shown = data[ui.index]
    note = shown.beside
    assert "drafts this run itself" in note
    out = second_chosen(state, ui, {ui.run: shown.what, ui.index: shown, ui.compare.second: "none"})
    assert list(out) == [ui.compare.second] and shown.beside is note
    assert compare_refused(ui, "why")[ui.compare.second]["value"] == "none"


def test_next_after_a_run_changes_nothing_and_says_so_as_gradio_reads_it(tab):
    """decode_first returns a dict of components (an empty dict would be read as one value: an error)."""
    from specui.ui.teaching import decode_first

    _, ui, state = tab
    out = decode_first(state, ui, {ui.run: object()})
    assert out and set(out) == {ui.controls.play}


def test_the_view_escapes_model_text_and_clamps_the_round(tab):
    _, ui, state = tab
    _, compared = _decoded(state, ui, second="prompt lookup")
    first = compared.rounds[0]
    bad = replace(first.second, drafts=[replace(d, text=INJECTION) for d in first.primary.drafts],
                  emitted=[replace(e, text=INJECTION) for e in first.second.emitted])
    poisoned = replace(compared, rounds=(replace(first, second=bad), *compared.rounds[1:]))
    html = render_compare(poisoned, 0)
    assert "<img" not in html and "&lt;img" in html
    last = render_compare(compared, 10_000)
    assert f'data-round="{len(compared.rounds)}"' in last and "whole run" in last
    assert "<img" not in render_compare(None, 0, note=INJECTION)


def test_the_tallies_are_the_comparisons():
    from specui import SpeculativeEngine
    from tests.helpers import char_tokenizer

    target = make_model("llama", layers=2, seed=0)
    tokenizer = char_tokenizer()
    compared = lesson_compare.compare(SpeculativeEngine(target, noisy_copy(target, noise=0.1, seed=1)), tokenizer,
                                      tokenizer(PROMPT)["input_ids"], temperature=0.0, max_new_tokens=16, seed=1,
                                      primary="model", second="prompt_lookup")
    html = render_compare(compared, 1)
    for which in ("primary", "second"):
        t = compared.tally(which, upto=2)
        assert f"{t.accepted} / {t.drafted}" in html and "rounds 1–2" in html
    assert "Greedy: no draws" in html


def test_the_export_holds_the_second_drafters_rounds_the_view_shows(tab):
    """The export held the run alone: the second drafter's rounds and tallies beside it were on screen only."""
    import json
    from pathlib import Path

    from specui.ui.teaching import second_chosen

    _, ui, state = tab
    out, compared = _decoded(state, ui, second="prompt lookup")
    second = json.loads(Path(out[ui.step.export]).read_text(encoding="utf-8"))["second_drafter"]
    assert second["second"] == "prompt_lookup" and len(second["rounds"]) == len(out[ui.run].steps)
    r = compared.rounds[1]
    assert second["rounds"][1]["second"]["num_accepted"] == r.second.num_accepted
    assert [d["token_id"] for d in second["rounds"][1]["second"]["drafts"]] == [d.token_id for d in r.second.drafts]
    assert second["tally"]["second"]["accepted"] == compared.tally("second").accepted
    # none picked afterwards: the export holds the run alone again
    after = second_chosen(state, ui, {ui.run: out[ui.run], ui.index: Shown(out[ui.run]), ui.compare.second: "none"})
    assert json.loads(Path(after[ui.step.export]).read_text(encoding="utf-8"))["second_drafter"] is None
