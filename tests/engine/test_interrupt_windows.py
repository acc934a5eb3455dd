"""Ctrl-C at every line of a run's taking and giving back of a conversation's cache (`PromptCache.open`/`close`, the
engine's `_rounds`), raised by a trace function as a signal handler raises it between two statements: the cache is
given back each time, and the next runs are exact and reuse it. A Ctrl-C just after the cache was opened, before
the run's `try`, left it marked in use for good: every later turn ran without it."""

from __future__ import annotations

import dis
import sys

import pytest

from specui import SpeculativeEngine
from specui.prompt_cache import PromptCache, open_target
from tests.engine.test_interrupt_forward import PROMPT
from tests.helpers import make_model, noisy_copy

GREEDY = dict(max_new_tokens=3, temperature=0.0, ignore_eos=True)
WATCHED = {f.__code__ for f in (SpeculativeEngine._rounds, open_target, PromptCache.open, PromptCache._open,
                                PromptCache.close)}


def with_exits(code) -> set[int]:
    """The offsets where a `with` block's normal exit starts (`__exit__(None, None, None)`): a line event there
    comes while the block's lock is held and before its exit is called, a point no signal handler runs at
    (signals are handled after a call returns, at a loop's jump back and at a function's start)."""
    ops = list(dis.get_instructions(code))
    return {a.offset for a, b, c in zip(ops, ops[1:], ops[2:])
            if all(i.opname == "LOAD_CONST" and i.argval is None for i in (a, b, c))}


EXITS = {code: with_exits(code) for code in WATCHED}


class PressAtLine:
    """A trace function that raises KeyboardInterrupt at the `at`-th line run in the watched functions (0: never),
    and counts the lines it saw (those where a signal handler can run)."""

    def __init__(self, at: int = 0):
        self.at, self.seen = at, 0

    def __call__(self, frame, event, arg):
        return self.line if frame.f_code in WATCHED else None

    def line(self, frame, event, arg):
        if event == "line" and frame.f_lasti not in EXITS[frame.f_code]:
            self.seen += 1
            if self.seen == self.at:
                raise KeyboardInterrupt(f"at {frame.f_code.co_name} line {frame.f_lineno}")
        return self.line


def traced(press: PressAtLine, run) -> None:
    sys.settrace(press)
    try:
        run()
    finally:
        sys.settrace(None)


@pytest.mark.parametrize("drafter", ["model", None])
def test_a_ctrl_c_at_any_line_of_a_runs_cache_handling_gives_the_cache_back(drafter):
    target = make_model("llama", layers=2, seed=3)
    engine = SpeculativeEngine(target, noisy_copy(target, noise=0.2, seed=4))
    settings = dict(GREEDY, **({"drafter": drafter} if drafter else {"speculative": False}))
    plain = engine.generate(PROMPT, speculative=False, **GREEDY).token_ids
    count = PressAtLine()
    cache = PromptCache()
    engine.generate(PROMPT, cache=cache, **settings)  # the conversation's first turn
    traced(count, lambda: engine.generate(PROMPT, cache=cache, **settings))
    assert count.seen > 20
    for at in range(1, count.seen + 1):
        cache = PromptCache()
        engine.generate(PROMPT, cache=cache, **settings)
        with pytest.raises(KeyboardInterrupt):
            traced(PressAtLine(at), lambda: engine.generate(PROMPT, cache=cache, **settings))
        assert not cache.busy, f"Ctrl-C at the {at}-th line left the cache held"
        again = engine.generate(PROMPT, cache=cache, **settings)
        assert again.token_ids == plain, at
        assert engine.generate(PROMPT, cache=cache, **settings).reused_tokens == len(PROMPT) - 1, at


def test_a_ctrl_c_in_an_open_that_finds_the_cache_held_leaves_it_to_its_holder():
    """`PromptCache.open` without a holder (`open_target`'s default, a script's own use): a Ctrl-C in a second open,
    which found the cache held, gave back the first one's cache while it ran (both holders were None), so a third
    run could take it and the first one's close would then trim that run's cache."""
    target = make_model("llama", layers=2, seed=3)
    cache = PromptCache()
    lm, _, _ = cache.open(target, PROMPT, ())  # a run holds it
    count = PressAtLine()
    traced(count, lambda: cache.open(target, PROMPT, ()))
    assert count.seen >= 3 and cache.busy
    for at in range(1, count.seen + 1):
        with pytest.raises(KeyboardInterrupt):
            traced(PressAtLine(at), lambda: cache.open(target, PROMPT, ()))
        assert cache.busy and cache.lm is lm, f"a Ctrl-C at the {at}-th line gave the held cache back"
    cache.close(list(PROMPT))
    assert not cache.busy
