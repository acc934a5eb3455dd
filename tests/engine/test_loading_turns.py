"""Loads take turns in a process (`specui.loading._LOADS`, `specui.turns.in_turn`): a Ctrl-C just after a load took
its turn gives the turn back (it kept it for good: every later load, the app's preset switches included, waited
forever); and a preset switch through `PairCache` checks the preset once (`check_before_loading`, which may ask the
Hub), not twice."""

from __future__ import annotations

import inspect
import sys
import threading
import time

import pytest

from specui import loading, turns
from specui.loading import PairCache
from specui.presets import load_config
from tests.engine.test_loading import hub  # noqa: F401 (the fixture: local folders of tiny models)

WAITING = "Waiting for another model's load to finish"


def test_a_preset_switch_checks_the_preset_once(hub, monkeypatch):  # noqa: F811
    checked = []
    check = loading.check_before_loading
    monkeypatch.setattr(loading, "check_before_loading", lambda preset: checked.append(preset.name) or check(preset))
    cache = PairCache(capacity=1)
    cache.get(hub.get("llama"))
    assert checked == ["llama"]
    cache.get(hub.get("gpt2"))  # a switch: the loaded pair goes first, once the new preset passed its check
    assert checked == ["llama", "gpt2"]


def taken(lock) -> bool:
    """Whether a thread holds `lock`, asked from a thread of its own (which takes it if it can, and gives it back)."""
    got = []
    asker = threading.Thread(target=lambda: got.append(lock.acquire(blocking=False) and (lock.release() or True)))
    asker.start()
    asker.join(30)
    return not got[0]


def turn_lines() -> set:
    """The code a load runs as it takes its turn and before it loads: load_pair, its work and `in_turn` up to its
    `finally`, whose release no signal handler can come before (no call returns there first)."""
    finally_line = next(i for i, line in enumerate(inspect.getsourcelines(loading.in_turn)[0]) if "finally:" in line)
    codes = {loading.load_pair.__code__, *(c for c in loading.load_pair.__code__.co_consts if inspect.iscode(c))}
    return {(code, None) for code in codes} | {(loading.in_turn.__code__, loading.in_turn.__code__.co_firstlineno +
                                                 finally_line)}


class PressWhileHeld:
    """A trace function that raises KeyboardInterrupt at the `at`-th line of a load's turn-taking code run while the
    turn is held (0: never), as a signal handler raises it between two statements, and counts those lines."""

    def __init__(self, at: int = 0):
        self.at, self.seen, self.lines = at, 0, turn_lines()

    def __call__(self, frame, event, arg):
        before = next((end for code, end in self.lines if code is frame.f_code), False)
        if before is False:
            return None

        def line(frame, event, arg):
            if event == "line" and (before is None or frame.f_lineno < before) and taken(loading._LOADS.lock):
                self.seen += 1
                if self.seen == self.at:
                    raise KeyboardInterrupt(f"at line {frame.f_lineno} of {frame.f_code.co_name}, the turn taken")
            return line
        return line


def test_a_ctrl_c_just_after_a_load_took_its_turn_gives_the_turn_back(hub):  # noqa: F811
    """The interrupt is raised by a trace function at each line a load runs while holding the turn, before it loads:
    the turn was kept for good."""
    count = PressWhileHeld()
    sys.settrace(count)
    try:
        loading.load_pair(hub.get("llama"))
    finally:
        sys.settrace(None)
    assert count.seen >= 2
    for at in range(1, count.seen + 1):
        sys.settrace(PressWhileHeld(at))
        try:
            with pytest.raises(KeyboardInterrupt):
                loading.load_pair(hub.get("llama"))
        finally:
            sys.settrace(None)
        assert not taken(loading._LOADS.lock), f"a Ctrl-C at the {at}-th line kept the process's load turn"
    assert loading.load_pair(hub.get("llama")).target is not None


def test_a_load_that_finds_the_turn_taken_says_it_waits_whichever_line_the_other_took_it_at(hub):  # noqa: F811
    """The load looked whether the turn was taken, then took it: another load that took it in between was waited for
    without a word (the progress box empty until that load ended). Here another load takes the turn at each line the
    first one runs before it holds it (a trace function starts it and lets the first go on once it holds the turn)."""

    def first_load(at: int) -> tuple[list[str], int]:
        """The first load's progress lines, with another load taking the turn at its `at`-th line (0: none); and how
        many lines it ran before it held the turn."""
        lines, seen, go, paused = [], [0], threading.Event(), threading.Event()
        others = []

        def other_progress(line):  # the other load holds the turn here until the first one said it waits
            paused.set()
            go.wait(10)

        def trace(frame, event, arg):
            if frame.f_code.co_filename not in (loading.__file__, turns.__file__) \
                    or frame.f_code is loading._load_pair.__code__:
                return None

            def line(frame, event, arg):
                if event == "line" and not others and not taken(loading._LOADS.lock):
                    seen[0] += 1
                    if seen[0] == at:
                        others.append(threading.Thread(target=loading.load_pair, args=(hub.get("qwen2"),),
                                                       kwargs={"progress": other_progress}))
                        others[0].start()
                        assert paused.wait(60)
                return line
            return line

        def said(line):
            lines.append(line)
            if line == WAITING:
                go.set()

        def load():
            sys.settrace(trace)
            try:
                loading.load_pair(hub.get("llama"), progress=said)
            finally:
                sys.settrace(None)

        first = threading.Thread(target=load)
        first.start()
        first.join(120)
        go.set()
        for thread in others:
            thread.join(120)
        return lines, seen[0]

    lines, count = first_load(0)
    assert count >= 2 and WAITING not in lines
    for at in range(1, count + 1):
        lines, _ = first_load(at)
        assert lines[:1] == [WAITING], f"the other load took the turn at line {at}: {lines[:2]}"
        assert lines[-1] == "Ready", at


def test_a_load_waiting_behind_another_through_the_pair_cache_says_so(hub):  # noqa: F811
    """The app loads through one `PairCache` (a visitor's preset, the startup preload), whose own lock makes a second
    load wait before `load_pair`: that wait said nothing (the progress box stayed empty until the first load ended)."""
    cache = PairCache(capacity=2)
    paused, go = threading.Event(), threading.Event()

    def first_progress(line):  # the first load pauses at its first line, holding its turn
        paused.set()
        go.wait(30)

    first = threading.Thread(target=cache.get, args=(hub.get("llama"),), kwargs={"progress": first_progress})
    first.start()
    lines: list[str] = []
    second = threading.Thread(target=cache.get, args=(hub.get("qwen2"),), kwargs={"progress": lines.append})
    try:
        assert paused.wait(30)
        second.start()
        deadline = time.monotonic() + 5
        while not lines and time.monotonic() < deadline:
            time.sleep(0.05)
        waiting = list(lines)
    finally:
        go.set()
        first.join(60)
        if second.ident:
            second.join(60)
    assert waiting == [WAITING], waiting
    assert lines[-1] == "Ready"  # then it loaded


def test_a_load_asked_for_within_a_load_on_its_own_thread_is_refused(hub):  # noqa: F811
    """A progress function that loads (through the same `PairCache`, or `load_pair` itself): with the turns' plain
    locks it waited for itself for good; with re-entrant ones it went through, a second pair loaded amid the first
    (the cache then held two pairs at capacity 1). It is refused, and both turns are given back."""
    cache = PairCache(capacity=1)
    for load in (lambda: cache.get(hub.get("qwen2")), lambda: loading.load_pair(hub.get("qwen2"))):
        asked = []

        def progress(line, load=load):
            if not asked:  # the first line, said while this thread holds both turns
                asked.append(line)
                load()

        with pytest.raises(loading.LoadError, match="within another load on the same thread"):
            cache.get(hub.get("llama"), progress=progress)
        assert asked and not taken(cache._lock.lock) and not taken(loading._LOADS.lock)
        assert list(cache._pairs) == []
    assert cache.get(hub.get("llama")).target is not None and list(cache._pairs) == ["llama"]


def test_a_load_asked_for_while_its_thread_waits_for_anothers_load_is_refused_with_a_load_error():
    """`PairCache.get` from a progress function told WAITING (this thread holds the cache's turn and waits for the
    process's, which another thread holds) raised `in_turn`'s plain RuntimeError, outside the load's own LoadError
    wrapping: the app did not show it as a load's failure. Now a LoadError that names the call and the line. No model
    loads: the refusal comes before any."""
    cache, preset = PairCache(capacity=1), load_config().get("bundled")
    holding, go = threading.Event(), threading.Event()

    def other_load():  # another thread's load, holding the process's turn
        with loading._LOADS.lock:
            holding.set()
            go.wait(30)

    other = threading.Thread(target=other_load)
    other.start()
    told: list[str] = []

    def progress(line):
        told.append(line)
        cache.get(preset)  # a second load, asked for within this thread's own

    try:
        assert holding.wait(30)
        with pytest.raises(loading.LoadError, match="within another load on the same thread") as refused:
            cache.get(preset, progress=progress)
    finally:
        go.set()
        other.join(30)
    assert told == [WAITING]
    assert "PairCache.get('bundled')" in str(refused.value) and repr(WAITING) in str(refused.value)
    assert not taken(cache._lock.lock) and cache._lock.owner is None and list(cache._pairs) == []
