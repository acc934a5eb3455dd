"""A run's end tells its conversation's pool (`specui.cache_pool.PromptCaches`) at once that the cache grew, whatever
point of `PromptCache.close` (and of the pool's `used` and `_make_room` that it calls) a Ctrl-C comes at: raised at
every point where a signal handler runs, by a trace function, during a real run of a tiny model through a pool. A
Ctrl-C after the cache was marked free and before the pool was told left a free cache holding more than the pool had
counted: the pool kept more than its budget until the next pick."""

from __future__ import annotations

import contextlib
import sys

from specui import SpeculativeEngine
from specui.cache_pool import PromptCaches
from specui.prompt_cache import PromptCache
from tests.engine.test_interrupt_threads import signal_points
from tests.helpers import make_model, noisy_copy

CODES = (PromptCache.close.__code__, PromptCaches.used.__code__, PromptCaches._make_room.__code__)
POINTS = {code: signal_points(code) for code in CODES}
GREEDY = dict(max_new_tokens=4, temperature=0.0, ignore_eos=True)


class PressAt:
    """A trace function that raises KeyboardInterrupt before the `at`-th signal point of CODES this thread reaches (0:
    never), and counts the points it saw."""

    def __init__(self, at: int = 0):
        self.at, self.seen, self.codes = at, 0, set()

    def __call__(self, frame, event, arg):
        if frame.f_code not in POINTS:
            return None
        frame.f_trace_opcodes = True
        return self.step(frame, event, arg)  # the "call" event: the function starts (at its RESUME)

    def step(self, frame, event, arg):
        if event in ("call", "opcode") and frame.f_lasti in POINTS[frame.f_code]:
            self.seen += 1
            self.codes.add(frame.f_code)
            if self.seen == self.at:
                raise KeyboardInterrupt(f"at offset {frame.f_lasti} of {frame.f_code.co_name}")
        return self.step


@contextlib.contextmanager
def traced_close(press: PressAt):
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


def turn_pressed(engine, at: int) -> PressAt:
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
    press = PressAt(at)
    try:
        with traced_close(press):
            engine.generate(new_ids, cache=new, **GREEDY)
    except KeyboardInterrupt:
        assert at and press.seen == at
    assert not new.busy, f"the cache is still held after a Ctrl-C at point {at}"
    assert older not in pool.caches or new.nbytes == 0, \
        f"after a Ctrl-C at point {at} ({press.seen} seen) the pool kept more than its budget: it was not told"
    return press


def test_a_ctrl_c_at_any_point_of_a_runs_close_leaves_its_pool_told_or_the_cache_empty():
    target = make_model("llama", layers=2, seed=3)
    engine = SpeculativeEngine(target, noisy_copy(target, noise=0.2, seed=4))
    alone = turn_pressed(engine, 0)  # no Ctrl-C: the older conversation goes as the new one closes
    assert alone.codes == set(CODES)
    points = alone.seen
    for at in range(1, points + 1):
        turn_pressed(engine, at)

