"""Sliding-window models (issue #12, item 1): greedy output equals transformers' greedy `generate`, or
the run is refused before any work with a message that names the window; never a crash mid-stream.

transformers' sliding-window cache layers cannot roll back once a sequence passes the window, so the
engine refuses runs that would pass it (a cache kept whole would lift that limit; the test allows it)."""

from __future__ import annotations

import pytest
import torch

from specui import SpeculativeEngine
from specui.engine import attention_window
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


def test_the_window_is_read_from_the_config(pair):
    target, _ = pair
    assert attention_window(target) == WINDOW
    assert attention_window(make_model("llama", layers=1)) is None
    assert attention_window(make_model("qwen2", layers=1)) is None  # use_sliding_window=False


@pytest.mark.parametrize("drafter", ["model", "prompt_lookup"])
@pytest.mark.parametrize("k", [1, 4])
def test_within_the_window_output_equals_generate(pair, drafter, k):
    target, draft = pair
    n = WINDOW - len(PROMPT)
    result = SpeculativeEngine(target, draft).generate(PROMPT, max_new_tokens=n, num_draft_tokens=k, drafter=drafter)
    assert result.token_ids == reference(target, n)


@pytest.mark.parametrize("drafter", ["model", "prompt_lookup"])
def test_past_the_window_equal_to_generate_or_refused_up_front(pair, drafter):
    target, draft = pair
    engine = SpeculativeEngine(target, draft)
    calls = []
    hook = target.register_forward_pre_hook(lambda *a: calls.append(1))
    try:
        stream = engine.stream(PROMPT, max_new_tokens=60, num_draft_tokens=4, drafter=drafter)
    except ValueError as e:
        assert "sliding window of 16 tokens" in str(e) and not calls  # refused before any work
        return
    finally:
        hook.remove()
    assert [t for r in stream for t in r.token_ids] == reference(target, 60)


def test_a_sliding_draft_is_checked_too(pair):
    target, draft = pair
    full_target = make_model("qwen2", layers=2, seed=0)
    engine = SpeculativeEngine(full_target, draft)
    try:
        result = engine.generate(PROMPT, max_new_tokens=60, num_draft_tokens=4)
    except ValueError as e:
        assert str(e).startswith("the draft model attends through a sliding window")
    else:
        assert result.token_ids == engine.generate(PROMPT, max_new_tokens=60, speculative=False).token_ids


def test_plain_decoding_past_the_window_is_not_refused(pair):
    target, _ = pair
    result = SpeculativeEngine(target).generate(PROMPT, max_new_tokens=40, speculative=False)
    assert result.token_ids == reference(target, 40)
