"""A conversation's cache is given back when opening or closing it fails (Ctrl-C, out of memory, a drafter's own
error): it forgets the conversation, whose state it cannot vouch for, and the next runs are exact and use it again.
And a draft model whose start was cut short in its prompt's read keeps a consistent state (`keep()`)."""

from __future__ import annotations

import pytest

from specui import SpeculativeEngine
from specui.drafters import ModelDrafter, PromptLookupDrafter
from specui.lean import DecoderStack
from specui.prompt_cache import PromptCache
from specui.sampling import Sampling
from tests.engine.test_interrupt_forward import PROMPT, Presses, press_in_layer
from tests.helpers import make_model

GREEDY = dict(max_new_tokens=12, temperature=0.0, ignore_eos=True)


def exact_again(engine, cache: PromptCache, plain: list[int]) -> None:
    """The cache is free and empty; the next two runs are plain decoding's, the second reusing the first's."""
    assert not cache.busy and cache.length == 0
    first = engine.generate(PROMPT, cache=cache, **GREEDY)
    assert first.token_ids == plain and first.reused_tokens == 0
    assert engine.generate(PROMPT, cache=cache, **GREEDY).reused_tokens == len(PROMPT) - 1


@pytest.mark.parametrize("error", [KeyboardInterrupt, MemoryError])
def test_a_cache_whose_opening_fails_is_given_back(monkeypatch, error):
    """Opening a conversation's first cache builds the target's lean forward (packed copies of its matrices): out of
    memory there, or Ctrl-C, left the cache marked in use for good, every later turn running without it."""
    target = make_model("llama", layers=2, seed=3)
    plain = SpeculativeEngine(target).generate(PROMPT, speculative=False, **GREEDY).token_ids
    engine, cache = SpeculativeEngine(target), PromptCache()
    build = DecoderStack.build

    def build_fails(model, **kwargs):
        raise error("packing the matrices")

    monkeypatch.setattr(DecoderStack, "build", build_fails)
    with pytest.raises(error):
        engine.generate(PROMPT, cache=cache, **GREEDY)
    monkeypatch.setattr(DecoderStack, "build", build)
    exact_again(engine, cache, plain)


class KeepFails(PromptLookupDrafter):
    """A custom drafter whose keep() (its state for the next turn) has a bug."""

    def keep(self):
        raise ValueError("the drafter's own bug")


def test_a_cache_whose_closing_fails_is_given_back():
    target = make_model("gpt2", vocab_size=96, layers=2, seed=4)
    plain = SpeculativeEngine(target).generate(PROMPT, speculative=False, **GREEDY).token_ids
    engine, cache = SpeculativeEngine(target), PromptCache()
    engine.generate(PROMPT, cache=cache, **GREEDY)
    with pytest.raises(ValueError, match="the drafter's own bug"):
        engine.generate(PROMPT, cache=cache, drafter=KeepFails(), **GREEDY)
    exact_again(engine, cache, plain)


@pytest.mark.parametrize("resumed", [False, True])
def test_a_draft_model_cut_short_in_its_prompts_read_keeps_what_it_holds(monkeypatch, resumed):
    """`keep()` after a start cut short raised AttributeError: '_valid'; it now holds the tokens kept before the
    read (none, or a conversation's resumed ones), every one of them the context's."""
    draft = make_model("gpt2", vocab_size=96, layers=2, seed=8)
    prompt, sampling = PROMPT + [1, 2, 3], Sampling()
    resume = None
    if resumed:
        earlier = ModelDrafter(draft)
        earlier.start(PROMPT, sampling=sampling, seed=0)
        resume = {**earlier.keep(), "pairs": 5}
    presses = Presses(KeyboardInterrupt, 1)
    press_in_layer(monkeypatch, draft.transformer.h[1], presses)
    presses.armed = True
    drafter = ModelDrafter(draft)
    with pytest.raises(KeyboardInterrupt):
        drafter.start(prompt, sampling=sampling, seed=0, resume=resume)
    kept = drafter.keep()
    assert kept["valid"] == (5 if resumed else 0) == kept["lm"].length
    assert all(layer.get_seq_length() == kept["lm"].length for layer in kept["lm"].cache.layers)
