"""Ctrl-C (KeyboardInterrupt) or an error (out of memory) raised inside a forward pass, at a chosen layer: the
conversation's cache and the drafter's are left as a finished forward leaves them, the cache is given back, and
the next run is exact (a fresh engine's plain decoding, token for token) and reuses the cache.

The models and caches are real; the seam only raises: a transformers layer's forward (GPT-2, which the lean
forward does not take, so transformers' own forward and DynamicCache run), or the lean forward's run of layers
(`DecoderStack._run`, which writes the layers before the chosen one into the cache first)."""

from __future__ import annotations

import pytest

from specui import SpeculativeEngine
from specui.lean import DecoderStack
from specui.prompt_cache import PromptCache
from tests.helpers import BUNDLED_TARGET, make_model

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


def press_in_stack(monkeypatch, model, at: int, presses: Presses) -> None:
    """The lean forward (`DecoderStack`) of `model`: a run of layers that reaches layer `at` runs the layers
    before it (their keys and values written into the cache), then raises."""
    run = DecoderStack._run

    def _run(self, x, cache, past, n, start, stop, *args, **kwargs):
        if self.embed is model.get_input_embeddings() and start <= at < stop and presses.due():
            run(self, x, cache, past, n, start, at, *args, **kwargs)
            presses.raise_()
        return run(self, x, cache, past, n, start, stop, *args, **kwargs)

    monkeypatch.setattr(DecoderStack, "_run", _run)


def press_after_layers(monkeypatch, model, presses: Presses) -> None:
    """The lean forward of `model`: raise in its final norm, once every layer wrote the block's keys and values and
    the cache's own length counts them."""
    norm = DecoderStack._norm

    def _norm(self, x, weight, eps):
        if weight is self.norm.weight and self.embed is model.get_input_embeddings() and presses.due():
            presses.raise_()
        return norm(self, x, weight, eps)

    monkeypatch.setattr(DecoderStack, "_norm", _norm)


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


@pytest.mark.slow
@pytest.mark.parametrize("error", ERRORS)
@pytest.mark.parametrize("nth", [1, 2, 4])  # the draft's prompt read (its start), then its rounds
@pytest.mark.parametrize("run", ["draft model", "model + lookup", "draft model, trees"])
def test_a_transformers_draft_cut_short_inside_a_forward_keeps_the_caches_exact(monkeypatch, gpt2_pair, run, nth,
                                                                                error):
    """A draft model's forward cut short in its prompt's read left `keep()` without its valid count
    (AttributeError: '_valid', raised while the cache was given back, which stayed held)."""
    target, draft = gpt2_pair
    presses = Presses(error, nth)
    press_in_layer(monkeypatch, draft.transformer.h[1], presses)
    interrupted_turn(SpeculativeEngine(target, draft), presses, {**GREEDY, **RUNS[run]}, plain_of(target))


@pytest.fixture(scope="module")
def bundled():
    if not BUNDLED_TARGET.exists():
        pytest.skip("the bundled pair is not built")
    from specui import load_engine

    return load_engine("bundled", warm_up=False)


@pytest.mark.slow
@pytest.mark.parametrize("error", ERRORS)
@pytest.mark.parametrize("nth", [1, 3])
def test_the_lean_forward_cut_short_at_a_layer_keeps_the_caches_exact_for_every_drafter(monkeypatch, bundled, nth,
                                                                                        error):
    """The target's lean forward (its prompt read, a verify, an early-exit draft's first layers) and the draft
    model's (its prompt read, its steps), for every drafter of the bundled preset, chains and trees."""
    plain = {}

    def fresh_plain(ids):
        if tuple(ids) not in plain:
            plain[tuple(ids)] = bundled.generate(ids, speculative=False, **GREEDY).token_ids
        return plain[tuple(ids)]

    runs = [dict(drafter=d) for d in bundled.drafters] + [dict(drafter="model", tree_width=2, tree_nodes=4),
                                                          dict(drafter="eagle", tree_width=2, tree_nodes=4)]
    fresh_plain(PROMPT + [1, 2])  # before any press
    for model in (bundled.target_model, bundled.draft_model):
        for run in runs:
            # the draft model's forwards: its prompt read (its rounds run in one native call, `DecoderChain`)
            if model is bundled.draft_model and (run["drafter"] not in ("model", "model_lookup") or nth > 1):
                continue
            presses = Presses(error, nth)
            with monkeypatch.context() as patched:
                press_in_stack(patched, model, 1, presses)
                interrupted_turn(bundled, presses, {**GREEDY, **run}, fresh_plain)


@pytest.mark.slow
@pytest.mark.parametrize("error", ERRORS)
@pytest.mark.parametrize("nth", [1, 2, 3])
def test_the_lean_forward_cut_short_after_its_layers_keeps_the_cache_exact(monkeypatch, bundled, nth, error):
    """Raised after the lean cache counted the block (its final norm, the output layer): the cache was a block
    longer than the CachedLM, and the next turn's trim raised 'KV cache out of step', the cache held for good."""
    plain = bundled.generate(PROMPT + [1, 2], speculative=False, **GREEDY).token_ids
    for run in (dict(speculative=False), dict(drafter="eagle"), dict(drafter="model", tree_width=2, tree_nodes=4)):
        presses = Presses(error, nth)
        with monkeypatch.context() as patched:
            press_after_layers(patched, bundled.target_model, presses)
            interrupted_turn(bundled, presses, {**GREEDY, **run}, lambda ids: plain)
