"""Greedy speculative decoding emits exactly plain greedy decoding, token for token (float32, CPU)."""

import pytest
import torch

from specui import SpeculativeEngine
from tests.helpers import make_model, noisy_copy, random_prompts

NEW_TOKENS = 20


def hf_greedy(model, prompt, n):
    ids = torch.tensor([prompt])
    out = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=n,
                         min_new_tokens=n, pad_token_id=0)
    return out[0, len(prompt):].tolist()


@pytest.mark.parametrize("arch, num_prompts, ks", [
    ("llama", 6, range(1, 9)),
    ("qwen2", 2, (1, 4, 8)),
    ("gpt2", 2, (1, 4, 8)),
])
def test_greedy_speculative_equals_plain_and_transformers(arch, num_prompts, ks):
    target = make_model(arch, layers=3, seed=0)
    engine = SpeculativeEngine(target, noisy_copy(target, noise=0.35, seed=1))
    paths = {"all rejected": 0, "partly accepted": 0, "all accepted": 0}
    for prompt in random_prompts(num_prompts, vocab_size=96, seed=7):
        plain = engine.generate(prompt, max_new_tokens=NEW_TOKENS, speculative=False)
        assert plain.kinds == ["plain"] * NEW_TOKENS
        assert plain.token_ids == hf_greedy(target, prompt, NEW_TOKENS)
        for k in ks:
            for drafter in ("model", "prompt_lookup"):
                spec = engine.generate(prompt, max_new_tokens=NEW_TOKENS, num_draft_tokens=k, drafter=drafter)
                assert spec.token_ids == plain.token_ids, (arch, prompt, k, drafter)
                for r in spec.rounds:
                    if r.num_drafted:
                        key = ("all rejected" if r.num_accepted == 0 else
                               "all accepted" if r.num_accepted == r.num_drafted else "partly accepted")
                        paths[key] += 1
    assert all(paths.values()), paths  # every cache path was exercised


def test_greedy_with_adaptive_k_and_long_generation(llama_pair):
    target, draft = llama_pair
    engine = SpeculativeEngine(target, draft)
    prompt = [5, 6, 7, 8, 5, 6]
    plain = engine.generate(prompt, max_new_tokens=80, speculative=False).token_ids
    for drafter in ("model", "prompt_lookup"):
        spec = engine.generate(prompt, max_new_tokens=80, num_draft_tokens=3, adaptive=True, drafter=drafter)
        assert spec.token_ids == plain
        assert len({r.num_draft_tokens for r in spec.rounds}) > 1  # K moved


def test_single_token_prompt(llama_pair):
    target, draft = llama_pair
    engine = SpeculativeEngine(target, draft)
    plain = engine.generate([3], max_new_tokens=12, speculative=False).token_ids
    assert engine.generate([3], max_new_tokens=12, num_draft_tokens=4).token_ids == plain
    assert plain == hf_greedy(target, [3], 12)


def test_draft_with_smaller_vocabulary(llama_pair):
    """A draft whose vocabulary is a prefix of the target's (as Qwen2.5 0.5B vs 7B): q is padded with zeros."""
    target, _ = llama_pair
    small = make_model("llama", vocab_size=80, layers=1, seed=4)
    engine = SpeculativeEngine(target, small)
    plain = engine.generate([1, 2, 3], max_new_tokens=20, speculative=False).token_ids
    assert engine.generate([1, 2, 3], max_new_tokens=20, num_draft_tokens=3).token_ids == plain
    sampled = engine.generate([1, 2, 3], max_new_tokens=20, num_draft_tokens=3, temperature=1.0, seed=1)
    assert len(sampled.token_ids) == 20


def test_draft_with_larger_vocabulary_is_refused(llama_pair):
    target, _ = llama_pair
    with pytest.raises(ValueError, match="output layer has 120 rows, the target.s 96"):
        SpeculativeEngine(target, make_model("llama", vocab_size=120, layers=1))
