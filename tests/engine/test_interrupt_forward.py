"""Ctrl-C (KeyboardInterrupt) or an error (out of memory) raised inside a forward pass, at a chosen layer: the
conversation's cache and the drafter's are left as a finished forward leaves them, the cache is given back, and
the next run is exact (a fresh engine's plain decoding, token for token) and reuses the cache.

The models and caches are real; the seam only raises: a transformers layer's forward (GPT-2, which the lean
forward does not take, so transformers' own forward and DynamicCache run), or the lean forward's run of layers
(`DecoderStack._run`, which writes the layers before the chosen one into the cache first)."""

from __future__ import annotations

import pytest

from specui import SpeculativeEngine
from specui.prompt_cache import PromptCache
from tests.helpers import make_model

GREEDY = dict(max_new_tokens=24, temperature=0.0, ignore_eos=True)
PROMPT = [5, 17, 3, 88, 41, 9, 5, 17, 3, 88]
ERRORS = [KeyboardInterrupt, RuntimeError]  # Ctrl-C; an error as out of memory raises it


class Presses:
    """Raises `error` at the `nth` forward that reaches layer `layer` of `model` from when it is armed."""

    def __init__(self, error, nth: int):
        self.error, self.nth, self.calls, self.armed = error, nth, 0, False

    def due(self) -> bool:
        if not self.armed:
            return False
        self.calls += 1
        return self.calls == self.nth

    def raise_(self):
        self.armed = False
        raise self.error("pressed inside the forward")


def press_in_layer(monkeypatch, layer, presses: Presses) -> None:
    """transformers' forward: raise from `layer` (a module), after the layers before it took the block's keys."""
    def forward(*args, **kwargs):
        if presses.due():
            presses.raise_()
        return type(layer).forward(layer, *args, **kwargs)

    monkeypatch.setattr(layer, "forward", forward, raising=False)


def interrupted_turn(engine, presses: Presses, settings: dict, fresh_plain) -> None:
    """A conversation's first turn, then a second turn cut short by `presses`, then that turn again: it must be
    exact and read only what the cache does not hold."""
    cache = PromptCache()
    engine.generate(PROMPT, cache=cache, **settings)
    second = PROMPT + [1, 2]
    presses.armed = True
    with pytest.raises(presses.error):
        engine.generate(second, cache=cache, **settings)
        raise AssertionError(f"{settings}: the run ended before the press ({presses.calls} forwards)")
    assert not cache.busy  # given back
    for layer in getattr(cache.lm.cache, "layers", ()):  # transformers' cache: every layer as long as the others
        assert layer.get_seq_length() == cache.lm.length
    again = engine.generate(second, cache=cache, **settings)
    assert again.token_ids == fresh_plain(second)
    assert again.reused_tokens >= len(PROMPT)
    assert engine.generate(second, cache=cache, **settings).reused_tokens == len(second) - 1


@pytest.fixture(scope="module")
def gpt2_pair():
    return make_model("gpt2", vocab_size=96, layers=3, seed=7), make_model("gpt2", vocab_size=96, layers=2, seed=8)


def plain_of(target):
    return lambda ids: SpeculativeEngine(target).generate(ids, speculative=False, **GREEDY).token_ids


RUNS = {"plain": dict(speculative=False), "prompt lookup": dict(drafter="prompt_lookup"),
        "draft model": dict(drafter="model"), "model + lookup": dict(drafter="model_lookup"),
        "draft model, trees": dict(drafter="model", tree_width=2, tree_nodes=4)}


@pytest.mark.slow
@pytest.mark.parametrize("error", ERRORS)
@pytest.mark.parametrize("nth", [1, 3])  # the turn's prompt read, a later round's verify forward
@pytest.mark.parametrize("run", list(RUNS))
def test_a_transformers_target_cut_short_inside_a_forward_keeps_its_cache_exact(monkeypatch, gpt2_pair, run, nth,
                                                                                 error):
    target, draft = gpt2_pair
    presses = Presses(error, nth)
    press_in_layer(monkeypatch, target.transformer.h[1], presses)
    interrupted_turn(SpeculativeEngine(target, draft), presses, {**GREEDY, **RUNS[run]}, plain_of(target))

