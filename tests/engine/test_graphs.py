"""The GPU forward (`specui.graphs.GraphStack`): the model's logits to rounding, rows that do not depend on
how many are computed together (so greedy speculative decoding is plain greedy decoding bit for bit),
hidden-state features, long blocks in chunks of ROWS, a cache that grows, caches reused across
generations. On a CPU it runs eagerly (the same buffers and shapes); with CUDA the graphs are captured
and replayed, and the same tests run there."""

from __future__ import annotations

import itertools

import pytest
import torch

from specui import SpeculativeEngine
from specui.graphs import PROMPT_ROWS, ROWS, GraphStack
from specui.kv import CachedLM
from tests.helpers import make_model, noisy_copy, random_prompts

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
DEVICES = ["cpu", pytest.param("cuda", marks=needs_cuda), pytest.param("cuda+compile", marks=needs_cuda)]


def graphed(arch: str, where: str, *, seed: int = 0, layers: int = 2, **kw):
    """A tiny model on the graph stack: eager on the CPU, captured on CUDA (its layers compiled with +compile)."""
    model = make_model(arch, layers=layers, seed=seed, vocab_size=96, **kw).to(where.split("+")[0])
    if where != "cuda":  # on a GPU CachedLM picks the stack by itself
        GraphStack.attach(model, graphs=where != "cpu", compile=where.endswith("compile"))
    return model


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_logits_equal_the_models_in_chunks_and_past_a_growth(arch, device):
    model = graphed(arch, device, max_positions=1024)
    ids = torch.randint(0, 96, (300,), generator=torch.Generator().manual_seed(1)).tolist()
    lm = CachedLM(model)
    assert isinstance(lm.stack, GraphStack)
    with torch.no_grad():
        want = model(torch.tensor([ids], device=model.device)).logits[0]
        got = torch.cat([lm.extend(ids[:270]), lm.extend(ids[270:271]), lm.extend(ids[271:290]), lm.extend(ids[290:])])
    assert lm.cache.capacity >= 300 and lm.length == 300  # grew past its first 256 slots
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
    lm.trim(100)  # a rolled-back cache continues as one that saw the first 100 tokens
    torch.testing.assert_close(lm.extend(ids[100:103]), want[100:103], atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("device", DEVICES)
def test_rows_do_not_depend_on_the_block(device):
    """One token at a time (plain decoding) and blocks of 2..ROWS+3 tokens give the same bits."""
    model = graphed("llama", device, seed=3)
    ids = torch.randint(0, 96, (60,), generator=torch.Generator().manual_seed(2)).tolist()
    alone, blocks = CachedLM(model), CachedLM(model)
    one = torch.cat([alone.extend([t]) for t in ids])
    cuts = [0, 2, 5, 5 + ROWS, 9 + ROWS, 12 + 2 * ROWS, 60]
    together = torch.cat([blocks.extend(ids[a:b]) for a, b in itertools.pairwise(cuts)])
    assert torch.equal(one, together)
    if device != "cpu":
        assert alone.cache.graphs and blocks.cache.graphs  # replayed, not run eagerly


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("last_only", [False, True])
def test_a_long_prompt_is_read_in_wide_blocks(device, last_only):
    """A prompt into an empty cache (`prompt=True`): the model's logits and states, and decoding goes on."""
    model = graphed("llama", device, max_positions=2048)
    ids = torch.randint(0, 96, (PROMPT_ROWS + 40,), generator=torch.Generator().manual_seed(4)).tolist()
    lm = CachedLM(model)
    with torch.no_grad():
        out = model(torch.tensor([ids], device=model.device), output_hidden_states=True)
        logits, states = lm.extend(ids[:-3], last_only=last_only, features=(1, 2), prompt=True)
        nxt = lm.extend(ids[-3:])
    want = out.logits[0, : len(ids) - 3]
    torch.testing.assert_close(logits, want[-1:] if last_only else want, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(states, torch.cat([out.hidden_states[i][0, :-3] for i in (1, 2)], -1), atol=1e-4,
                               rtol=1e-4)
    torch.testing.assert_close(nxt, out.logits[0, -3:], atol=1e-4, rtol=1e-4)
    assert CachedLM(model).extend(ids[:-3], last_only=True, prompt=True).shape == (1, 96)


@pytest.mark.parametrize("device", DEVICES)
def test_features_are_the_models_hidden_states(device):
    model = graphed("llama", device, layers=3)
    ids = [5, 17, 3, 88, 41, 9, 10]
    logits, states = CachedLM(model).extend(ids, features=(0, 2, 3))
    with torch.no_grad():
        out = model(torch.tensor([ids], device=model.device), output_hidden_states=True)
    want = torch.cat([out.hidden_states[i][0] for i in (0, 2, 3)], dim=-1)
    torch.testing.assert_close(states, want, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(logits, out.logits[0], atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_greedy_speculative_is_plain_and_transformers(arch, device):
    target = graphed(arch, device, layers=3, seed=0, init_range=1.0)
    draft = noisy_copy(target.cpu(), noise=0.3, seed=1).to(device.split("+")[0])  # its noise drawn on the CPU
    target.to(device.split("+")[0])
    engine = SpeculativeEngine(target, draft)
    for prompt in random_prompts(4, vocab_size=96, seed=5) + [[(7 * i) % 96 for i in range(40)]]:  # one read wide
        plain = engine.generate(prompt, max_new_tokens=40, speculative=False).token_ids
        fast = engine.generate(prompt, max_new_tokens=40, num_draft_tokens=5).token_ids
        assert fast == plain
        with torch.no_grad():
            hf = target.generate(torch.tensor([prompt], device=target.device), max_new_tokens=40, do_sample=False)
        assert plain == hf[0, len(prompt):].tolist()


def test_a_generation_gives_its_cache_back_for_the_next():
    target = graphed("llama", "cpu")
    engine = SpeculativeEngine(target, noisy_copy(target, noise=0.3, seed=1))
    stack = GraphStack.shared(target)
    first = engine.generate([4, 8, 15], max_new_tokens=20, num_draft_tokens=3).token_ids
    assert len(stack.spare) == 1  # the finished run's cache (its graphs, on a GPU) waits for the next
    cache = stack.spare[0]
    assert engine.generate([4, 8, 15], max_new_tokens=20, num_draft_tokens=3).token_ids == first
    assert stack.spare == [cache]  # reused, not rebuilt



@pytest.mark.parametrize("device", DEVICES)
def test_a_dropped_model_goes_at_once_with_its_stack(device):
    """A model keeps its stack (an attribute), and the stack holds the model's parts, never the model: no reference
    cycle keeps a dropped model, its caches and its graphs in memory until the collector's next full pass (an app
    switching presets frees the old pair as it lets go of it)."""
    import gc
    import weakref

    model = graphed("llama", device, seed=9)
    SpeculativeEngine(model, None).generate([3, 1, 4, 1, 5], max_new_tokens=6, speculative=False)
    gone = weakref.ref(model)
    gc.disable()
    try:
        del model
        assert gone() is None
    finally:
        gc.enable()
