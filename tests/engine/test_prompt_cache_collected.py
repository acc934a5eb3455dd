"""A stream dropped unfinished inside a reference cycle is closed by the garbage collector, on whatever thread runs a
collection and at whatever line that thread is: its run then gives its conversation's cache back (`PromptCache.close`),
which takes the cache's lock. A collection that came while that same thread held the lock (another run given the same
cache asking for it, the app forgetting the conversation: any allocation there may start one) took it again and
deadlocked the thread for good. Here a trace function collects at each line of those methods in turn, as an allocation
there would; real tiny models and real streams."""

from __future__ import annotations

import gc
import sys
import threading

import pytest

from specui import SpeculativeEngine
from specui.prompt_cache import PromptCache
from tests.engine.test_interrupt_forward import PROMPT
from tests.helpers import make_model, noisy_copy

GREEDY = dict(max_new_tokens=4, temperature=0.0, ignore_eos=True)


@pytest.fixture(scope="module")
def engine():
    target = make_model("llama", layers=2, seed=3)
    return SpeculativeEngine(target, noisy_copy(target, noise=0.2, seed=4))


class CollectAtLine:
    """A trace function that runs the garbage collector at the `at`-th line run in `code` (0: never), and counts
    the lines it saw."""

    def __init__(self, code, at: int = 0):
        self.code, self.at, self.seen = code, at, 0

    def __call__(self, frame, event, arg):
        return self.line if frame.f_code is self.code else None

    def line(self, frame, event, arg):
        if event == "line":
            self.seen += 1
            if self.seen == self.at:
                gc.collect()
        return self.line


def abandon(engine, cache: PromptCache) -> None:
    """A stream that holds `cache`, dropped after its first round inside a reference cycle: only a collection closes
    it."""
    stream = engine.stream(PROMPT, cache=cache, **GREEDY)
    next(stream)
    cycle = [stream]
    cycle.append(cycle)
    assert cache.busy


def on_a_thread(trace: CollectAtLine, call) -> bool:
    """Whether `call` returned, traced on a thread of its own (a deadlocked one is left behind, as a daemon)."""
    def traced():
        sys.settrace(trace)
        try:
            call()
        finally:
            sys.settrace(None)

    thread = threading.Thread(target=traced, daemon=True)
    thread.start()
    thread.join(30)
    return not thread.is_alive()


@pytest.mark.parametrize("method", ["open", "clear"])
def test_a_stream_collected_inside_its_caches_lock_gives_the_cache_back(engine, method):
    plain = engine.generate(PROMPT, speculative=False, **GREEDY).token_ids

    def call(cache):  # another run given the conversation's cache, or the conversation forgotten
        return (lambda: engine.generate(PROMPT, cache=cache, **GREEDY)) if method == "open" else cache.clear

    code = getattr(PromptCache, method).__code__

    def collected_at(trace: CollectAtLine) -> None:
        cache = PromptCache()
        engine.generate(PROMPT, cache=cache, **GREEDY)  # the conversation's first turn
        abandon(engine, cache)
        assert on_a_thread(trace, call(cache)), f"a collection at line {trace.at} of {method} deadlocked"
        gc.collect()  # the stream, if no line collected it
        assert not cache.busy, trace.at
        assert engine.generate(PROMPT, cache=cache, **GREEDY).token_ids == plain, trace.at
        assert engine.generate(PROMPT, cache=cache, **GREEDY).reused_tokens == len(PROMPT) - 1, trace.at

    gc.disable()  # only these collections close the dropped streams
    try:
        count = CollectAtLine(code)
        collected_at(count)  # the lines counted, no collection among them
        assert count.seen >= 3
        for at in range(1, count.seen + 1):
            collected_at(CollectAtLine(code, at))
    finally:
        gc.enable()


def test_a_stream_collected_while_the_pool_forgets_a_visitor_leaves_none_of_its_caches(engine):
    """`PromptCaches.forget` lets a visitor's caches go one by one; a stream collected meanwhile (in a cache's clear)
    closed another visitor's cache, and the pool, making room for it, let go a cache that forget had still to come to:
    forget raised ValueError (list.remove) and the visitor's caches after it stayed."""
    from specui.cache_pool import PromptCaches

    pool = PromptCaches(budget=10**12)
    for ids in ([1, 2, 3, 4, 5], [6, 7, 8, 9, 10]):  # the leaving visitor's two conversations
        engine.generate(ids, cache=pool.pick(ids, engine.target_model, owner="leaving"), **GREEDY)
    abandon(engine, pool.pick(PROMPT, engine.target_model, owner="staying"))
    pool.budget = 0  # when the staying visitor's cache closes, the pool lets every free cache go
    forgotten = []
    gc.disable()  # only the trace's collection closes the dropped stream
    try:
        collect = CollectAtLine(PromptCache.clear.__code__, 3)  # inside the first cache's clear, its lock held
        assert on_a_thread(collect, lambda: forgotten.append(pool.forget("leaving")))
    finally:
        gc.enable()
    assert forgotten == [2], "forget raised"
    assert [c.owner for c in pool.caches] == ["staying"] and not pool.caches[0].busy


def test_a_pools_pick_never_waits_for_a_caches_lock(engine):
    """A thread that holds a cache's lock may be running the collector, whose closing of another run's stream comes to
    the pool (`PromptCaches.used`, the pool's lock): a pick, which asks every cache's `busy` inside the pool's lock,
    waited for the cache's (7fe6982's `PromptCache._settle`) and would deadlock the two threads. Here another thread
    holds the lock of the cache the pick takes; the pick goes on, as the run it gives the cache to does."""
    from specui.cache_pool import PromptCaches

    pool = PromptCaches(budget=10**12)
    cache = pool.pick(PROMPT, engine.target_model, owner="a")
    engine.generate(PROMPT, cache=cache, **GREEDY)
    held, done = threading.Event(), threading.Event()

    def hold():
        with cache._guard:  # as a run's open or clear does while the collector runs in it
            held.set()
            done.wait(60)

    threading.Thread(target=hold, daemon=True).start()
    assert held.wait(30)
    picked = []
    try:
        assert on_a_thread(None, lambda: picked.append(pool.pick(PROMPT, engine.target_model, owner="a"))), \
            "the pick waited for the cache's lock"
    finally:
        done.set()
    assert picked == [cache] and not cache.busy
