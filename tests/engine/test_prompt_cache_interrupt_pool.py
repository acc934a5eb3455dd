"""A run's end tells its conversation's pool (`specui.cache_pool.PromptCaches`) at once that the cache grew, whatever
point of `PromptCache.close` (and of the pool's `used` and `_make_room` that it calls) a Ctrl-C comes at: raised at
every point where a signal handler runs, by a trace function, during a real run of a tiny model through a pool. A
Ctrl-C after the cache was marked free and before the pool was told left a free cache holding more than the pool had
counted: the pool kept more than its budget until the next pick."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable

from specui import SpeculativeEngine
from specui.cache_pool import PromptCaches
from specui.prompt_cache import PromptCache
from tests.engine.test_interrupt_threads import signal_points
from tests.helpers import make_model, noisy_copy

CODES = (PromptCache.close.__code__, PromptCaches.used.__code__, PromptCaches._make_room.__code__)
POINTS = {code: signal_points(code) for code in CODES}
GREEDY = dict(max_new_tokens=4, temperature=0.0, ignore_eos=True)


def press_at(at: int) -> tuple[Callable, list]:
    """A trace function that raises KeyboardInterrupt before the `at`-th signal point of CODES this thread reaches
    (0: never), and the list of the points' functions it saw, one a point."""
    seen: list = []

    def step(frame, event, arg):
        if event in ("call", "opcode") and frame.f_lasti in POINTS[frame.f_code]:
            seen.append(frame.f_code)
            if len(seen) == at:
                raise KeyboardInterrupt(f"at offset {frame.f_lasti} of {frame.f_code.co_name}")
        return step

    def trace(frame, event, arg):  # the "call" event: the function starts (at its RESUME)
        frame.f_trace_opcodes = frame.f_code in POINTS
        return step(frame, event, arg) if frame.f_trace_opcodes else None

    return trace, seen


@contextlib.contextmanager
def traced_close(press: Callable):
    """`PromptCache.close` traced by `press` (only it: a whole run traced is slow), within the block."""
    close = PromptCache.close

    def traced(self, *args, **kwargs):
        sys.settrace(press)
        try:
            return close(self, *args, **kwargs)
        finally:
            sys.settrace(None)

    PromptCache.close = traced
    try:
        yield
    finally:
        PromptCache.close = close


def turn_pressed(engine, at: int) -> list:
    """An older conversation's turn, then a new one's, whose growth leaves no room for the older in the pool's budget,
    with a Ctrl-C at its close's `at`-th point. The new cache ends free, and the older one has gone from the pool
    unless the new one forgot its conversation (it holds nothing)."""
    pool, model = PromptCaches(budget=10**12), engine.target_model
    older_ids, new_ids = [1, 2, 40, 41, 42], [3, 4, 40, 41, 42]
    older = pool.pick(older_ids, model)
    engine.generate(older_ids, cache=older, **GREEDY)
    new = pool.pick(new_ids, model)
    assert new is not older and older in pool.caches
    pool.budget = older.nbytes  # the new conversation's first bytes leave no room for the older one
    press, seen = press_at(at)
    try:
        with traced_close(press):
            engine.generate(new_ids, cache=new, **GREEDY)
    except KeyboardInterrupt:
        assert at and len(seen) == at
    else:  # a run that never reached its point would pass untested
        assert not at, f"no Ctrl-C at point {at}: the run reached {len(seen)}"
    assert not new.busy, f"the cache is still held after a Ctrl-C at point {at}"
    assert older not in pool.caches or new.nbytes == 0, \
        f"after a Ctrl-C at point {at} ({len(seen)} seen) the pool kept more than its budget: it was not told"
    return seen


def test_a_ctrl_c_at_any_point_of_a_runs_close_leaves_its_pool_told_or_the_cache_empty():
    target = make_model("llama", layers=2, seed=3)
    engine = SpeculativeEngine(target, noisy_copy(target, noise=0.2, seed=4))
    alone = turn_pressed(engine, 0)  # no Ctrl-C: the older conversation goes as the new one closes
    assert set(alone) == set(CODES)
    for at in range(1, len(alone) + 1):
        turn_pressed(engine, at)

