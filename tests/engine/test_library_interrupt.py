"""A notebook's Ctrl-C (a real KeyboardInterrupt, delivered to the main thread in the middle of a run) and a loop
left with break: the engine and a conversation's cache stay usable, and the next greedy run is token for token what
it gave before, which is plain decoding's, for every drafter of the bundled preset."""

from __future__ import annotations

import _thread
import gc
import threading

import pytest

from specui.prompt_cache import PromptCache
from tests.helpers import BUNDLED_TARGET

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not BUNDLED_TARGET.exists(), reason="the bundled pair is not built")]
GREEDY = dict(max_new_tokens=40, temperature=0.0, ignore_eos=True)


@pytest.fixture(scope="module")
def bundled():
    from specui import load_engine

    return load_engine("bundled", warm_up=False)


def interrupted(stream) -> int:
    """Iterate `stream` and press Ctrl-C a moment after its first round, as a notebook's user does: the
    KeyboardInterrupt lands wherever the main thread is, mostly inside the engine's round. The rounds seen."""
    seen, timer = 0, threading.Timer(0.02, _thread.interrupt_main)
    try:
        for _ in stream:
            seen += 1
            if seen == 1:
                timer.start()
    except KeyboardInterrupt:
        return seen
    finally:
        timer.cancel()
    raise AssertionError(f"the run ended ({seen} rounds) before the interrupt: make it longer")


@pytest.mark.parametrize("with_cache", [False, True])
def test_a_keyboard_interrupt_mid_run_leaves_the_engine_and_its_cache_exact(bundled, with_cache):
    tok = bundled.tokenizer
    prompt, other = tok("def fibonacci(n):\n").input_ids, tok("import os\nclass Cache:\n").input_ids
    for drafter in bundled.drafters:
        plain = bundled.generate(prompt, speculative=False, **GREEDY).token_ids
        cache = PromptCache() if with_cache else None
        bundled.generate(prompt, drafter=drafter, cache=cache, **GREEDY)  # the conversation's first turn
        long_run = bundled.stream(prompt + other, drafter=drafter, cache=cache,
                                  **{**GREEDY, "max_new_tokens": 1000 - len(prompt + other)})
        assert interrupted(long_run) >= 1, drafter
        again = bundled.generate(prompt, drafter=drafter, cache=cache, **GREEDY)
        assert again.token_ids == plain, drafter
        if with_cache:
            assert again.reused_tokens == len(prompt) - 1, drafter  # the cache still serves the conversation


def test_a_loop_left_with_break_leaves_the_cache_exact(bundled):
    """The other way out of a stream: break, the generator left to the garbage collector."""
    tok = bundled.tokenizer
    prompt = tok("for i in range(10):\n").input_ids
    for drafter in bundled.drafters:
        plain = bundled.generate(prompt, speculative=False, **GREEDY).token_ids
        cache = PromptCache()
        for i, _ in enumerate(bundled.stream(prompt, drafter=drafter, cache=cache, **GREEDY)):
            if i == 2:
                break
        assert bundled.generate(prompt, drafter=drafter, cache=cache, **GREEDY).token_ids == plain, drafter


def leave(bundled, prompt, cache, how: str) -> None:
    """Take two rounds of a stream with `cache`, then leave it as a consumer does."""
    stream = bundled.stream(prompt, drafter="eagle", cache=cache, **GREEDY)
    if how == "an exception in the loop's body":
        with pytest.raises(RuntimeError):
            for i, _ in enumerate(stream):
                if i == 1:
                    raise RuntimeError("the consumer's own bug")
        del stream
        return
    next(stream), next(stream)
    if how == "closed from another thread":
        closer = threading.Thread(target=stream.close)
        closer.start()
        closer.join(30)
        assert list(stream) == []  # closed: the consumer's next step ends the loop
    elif how == "dropped and collected":
        del stream
        gc.collect()


@pytest.mark.parametrize("how", ["an exception in the loop's body", "closed from another thread",
                                 "dropped and collected"])
def test_a_stream_left_any_way_gives_its_cache_back_exact(bundled, how):
    tok = bundled.tokenizer
    prompt = tok("for i in range(10):\n").input_ids
    plain = bundled.generate(prompt, speculative=False, **GREEDY).token_ids
    cache = PromptCache()
    bundled.generate(prompt, drafter="eagle", cache=cache, **GREEDY)
    leave(bundled, prompt, cache, how)
    assert not cache.busy
    again = bundled.generate(prompt, drafter="eagle", cache=cache, **GREEDY)
    assert again.token_ids == plain and again.reused_tokens == len(prompt) - 1


def test_a_stream_kept_unclosed_keeps_its_cache_and_others_run_without_it_exact(bundled):
    tok = bundled.tokenizer
    prompt = tok("for i in range(10):\n").input_ids
    plain = bundled.generate(prompt, speculative=False, **GREEDY).token_ids
    cache = PromptCache()
    kept = bundled.stream(prompt, drafter="model", cache=cache, **GREEDY)
    next(kept)
    meanwhile = bundled.generate(prompt, drafter="model", cache=cache, **GREEDY)
    assert meanwhile.token_ids == plain and meanwhile.reused_tokens == 0 and cache.busy
    kept.close()
    assert not cache.busy
    assert bundled.generate(prompt, drafter="model", cache=cache, **GREEDY).reused_tokens == len(prompt) - 1


def test_a_keyboard_interrupt_inside_a_transformers_forward_leaves_the_cache_exact():
    """As above, for a target that runs transformers' own forward and cache (GPT-2: no lean forward): Ctrl-C lands
    inside its forward, after its first layer took the block's keys (here raised from its second layer's forward)."""
    from specui import SpeculativeEngine
    from tests.helpers import make_model

    target = make_model("gpt2", vocab_size=96, layers=3, seed=7)
    engine, prompt = SpeculativeEngine(target), [5, 17, 3, 88, 41, 9, 5, 17]
    plain = engine.generate(prompt, speculative=False, **GREEDY).token_ids
    cache = PromptCache()
    engine.generate(prompt, cache=cache, **GREEDY)  # the conversation's first turn
    layer, calls = target.transformer.h[1], []

    def pressed(*args, **kwargs):  # the third forward of the next run: Ctrl-C
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return type(layer).forward(layer, *args, **kwargs)

    layer.forward = pressed
    with pytest.raises(KeyboardInterrupt):
        engine.generate(prompt + [1, 2], cache=cache, **GREEDY)
    del layer.forward
    again = engine.generate(prompt, cache=cache, **GREEDY)  # raised AssertionError: KV cache out of step
    assert again.token_ids == plain and again.reused_tokens == len(prompt) - 1
