"""The bundled pair in assets/: loads offline like a hub model, shares one tokenizer, and speculates exactly.

These run on every machine (no network, no GPU) in a few seconds: the pair is small on purpose.
"""

import os
from pathlib import Path

import pytest
import torch

from specui import corpus

from tests.helpers import ROOT

ASSETS = ROOT / "assets"
TARGET = ASSETS / "specui-target"
DRAFT = ASSETS / "specui-draft"
CODE = 'class Point:\n    """A point."""\n\n    def __init__(self, x, y=0):\n\tself.x = x  # tab\n        return f"{x!r}\\n"\n\n\n'


@pytest.fixture(scope="module")
def pair():
    """Target, draft and tokenizer, loaded offline through the ordinary from_pretrained path."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(TARGET)
    target = AutoModelForCausalLM.from_pretrained(TARGET, dtype=torch.float32).eval()
    draft = AutoModelForCausalLM.from_pretrained(DRAFT, dtype=torch.float32).eval()
    return target, draft, tokenizer


def test_folders_are_complete_and_small():
    total = 0
    for folder in (TARGET, DRAFT):
        names = {p.name for p in folder.iterdir()}
        assert {"config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json", "README.md"} <= names
        assert any(n.endswith(".safetensors") for n in names)
        for path in folder.iterdir():
            assert path.stat().st_size < 10_000_000, f"{path} is 10 MB or more"
            total += path.stat().st_size
    assert total <= 24 * 2**20, f"the pair takes {total / 2**20:.1f} MiB, more than 24 MiB"


def test_weights_are_stored_in_half_precision():
    from safetensors import safe_open

    for folder in (TARGET, DRAFT):
        for shard in folder.glob("*.safetensors"):
            with safe_open(shard, framework="pt") as f:
                assert all(f.get_slice(k).get_dtype() == "F16" for k in f.keys()), shard


def test_pair_loads_offline_as_causal_lms(pair):
    target, draft, tokenizer = pair
    assert target.config.num_hidden_layers > draft.config.num_hidden_layers
    eos = tokenizer.eos_token_id
    assert tokenizer.convert_ids_to_tokens(eos) == "<|endoftext|>"
    for model in (target, draft):
        assert model.config.eos_token_id == eos and model.generation_config.eos_token_id == eos
        assert model.config.bos_token_id == eos and model.generation_config.bos_token_id == eos


def test_default_load_is_float32_for_cpus():
    from transformers import AutoModelForCausalLM

    assert AutoModelForCausalLM.from_pretrained(DRAFT).dtype == torch.float32  # stored in fp16, computed in fp32


def test_draft_and_target_share_the_vocabulary(pair):
    from transformers import AutoTokenizer

    target, draft, tokenizer = pair
    draft_tokenizer = AutoTokenizer.from_pretrained(DRAFT)
    assert draft_tokenizer.get_vocab() == tokenizer.get_vocab()
    assert target.config.vocab_size == draft.config.vocab_size == len(tokenizer)
    assert (TARGET / "tokenizer.json").read_bytes() == (DRAFT / "tokenizer.json").read_bytes()


def test_tokenizer_round_trips_code(pair):
    _, _, tokenizer = pair
    _, held_out = corpus.split_sources()
    samples = [CODE, "\u00e9t\u00e9 = '\u2603 \U0001f40d'\r\n", *corpus.read_texts(held_out[:: max(1, len(held_out) // 20)])]
    for text in samples:
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        assert tokenizer.decode(ids) == text
    assert len(tokenizer(CODE, add_special_tokens=False)["input_ids"]) < len(CODE.encode()) / 2  # BPE merges


def test_corpus_split_keeps_tests_out_of_training():
    train, held_out = corpus.split_sources()
    assert train and held_out
    assert train == sorted(train, key=lambda p: p.as_posix())
    assert not any(corpus.is_held_out(p) for p in train)
    assert all(any(corpus.is_test_dir(d) for d in p.parts[:-1]) for p in held_out)
    assert not any("site-packages" in p.parts for p in train + held_out)
    assert Path("json/__init__.py") in train and Path("test/test_json/test_decode.py") in held_out
    assert corpus.is_held_out(Path("idlelib/idle_test/test_run.py"))


def held_out_prompts(tokenizer, count: int, length: int = 64) -> list[list[int]]:
    _, held_out = corpus.split_sources()
    texts = corpus.read_texts(held_out[7 :: max(1, len(held_out) // count)])[:count]
    return [tokenizer(t, add_special_tokens=False)["input_ids"][:length] for t in texts]


def test_greedy_speculative_output_equals_plain_output(pair):
    from specui import SpeculativeEngine

    target, draft, tokenizer = pair
    engine = SpeculativeEngine(target, draft)
    for prompt, k in zip(held_out_prompts(tokenizer, 3), (1, 4, 7)):
        settings = dict(max_new_tokens=32, temperature=0.0, seed=0, ignore_eos=True)
        plain = engine.generate(prompt, speculative=False, **settings)
        speculative = engine.generate(prompt, speculative=True, num_draft_tokens=k, **settings)
        assert speculative.token_ids == plain.token_ids
        assert "accepted" in speculative.kinds  # the draft really predicts the target


def test_plain_engine_output_equals_transformers_greedy(pair):
    from specui import SpeculativeEngine

    target, _, tokenizer = pair
    prompt = held_out_prompts(tokenizer, 1)[0]
    plain = SpeculativeEngine(target).generate(prompt, max_new_tokens=16, temperature=0.0, speculative=False, ignore_eos=True)
    with torch.inference_mode():
        ids = torch.tensor([prompt])
        for _ in range(16):
            ids = torch.cat([ids, target(input_ids=ids).logits[:, -1:].argmax(-1)], dim=1)
    assert plain.token_ids == ids[0, len(prompt) :].tolist()


def test_the_preset_keeps_the_draft_to_its_vocabulary_and_stays_exact():
    """assets/specui-draft/specui_vocabulary.json: through the preset, the draft proposes from those ids only."""
    import json

    from specui import load_engine

    ids = json.loads((DRAFT / "specui_vocabulary.json").read_text())["token_ids"]
    engine = load_engine("bundled")
    assert engine.draft_model.token_ids.tolist() == ids and engine.draft_model.lm_head.out_features == len(ids)
    allowed = set(ids)
    for prompt in held_out_prompts(engine.tokenizer, 2):
        settings = dict(max_new_tokens=48, temperature=0.0, seed=0, ignore_eos=True)
        plain = engine.generate(prompt, speculative=False, **settings)
        speculative = engine.generate(prompt, num_draft_tokens=7, **settings)
        assert speculative.token_ids == plain.token_ids
        assert all(t in allowed for r in speculative.rounds for t in r.drafted)
        assert speculative.acceptance_rate > 0.2  # still a working draft


def test_load_engine_drafts_as_its_preset_says_when_a_run_names_no_drafter():
    """load_engine's engine takes the preset's `drafter:` as its default (the chat preset: EAGLE); a run that
    names a drafter still gets that one, and a bad default name is refused when the engine is made."""
    from dataclasses import replace

    from specui import SpeculativeEngine, load_engine
    from specui.presets import load_config

    bundled = load_config().get("bundled")
    engine = load_engine(replace(bundled, drafter="eagle"))
    assert engine.default_drafter == "eagle" and load_engine(bundled).default_drafter == "model"
    prompt = held_out_prompts(engine.tokenizer, 1)[0]
    settings = {"max_new_tokens": 24, "temperature": 0.0, "seed": 0, "ignore_eos": True, "num_draft_tokens": 3}
    default, eagle, model = (engine.generate(prompt, **settings, **extra)
                             for extra in ({}, {"drafter": "eagle"}, {"drafter": "model"}))

    def q(run):  # each drafter reports its own q
        return [r.draft_probs for r in run.rounds]

    assert q(default) == q(eagle) != q(model)
    assert default.token_ids == eagle.token_ids == model.token_ids  # greedy: the target's tokens either way
    with pytest.raises(ValueError, match="drafter must be one of"):
        SpeculativeEngine(engine.target_model, drafter="hydra")


def test_load_engine_runs_from_keywords_draft_with_the_presets_k_and_confidence():
    """A run built from keywords takes the preset's K and draft confidence for its drafter (as the app does) unless
    it names them; a DecodeSettings given whole is taken as it is. (Before stop 87 such runs drafted at the
    DecodeSettings defaults, K 4 without a confidence stop: the chat preset's EAGLE 123 tokens/s against 135.)"""
    from dataclasses import replace

    from specui import DecodeSettings, load_engine
    from specui.presets import load_config

    preset = replace(load_config().get("bundled"), num_draft_tokens=3, drafter_tokens=(("eagle", 5),),
                     draft_confidence=(("eagle", 0.5),))
    engine = load_engine(preset)
    prompt = held_out_prompts(engine.tokenizer, 1)[0]
    base = {"max_new_tokens": 40, "temperature": 0.0, "seed": 0, "ignore_eos": True}

    def asked(run):
        return max(r.num_draft_tokens for r in run.rounds)

    model, eagle = engine.generate(prompt, **base), engine.generate(prompt, drafter="eagle", **base)
    assert asked(model) == 3 and asked(eagle) == 5
    assert any(r.num_drafted < r.num_draft_tokens for r in eagle.rounds[:-1])  # the confidence stop cut chains short
    assert asked(engine.generate(prompt, drafter="eagle", num_draft_tokens=2, **base)) == 2
    assert asked(engine.generate(prompt, DecodeSettings(drafter="eagle", **base))) == DecodeSettings().num_draft_tokens
    assert model.token_ids == eagle.token_ids == engine.generate(prompt, speculative=False, **base).token_ids
    tree = engine.generate(prompt, drafter="eagle", tree_width=2, tree_nodes=6, **base)  # a tree: no floor unless named
    assert tree.token_ids == model.token_ids and engine.tuning("eagle", {"tree_width": 2})["draft_confidence"] == 0


def test_load_engine_takes_a_models_yaml_as_a_dict_and_names_a_wrong_config(monkeypatch):
    """config= as a dict reads its local paths from the working directory; a config of another type is one line."""
    import yaml

    from specui import load_engine
    from specui.presets import DEFAULT_CONFIG, ConfigError

    monkeypatch.chdir(DEFAULT_CONFIG.parent)  # models.yaml's own folder: its relative paths mean the same
    engine = load_engine("bundled", config=yaml.safe_load(DEFAULT_CONFIG.read_text()))
    assert engine.preset.name == "bundled" and "model" in engine.drafters
    with pytest.raises(ConfigError, match="config must be a models.yaml path, a Config or a dict, not a int"):
        load_engine("bundled", config=42)


def test_load_engine_warms_both_paths_up_unless_told_not_to(monkeypatch):
    """As the app does at start: a first run would otherwise time the forward's preparation as its prompt."""
    from specui import lesson, load_engine

    calls = []
    real = lesson.warm_up
    monkeypatch.setattr(lesson, "warm_up", lambda engine, ids, **kw: calls.append(list(ids)) or real(engine, ids, **kw))
    engine = load_engine("bundled")
    assert len(calls) == 1 and calls[0] == engine.tokenizer("Hello!")["input_ids"]
    load_engine("bundled", warm_up=False)
    assert len(calls) == 1
