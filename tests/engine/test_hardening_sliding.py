"""Sliding-window models (issue #12, item 1): greedy output equals transformers' greedy `generate`, also
far past the window; never a crash mid-stream.

transformers' sliding-window cache layers drop old keys and cannot roll back; the engine gives such a
model a plain `DynamicCache`, which keeps every key (and can crop), while the model's attention mask
still applies the window from its config."""

from __future__ import annotations

import pytest
import torch

from specui import SpeculativeEngine
from tests.helpers import make_model, noisy_copy

WINDOW = 16
PROMPT = [4, 8, 15, 16, 23, 42]


def sliding_model(arch: str, *, seed: int):
    from transformers import AutoModelForCausalLM, MistralConfig, Qwen2Config

    common = dict(vocab_size=96, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, sliding_window=WINDOW, initializer_range=0.3, bos_token_id=None,
                  eos_token_id=None, pad_token_id=None)
    config = (MistralConfig(**common) if arch == "mistral"
              else Qwen2Config(**common, use_sliding_window=True, max_window_layers=0))
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config).eval()
    model.generation_config.eos_token_id = model.generation_config.pad_token_id = None
    return model


@pytest.fixture(scope="module", params=["mistral", "qwen2"])
def pair(request):
    target = sliding_model(request.param, seed=0)
    return target, noisy_copy(target, noise=0.3, seed=1)


def reference(model, n):
    out = model.generate(torch.tensor([PROMPT]), max_new_tokens=n, do_sample=False)
    return out[0, len(PROMPT):].tolist()


@pytest.mark.parametrize("drafter", ["model", "prompt_lookup"])
@pytest.mark.parametrize("k", [1, 4])
def test_within_the_window_output_equals_generate(pair, drafter, k):
    target, draft = pair
    n = WINDOW - len(PROMPT)
    result = SpeculativeEngine(target, draft).generate(PROMPT, max_new_tokens=n, num_draft_tokens=k, drafter=drafter)
    assert result.token_ids == reference(target, n)


@pytest.mark.parametrize("drafter", ["model", "prompt_lookup"])
@pytest.mark.parametrize("k", [1, 4, 8])
def test_past_the_window_output_equals_generate(pair, drafter, k):
    target, draft = pair
    result = SpeculativeEngine(target, draft).generate(PROMPT, max_new_tokens=60, num_draft_tokens=k, drafter=drafter)
    assert result.token_ids == reference(target, 60)
    assert any(r.num_accepted < r.num_drafted for r in result.rounds)  # rollbacks happened past the window


def test_a_sliding_draft_under_a_full_target():
    target = make_model("llama", vocab_size=96, layers=2, seed=0)
    draft = sliding_model("mistral", seed=5)
    engine = SpeculativeEngine(target, draft)
    result = engine.generate(PROMPT, max_new_tokens=60, num_draft_tokens=4)
    assert result.token_ids == engine.generate(PROMPT, max_new_tokens=60, speculative=False).token_ids


def test_plain_decoding_past_the_window_is_not_refused(pair):
    target, _ = pair
    result = SpeculativeEngine(target).generate(PROMPT, max_new_tokens=40, speculative=False)
    assert result.token_ids == reference(target, 40)
