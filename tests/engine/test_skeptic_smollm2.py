"""A skeptic's checks on the default preset, SmolLM2-135M-Instruct from the wheel (int8 drafters, its own K and
draft confidence): every drafter it offers, and EAGLE's and the draft model's trees, write transformers' greedy
`generate` of the target token for token, also when sampling keeps only the top token (top-k 1) and with adaptive K
and a repetition penalty; and a conversation's second turn on a kept `PromptCache` writes what a fresh run does.
Short runs: the model is real and the machine small."""

from __future__ import annotations

import pytest
import torch

from specui import load_engine
from specui.prompt_cache import PromptCache
from tests.engine.test_library_docs import needs_wheel

NEW_TOKENS = 16


@pytest.fixture(scope="module")
def engine():
    return load_engine()


def hf_greedy(model, prompt: list[int], n: int, penalty: float) -> list[int]:
    """transformers' greedy continuation, up to its EOS (as the engine stops there)."""
    ids = torch.tensor([prompt])
    out = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=n,
                         repetition_penalty=penalty)[0, len(prompt):].tolist()
    eos = model.generation_config.eos_token_id
    eos = set(eos if isinstance(eos, list) else [eos])
    return next((out[:i + 1] for i, t in enumerate(out) if t in eos), out)


def chat(engine, *messages: str) -> list[int]:
    turns = [{"role": "user", "content": m} for m in messages]
    return engine.tokenizer.apply_chat_template(turns, add_generation_prompt=True, tokenize=True,
                                                return_dict=True)["input_ids"]


@pytest.mark.slow
@needs_wheel
def test_every_drafter_writes_transformers_greedy_output(engine):
    prompt = chat(engine, "List three colours of the sea, one per line.")
    with torch.no_grad():
        greedy = {p: hf_greedy(engine.target_model, prompt, NEW_TOKENS, p) for p in (1.0, 1.3)}
    runs = [dict(drafter=d) for d in engine.drafters] + [dict(drafter=d, tree_width=2, num_draft_tokens=3)
                                                         for d in ("eagle", "model")]
    settings = [({}, 1.0), (dict(temperature=0.8, top_k=1, seed=4), 1.0),
                (dict(adaptive=True, repetition_penalty=1.3), 1.3)]
    for run in runs:
        for extra, penalty in settings:
            if run.get("tree_width") and extra.get("adaptive"):
                continue  # adaptive K and trees do not go together
            out = engine.generate(prompt, max_new_tokens=NEW_TOKENS, **run, **extra)
            assert out.token_ids == greedy[penalty], (run, extra)


@pytest.mark.slow
@needs_wheel
def test_a_second_turn_on_a_kept_cache_writes_a_fresh_runs_tokens(engine):
    first = chat(engine, "Name a fish.")
    cache = PromptCache()
    answer = engine.generate(first, max_new_tokens=NEW_TOKENS, cache=cache, ignore_eos=True).token_ids
    second = first + answer + engine.tokenizer("\nAnd a bird?")["input_ids"]
    for drafter in ("eagle", "model", "prompt_lookup"):
        kept = engine.generate(second, max_new_tokens=NEW_TOKENS, cache=cache, drafter=drafter, ignore_eos=True)
        fresh = engine.generate(second, max_new_tokens=NEW_TOKENS, drafter=drafter, ignore_eos=True)
        assert kept.token_ids == fresh.token_ids, drafter
        assert kept.reused_tokens > 0
