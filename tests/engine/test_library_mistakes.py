"""The library as a notebook uses it, and the mistakes people make there: each one refused by name in one line (or
taken, where it is only another spelling: the app's drafter labels), never an error from deep inside, and a result
that a notebook can show."""

from __future__ import annotations

import logging
from dataclasses import replace

import numpy as np
import pytest
import torch

from specui import DecodeSettings, GenerationResult, PromptLookupDrafter, SpeculativeEngine
from specui.presets import ConfigError
from specui.settings import SettingsError
from tests.helpers import make_model, noisy_copy

PROMPT = [4, 8, 15, 16, 23, 42, 4, 8]


@pytest.fixture(scope="module")
def engine():
    target = make_model("llama", layers=2, seed=3)
    return SpeculativeEngine(target, noisy_copy(target, noise=0.3, seed=4))


@pytest.mark.parametrize("argument, value", [("into", []), ("into", {}), ("draws", [1, 2]), ("cache", {})])
def test_an_advanced_argument_of_another_type_is_refused_by_its_name(engine, argument, value):
    """`into=[]` used to fail with "'list' object has no attribute 'rounds'" from inside the engine."""
    for call in (engine.stream, engine.generate):
        with pytest.raises(ValueError, match=rf"^{argument}= takes .* or None, not a {type(value).__name__}$"):
            call(PROMPT, max_new_tokens=4, **{argument: value})
    assert engine.generate(PROMPT, max_new_tokens=4, into=GenerationResult()).token_ids  # still serving


@pytest.mark.parametrize("said, name", [("prompt lookup", "prompt_lookup"), ("draft model + lookup", "model_lookup"),
                                        ("EAGLE", "eagle"), ("Early exit", "early_exit"), ("Model", "model"),
                                        (" prompt_lookup ", "prompt_lookup")])
def test_the_apps_drafter_labels_are_the_drafters_names(said, name):
    """The app's Drafter radio and its API take "prompt lookup"; the library takes it too, as the name."""
    assert DecodeSettings(drafter=said).drafter == name
    assert DecodeSettings().but(drafter=said).drafter == name


def test_a_run_and_an_engine_take_a_label_for_their_drafter(engine):
    settings = dict(max_new_tokens=12, num_draft_tokens=3, temperature=0.0, ignore_eos=True)
    by_label, by_name = (engine.generate(PROMPT, drafter=d, **settings) for d in ("prompt lookup", "prompt_lookup"))
    assert [r.drafted for r in by_label.rounds] == [r.drafted for r in by_name.rounds]
    assert by_label.token_ids == by_name.token_ids == engine.generate(PROMPT, speculative=False, **settings).token_ids
    made = SpeculativeEngine(engine.target_model, engine.draft_model, drafter="draft model + lookup")
    assert made.default_drafter == "model_lookup"
    with pytest.raises(SettingsError, match="unknown drafter 'prompt lookups'; choose one of model, "):
        engine.generate(PROMPT, drafter="prompt lookups")


def test_a_drafter_class_instead_of_an_instance_is_refused_by_name(engine):
    """It has the Drafter methods (as functions): it used to pass, and fail in start() with a missing argument."""
    with pytest.raises(SettingsError, match=r"^drafter is the class PromptLookupDrafter; give an instance of it"):
        engine.generate(PROMPT, max_new_tokens=4, drafter=PromptLookupDrafter)
    assert engine.generate(PROMPT, max_new_tokens=4, drafter=PromptLookupDrafter()).token_ids


def test_a_results_repr_is_one_short_line(engine):
    """A notebook shows the last expression's repr: a run of 300 tokens printed 270,000 characters of rounds."""
    result = engine.generate(PROMPT, max_new_tokens=300, ignore_eos=True, temperature=0.0)
    shown = repr(result)
    assert len(shown) < 300 and "\n" not in shown, shown
    assert shown.startswith(f"GenerationResult(300 tokens [{result.token_ids[0]}, ") and "..., " in shown
    assert f"{len(result.rounds)} rounds, stop_reason='length'" in shown
    assert repr(GenerationResult()).startswith("GenerationResult(0 tokens [], 0 rounds")


def test_result_text_says_how_to_decode(engine):
    """It said only engine.tokenizer.decode(...), which an engine made of one's own models does not have."""
    result = engine.generate(PROMPT, max_new_tokens=4)
    with pytest.raises(AttributeError, match=r"no text: the engine works on token ids; decode them with the tokenizer "
                                             r"the prompt was made with: tokenizer\.decode\(result\.token_ids, "
                                             r"skip_special_tokens=True\), where an engine from specui\.load_engine "
                                             r"carries it as engine\.tokenizer \(your own models: AutoTokenizer"):
        result.text
    assert not hasattr(result, "text")


def test_text_given_to_an_engine_of_ones_own_models_names_the_tokenizer_to_load(engine, tmp_path):
    """A text prompt was told "engine.tokenizer(text)", which only `load_engine`'s engines have: an engine of one's
    own models is told how to load the target's tokenizer, from the target's own folder where it has one."""
    with pytest.raises(ValueError, match=r"^the prompt is text, .* e\.g\. tokenizer\(text\)\['input_ids'\], or "
                                         r"tokenizer\.apply_chat_template\(.*\(tokenizer = transformers\.AutoTokenizer"
                                         r"\.from_pretrained\(the target's folder or Hub id\), the target's\)$"):
        engine.generate("Write a haiku.", max_new_tokens=4)
    engine.target_model.save_pretrained(tmp_path)
    from transformers import AutoModelForCausalLM

    saved = SpeculativeEngine(AutoModelForCausalLM.from_pretrained(tmp_path))
    with pytest.raises(ValueError, match=rf"from_pretrained\({str(tmp_path)!r}\), the target's\)"):
        saved.generate("Write a haiku.", max_new_tokens=4)


def test_a_misspelled_preset_is_refused_with_the_closest_name():
    from specui import load_engine

    with pytest.raises(ConfigError, match=r"no preset named 'bundeld'; known presets: .*\. Did you mean 'bundled'\?$"):
        load_engine("bundeld", warm_up=False)
    with pytest.raises(ConfigError, match=r"no preset named 'nothing-like-it'; known presets: [^?]*$"):
        load_engine("nothing-like-it", warm_up=False)


def test_a_preset_object_with_a_config_is_refused_by_name():
    """load_engine(preset_obj, config=...) loaded the preset and ignored config, whatever it said."""
    from specui import load_engine
    from specui.presets import load_config

    preset = load_config().get("bundled")
    with pytest.raises(ConfigError, match=r"^load_engine: config= finds a preset by name, and preset is a Preset "
                                          r"already .* give load_engine\(preset\) without config, or the name: "
                                          r"load_engine\('bundled', config=\.\.\.\)$"):
        load_engine(preset, config="elsewhere/models.yaml", warm_up=False)


@pytest.fixture(scope="module")
def bundled():
    from specui import load_engine
    from specui.presets import load_config

    return load_engine(replace(load_config().get("bundled"), drafter_tokens=(("prompt_lookup", 5),)), warm_up=False)


@pytest.mark.slow
def test_a_label_drafts_with_the_presets_k_for_its_drafter(bundled):
    """load_engine's runs take the preset's K for the drafter they name; named by its label, the same K."""
    ids = bundled.tokenizer("def fibonacci(n):\n").input_ids
    for said in ("prompt lookup", "prompt_lookup"):
        run = bundled.generate(ids, drafter=said, max_new_tokens=24, temperature=0.0)
        assert max(r.num_draft_tokens for r in run.rounds) == 5


@pytest.mark.slow
def test_a_run_in_the_middle_of_a_half_consumed_stream_leaves_both_exact(bundled):
    """The engine keeps no per-run state: a generate between two rounds of a stream gives what it gives alone, and
    the stream goes on as if nothing ran; greedy, both equal plain decoding, for every drafter."""
    tok = bundled.tokenizer
    first, second = tok("def fibonacci(n):\n").input_ids, tok("import os\nclass Cache:\n").input_ids
    for drafter in bundled.drafters:
        settings = dict(max_new_tokens=30, drafter=drafter, temperature=0.0, ignore_eos=True)
        plain_first, plain_second = (bundled.generate(ids, **{**settings, "speculative": False}).token_ids
                                     for ids in (first, second))
        streamed, between = [], None
        for i, round_ in enumerate(bundled.stream(first, **settings)):
            streamed += round_.token_ids
            if i == 1:
                between = bundled.generate(second, **settings).token_ids
        assert streamed == plain_first and between == plain_second, drafter


@pytest.mark.slow
@pytest.mark.parametrize("tree_width", ["2", None, [2]])
def test_a_tree_width_of_another_type_is_refused_by_name_in_a_presets_engine(bundled, tree_width):
    """load_engine's engine reads tree_width to choose the preset's draft confidence: "2" raised TypeError there
    ('>' not supported between 'str' and 'int') before the settings could say what is wrong."""
    with pytest.raises(SettingsError, match=r"^tree_width must be an integer from 1 \(no tree\) to 8, got "):
        bundled.generate([1, 2, 3], drafter="eagle", tree_width=tree_width)


def test_a_tree_rounds_repr_leaves_its_nodes_out(engine):
    """A round of a 200-node tree (the bundled EAGLE head's) printed 17,000 characters of nodes; its path and lists
    stay in the repr."""
    result = engine.generate(PROMPT, max_new_tokens=8, num_draft_tokens=6, tree_width=4, tree_nodes=200)
    round_ = max(result.rounds, key=lambda r: len(r.tree or ()))
    assert len(round_.tree) > 50 and len(repr(round_)) < 1000, len(repr(round_))
    assert "tree_path=(" in repr(round_) and "TreeNode" not in repr(round_)


@pytest.mark.parametrize("prompts", [["Write a haiku.", "Another one."], ("Write a haiku.",), [4, 8, "and text"]])
def test_a_list_of_texts_is_refused_as_text(engine, prompts):
    """A newcomer's list of prompts as strings was refused as "token id 'Write a haiku.' is not an integer in
    [0, 96) (the target's vocabulary)", which says nothing of tokenizing."""
    with pytest.raises(ValueError, match=r"^input_ids holds text \('.*'\), and the engine takes token ids of one "
                                         r"prompt: tokenize it first, e\.g\. tokenizer\(text\)\['input_ids'\] "
                                         r"\(tokenizer = transformers\.AutoTokenizer"):
        engine.generate(prompts, max_new_tokens=4)


def test_max_new_tokens_given_in_the_place_of_settings_is_refused_with_the_keyword(engine):
    """engine.generate(ids, 64) said "settings must be a DecodeSettings, not a int"."""
    with pytest.raises(SettingsError, match=r"^settings \(the argument after the prompt\) must be a DecodeSettings, "
                                            r"got 64 \(int\); give them as keywords, e\.g\. engine\.generate\(ids, "
                                            r"max_new_tokens=64\)$"):
        engine.generate(PROMPT, 64)


@pytest.mark.parametrize("prompt", [[{"role": "user", "content": "Write a haiku."}],
                                    {"role": "user", "content": "Write a haiku."},
                                    [[{"role": "user", "content": "Write a haiku."}]]])
def test_chat_messages_are_refused_with_the_chat_templates_call(engine, prompt):
    """A chat as messages was refused as "token id {'role': 'user', ...} is not an integer in [0, 49152) (the target's
    vocabulary)", and one message as "input_ids holds text ('role')": neither says to apply the chat template."""
    with pytest.raises(ValueError, match=r"^the prompt is chat messages \(\{.*'role': 'user'\}\), and the engine takes "
                                         r"token ids: put them through the chat template first, e\.g\. tokenizer\."
                                         r"apply_chat_template\(messages, add_generation_prompt=True\) \(tokenizer = "):
        engine.generate(prompt, max_new_tokens=4)
    with pytest.raises(ValueError, match=r"^input_ids is a dict with no 'input_ids' \(\{'ids': \[4, 8\]\}\): give "):
        engine.generate({"ids": [4, 8]}, max_new_tokens=4)


def test_what_the_tokenizer_returns_put_in_a_list_is_not_said_to_lack_input_ids(engine):
    """[tokenizer(text)] (a batch of one, as a [1, n] tensor is) was refused as "input_ids holds a BatchEncoding with
    no 'input_ids'", of one that holds them; a 0-d array of text (np.array(text)) as "a single number"."""
    with pytest.raises(ValueError, match=r"^input_ids holds a dict among its token ids \(\{'input_ids': \[4, 8\]\}\): "
                                         r"give the prompt's token ids \(a list of ints, a 1-D tensor\), or what the "
                                         r"tokenizer returns as it is$"):
        engine.generate([{"input_ids": [4, 8]}], max_new_tokens=4)
    with pytest.raises(ValueError, match=r"^input_ids holds text \('Write a haiku\.'\), and the engine takes token "):
        engine.generate(np.array("Write a haiku."), max_new_tokens=4)


def test_what_the_tokenizer_returns_is_taken_as_transformers_generate_takes_it_and_unpadded(engine):
    """engine.generate(**enc), as transformers' model.generate(**inputs) is called, was refused as "no setting named
    'attention_mask'"; and a padded prompt's mask (zeros) was passed over: its padding read as the prompt's tokens."""
    enc = {"input_ids": torch.tensor([PROMPT]), "attention_mask": torch.ones(1, len(PROMPT), dtype=torch.long)}
    want = engine.generate(PROMPT, max_new_tokens=6).token_ids
    assert engine.generate(**enc, max_new_tokens=6).token_ids == want
    assert engine.generate(enc, max_new_tokens=6).token_ids == want  # given whole, as before
    assert [t for r in engine.stream(**enc, max_new_tokens=6) for t in r.token_ids] == want
    padded = {"input_ids": [0, 0, *PROMPT], "attention_mask": [0, 0] + [1] * len(PROMPT)}
    for call in (engine.generate, engine.stream):
        for given in ((padded,), ()):
            with pytest.raises(ValueError, match=r"^attention_mask is \[0, 0, 1, .*\], not all ones: it pads the "
                                                 r"prompt, and the engine would read the padding as prompt tokens; "
                                                 r"tokenize the one prompt without padding$"):
                call(*given, max_new_tokens=6, **({} if given else padded))


@pytest.mark.parametrize("number", [torch.tensor(5), np.int64(5), np.array(5)])
def test_a_single_number_is_refused_as_a_plain_int_is(engine, number):
    """torch.tensor(5) or np.int64(5) (ids[0][0] where ids[0] was meant) ran as the one-token prompt [5], where 5
    itself is refused."""
    with pytest.raises(ValueError, match=r"^input_ids is a single number \((Tensor|int64|ndarray) of shape \(\)\): "
                                         r"give the prompt's token ids as a 1-D sequence, e\.g\. \[id\] for one token"):
        engine.generate(number, max_new_tokens=4)
    assert engine.generate(torch.tensor([5]), max_new_tokens=4).token_ids  # one token as a 1-D tensor


@pytest.mark.parametrize("eos", ["</s>", 2.0, [2, "</s>"], True, {"eos": 2}])
def test_an_eos_token_id_that_is_no_id_is_refused_by_name(engine, eos):
    """eos_token_id="</s>" (the token's text, tokenizer.eos_token) failed with "invalid literal for int() with base 10:
    '<'" from inside the engine's __init__ (its characters read as ids); 2.0 with "'float' object is not iterable"."""
    with pytest.raises(ValueError, match=r"^eos_token_id takes a token id or a list of them \(ints, e\.g\. tokenizer\."
                                         r"eos_token_id\) or None \(the target's generation config's\), not "):
        SpeculativeEngine(engine.target_model, eos_token_id=eos)
    for given, ids in ((7, {7}), ([7, np.int64(9)], {7, 9}), (torch.tensor([7]), {7}), (None, engine.eos_token_ids)):
        assert SpeculativeEngine(engine.target_model, eos_token_id=given).eos_token_ids == ids


def test_a_targets_own_eos_that_is_no_id_is_refused_where_it_is_written(engine, monkeypatch):
    """The target's own eos_token_id ("</s>" in its generation_config.json; transformers checks config.json's type,
    not this one's) was refused as "eos_token_id takes ..., not None": None is what the caller gave, and right."""
    monkeypatch.setattr(engine.target_model.generation_config, "eos_token_id", "</s>")
    with pytest.raises(ValueError, match=r"^the target's generation_config\.eos_token_id is '</s>', which is no "
                                         r"token id: give the engine eos_token_id= \(an int or a list of them, e\.g\. "
                                         r"tokenizer\.eos_token_id\)$"):
        SpeculativeEngine(engine.target_model)
    assert SpeculativeEngine(engine.target_model, eos_token_id=7).eos_token_ids == {7}  # given, it is the one taken


@pytest.mark.parametrize("eos", [96, 10**6, -1, [7, 96]])
def test_an_eos_token_id_outside_the_vocabulary_is_refused_by_name(engine, eos):
    """eos_token_id=96 of a 96-token target (or -1, or a list with one such id) was taken silently: the run could
    never stop at it, and no one said why it ran to max_new_tokens."""
    with pytest.raises(ValueError, match=r"^eos_token_id=.* is outside the target's vocabulary \(token ids 0 to 95\)"
                                         r": give an id of its tokenizer \(e\.g\. tokenizer\.eos_token_id\) or None "
                                         r"\(the target's generation config's\)$"):
        SpeculativeEngine(engine.target_model, eos_token_id=eos)
    assert SpeculativeEngine(engine.target_model, eos_token_id=[0, 95]).eos_token_ids == {0, 95}  # the ends: ids


@pytest.mark.parametrize("where", ["generation_config", "config"])
def test_a_targets_own_eos_outside_its_vocabulary_is_left_out_in_one_warning(engine, monkeypatch, caplog, where):
    """A checkpoint whose own eos_token_id holds an id past its output rows (real generation_config.json files have
    such quirks: another tokenizer's id) loads, where 2a166a7 refused it and so the whole model: no run can sample
    that id, so leaving it out is exact. One warning names the id, the vocabulary's size and where it is written;
    the ids in range still end a run (greedy: plain decoding's tokens, cut at the first), an id given is refused."""
    target = engine.target_model
    monkeypatch.setattr(target.generation_config, "eos_token_id", None)
    free = engine.generate(PROMPT, max_new_tokens=24, speculative=False).token_ids  # the fixture's engine ends on none
    eos = free[5]
    for written, ends in (([eos, 151645], {eos}), (151645, set()), ([-1, 96], set())):
        monkeypatch.setattr(getattr(target, where), "eos_token_id", written)
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="specui.engine_checks"):
            built = SpeculativeEngine(target, engine.draft_model)
        assert built.eos_token_ids == ends, written
        [record] = [r for r in caplog.records if r.name == "specui.engine_checks"]
        assert record.levelno == logging.WARNING and f"the target's {where}.eos_token_id is {written}" in \
            record.getMessage() and "its vocabulary of 96 tokens (ids 0 to 95)" in record.getMessage(), record
        for arm in (dict(speculative=False), dict(drafter="model"), dict(drafter="model", tree_width=2)):
            result = built.generate(PROMPT, max_new_tokens=24, **arm)
            assert result.token_ids == (free[:free.index(eos) + 1] if ends else free), (written, arm)
    assert caplog.messages[-1] == (f"specui: the target's {where}.eos_token_id is [-1, 96], and -1, 96 are outside "
                                   "its vocabulary of 96 tokens (ids 0 to 95): no run can sample them, so they are "
                                   "left out (no token ends a run: give the engine eos_token_id= to end at one)")
    monkeypatch.setattr(getattr(target, where), "eos_token_id", [2, 151645])
    with caplog.at_level(logging.WARNING, logger="specui.engine_checks"):
        SpeculativeEngine(target)
    assert caplog.messages[-1] == (f"specui: the target's {where}.eos_token_id is [2, 151645], and 151645 is outside "
                                   "its vocabulary of 96 tokens (ids 0 to 95): no run can sample it, so it is left "
                                   "out (a run ends at 2)")
    with pytest.raises(ValueError, match=r"^eos_token_id=151645 is outside the target's vocabulary"):
        SpeculativeEngine(target, eos_token_id=151645)  # given by the caller: refused, as ever


def test_load_engine_takes_the_device_and_refuses_one_by_name():
    """load_engine(device="cuda"), what a GPU user tries first, failed with Python's "unexpected keyword argument
    'device'"; a misspelt device is refused before any load, and a preset spread by device_map is not moved."""
    from specui import load_engine

    with pytest.raises(ConfigError, match=r"^load_engine: device='cdua' is not a device \(cpu, cuda, cuda:1, mps\)$"):
        load_engine("bundled", device="cdua", warm_up=False)
    with pytest.raises(ConfigError, match=r"^load_engine: preset 'qwen2\.5-72b-offload' spreads its target with "
                                          r"device_map: auto, which device= would not move; leave device out$"):
        load_engine("qwen2.5-72b-offload", device="cpu", warm_up=False)
    engine = load_engine("bundled", device=torch.device("cpu"), warm_up=False)
    assert engine.preset.device == "cpu" and engine.device.type == "cpu" and engine.draft_model.device.type == "cpu"


def test_a_draft_padded_past_the_targets_vocabulary_is_told_to_cut_its_rows():
    """`SpeculativeEngine(target, draft)` with a draft of the target's tokenizer whose matrices are padded (as
    checkpoints pad to a multiple of 64 or 128) was told it "needs a draft that shares the target's tokenizer", which
    it does: it is told how many rows each has and the call that cuts them, and the draft cut so drafts exactly."""
    target = make_model("llama", layers=2, seed=3)
    draft = noisy_copy(target, noise=0.1, seed=4)
    draft.resize_token_embeddings(128, mean_resizing=False)
    with pytest.raises(ValueError, match=r"^The draft model's output layer has 128 rows, the target's 96: the draft "
                                         r"could propose ids 96 to 127, which the target has no row for\. If the draft "
                                         r"shares the target's tokenizer .* cut them first: draft_model\."
                                         r"resize_token_embeddings\(96\) .*a draft of another tokenizer cannot draft"):
        SpeculativeEngine(target, draft)
    draft.resize_token_embeddings(96)
    engine = SpeculativeEngine(target, draft)
    plain = engine.generate(PROMPT, max_new_tokens=16, speculative=False).token_ids
    assert engine.generate(PROMPT, max_new_tokens=16, drafter="model", num_draft_tokens=3).token_ids == plain
