"""A workstation user's own pair whose checkpoints have quirks real ones have: a model class that names no output layer
(remote code, as ChatGLM's), a target whose own eos ids run past its vocabulary. Each is refused in one line that
names the model, or said once as the pair loads. Tiny random models saved with a character tokenizer
(tests/helpers.py), loaded through `load_engine` as a user's script would, without the warm-up."""

from __future__ import annotations

import json
import logging

import pytest

from specui.load_checks import LoadError
from specui.loading import load_engine
from tests.helpers import make_model, noisy_copy, save_tiny_model

NO_OUTPUT_LAYER = '''
from transformers import LlamaForCausalLM


class NamelessHead(LlamaForCausalLM):
    """A decoder whose code names no output layer: transformers' get_output_embeddings() is None for it."""

    def get_output_embeddings(self):
        return None
'''


def _engine(**preset):
    config = {"presets": {"own": {"target": "t", **preset}}}
    return load_engine("own", config=config, warm_up=False)


def _nameless(folder):
    """A tiny Llama folder loaded through remote code (trust_remote_code) whose class names no output layer."""
    save_tiny_model(folder, "llama", layers=1, seed=0)
    (folder / "nameless.py").write_text(NO_OUTPUT_LAYER)
    config = json.loads((folder / "config.json").read_text())
    config["auto_map"] = {"AutoModelForCausalLM": "nameless.NamelessHead"}
    (folder / "config.json").write_text(json.dumps(config))


@pytest.mark.parametrize("role", ["target", "draft"])
def test_a_model_that_names_no_output_layer_is_refused_naming_it(tmp_path, monkeypatch, role):
    """A draft whose class names no output layer failed as the load cut a padded draft to the target's rows
    ('NoneType' object has no attribute 'weight', a traceback); such a target loaded and failed as its engine was
    built. Each is refused as it loads, in one line naming the model and its class."""
    monkeypatch.chdir(tmp_path)
    save_tiny_model(tmp_path / "t", "llama", layers=1, seed=0)
    save_tiny_model(tmp_path / "d", "llama", layers=1, seed=1)
    _nameless(tmp_path / ("t" if role == "target" else "d"))
    with pytest.raises(LoadError) as refused:
        _engine(draft="d", trust_remote_code=True)
    said = str(refused.value)
    assert f"Preset 'own': the {role} " in said and "(NamelessHead) names no output layer" in said, said
    assert "get_output_embeddings() returns None" in said and "\n" not in said


def test_a_targets_eos_outside_its_vocabulary_is_said_once_however_many_engines_are_built(tmp_path, monkeypatch,
                                                                                         caplog):
    """generation_config.eos_token_id [2, 151645] on a 96-token target: the warning that 151645 is left out was said
    again by every engine built on the loaded pair (each Teach experiment builds one); it is said once, as the target
    loads, and each engine still ends its runs at 2 alone."""
    from specui import SpeculativeEngine

    monkeypatch.chdir(tmp_path)
    target = make_model("llama", layers=1, seed=0)
    target.generation_config.eos_token_id = [2, 151645]
    save_tiny_model(tmp_path / "t", "llama", layers=1, seed=0, model=target)
    save_tiny_model(tmp_path / "d", "llama", layers=1, seed=0, model=noisy_copy(target, noise=0.05, seed=1))
    with caplog.at_level(logging.WARNING, logger="specui.engine_checks"):
        engine = _engine(draft="d")
        built = [SpeculativeEngine(engine.target_model, engine.draft_model) for _ in range(3)]
    said = [r.getMessage() for r in caplog.records if r.name == "specui.engine_checks"]
    assert len(said) == 1 and "151645 is outside its vocabulary of 96 tokens" in said[0], said
    assert all(e.eos_token_ids == {2} for e in (engine, *built))  # runs end at 2 (test_library_mistakes)


def test_a_target_none_of_whose_eos_ids_is_in_its_vocabulary_still_generates_through_transformers(tmp_path,
                                                                                                 monkeypatch, caplog):
    """generation_config.eos_token_id [151645] on a 96-token target: none is left, which the load wrote as [] in its
    generation_config, and transformers' own generate on the loaded target then failed (IndexError: its pad token is
    the first eos id) where it ran before the load touched it. Now None, in every config the engine reads: said once,
    runs end at no token as before (not at the config's 2, which the generation config's ids stood before), and
    transformers' generate gives the engine's plain greedy tokens."""
    import torch

    from specui import SpeculativeEngine

    monkeypatch.chdir(tmp_path)
    target = make_model("llama", layers=1, seed=0)
    target.generation_config.eos_token_id = [151645]
    target.config.eos_token_id = 2  # in range, but the engine reads the generation config's: no run ends at it
    save_tiny_model(tmp_path / "t", "llama", layers=1, seed=0, model=target)
    with caplog.at_level(logging.WARNING, logger="specui.engine_checks"):
        engine = _engine(drafter="prompt_lookup")
        again = SpeculativeEngine(engine.target_model)
    said = [r.getMessage() for r in caplog.records if r.name == "specui.engine_checks"]
    assert len(said) == 1 and "no token ends a run" in said[0], said
    assert engine.eos_token_ids == again.eos_token_ids == frozenset()
    prompt = [5, 6, 7]
    out = engine.target_model.generate(torch.tensor([prompt]), max_new_tokens=4, do_sample=False)
    plain = engine.generate(prompt, max_new_tokens=4, speculative=False).token_ids
    assert out[0, len(prompt):].tolist() == plain


@pytest.mark.parametrize("role", ["target", "draft"])
def test_a_qwen2_folder_saved_without_its_tokenizer_is_refused_as_one(tmp_path, monkeypatch, role):
    """A Qwen2 (or GPT-2) folder saved without its tokenizer (model.save_pretrained alone): transformers 5 reads it
    as an empty tokenizer of one token, where it failed for a Llama folder (which the load refuses as having no
    tokenizer): such a target loaded, and its first reply failed with a traceback ('the prompt is empty'), and such a
    draft was refused as of another tokenizer ('the draft's has 1 tokens'). Both say the folder has no tokenizer."""
    monkeypatch.chdir(tmp_path)
    save_tiny_model(tmp_path / "t", "qwen2", layers=1, seed=0)
    save_tiny_model(tmp_path / "d", "qwen2", layers=1, seed=1)
    bare = tmp_path / ("t" if role == "target" else "d")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (bare / name).unlink()
    with pytest.raises(LoadError) as refused:
        _engine(draft="d")
    said = str(refused.value)
    assert said.startswith(f"Preset 'own': the {role} ") and f"the folder {bare} has no tokenizer" in said, said
    assert "save_pretrained" in said and "\n" not in said
