"""Ctrl-Cs at any point of a run's end where a signal handler runs leave its conversation's cache free: in the
engine's own frame (`_rounds`: its `finally` asks `holds`, then `close`) and in the cache's `holds`, `close` and
`_drop`, raised by a trace function during a real run of a tiny model. One Ctrl-C, and a second within the first
one's unwinding: a Ctrl-C as `close` began, then one as the `let_go` after it began (a Python function's own start
is a signal point), left the cache held for good (later runs read their prompts whole, without it); the run's hold
now ends with a lock its `with` releases in C (`PromptCache._settle`). Two as a run opens the cache (`open` cut short,
then its `except`) leave the cache standing for no other turn's tokens than its own."""

from __future__ import annotations

import sys

import pytest

from specui import SpeculativeEngine
from specui.prompt_cache import PromptCache
from tests.engine.test_interrupt_threads import signal_points

CODES = {code: signal_points(code) for code in (SpeculativeEngine._rounds.__code__, PromptCache.holds.__code__,
                                                 PromptCache.close.__code__, PromptCache._drop.__code__)}
PROMPT = [3, 4, 40, 41, 42]
GREEDY = dict(max_new_tokens=3, temperature=0.0, ignore_eos=True)


class PressOnce:
    """A trace function that raises KeyboardInterrupt at the `at`-th point of CODES this thread reaches (0: never),
    and keeps (function, offset) of each point reached. Python unsets a trace function that raised: one press."""

    def __init__(self, at: int):
        self.at, self.seen = at, []

    def __call__(self, frame, event, arg):  # the "call" event: a function starts or a generator resumes
        frame.f_trace_opcodes = frame.f_code in CODES
        return self.step(frame, event, arg) if frame.f_trace_opcodes else None

    def step(self, frame, event, arg):
        if event in ("call", "opcode") and frame.f_lasti in CODES[frame.f_code]:
            self.seen.append((frame.f_code.co_name, frame.f_lasti))
            if len(self.seen) == self.at:
                raise KeyboardInterrupt(f"at offset {frame.f_lasti} of {frame.f_code.co_name}")
        return self.step


def pressed(engine, cache: PromptCache, at: int) -> list:
    press = PressOnce(at)
    sys.settrace(press)
    try:
        engine.generate(PROMPT, cache=cache, **GREEDY)
    except KeyboardInterrupt:
        assert at and len(press.seen) == at
    else:  # a run that never reached its point would pass untested
        assert not at, f"no Ctrl-C at point {at}: the run reached {len(press.seen)}"
    finally:
        sys.settrace(None)
    assert not cache.busy, f"the cache is still held after a Ctrl-C at {press.seen[-1]}"
    return press.seen


def test_one_ctrl_c_anywhere_in_a_runs_end_leaves_its_cache_free(llama_pair):
    engine, cache = SpeculativeEngine(*llama_pair), PromptCache()
    engine.generate(PROMPT, cache=cache, **GREEDY)  # untraced: the first run builds the lean forward (many calls)
    seen = pressed(engine, cache, 0)
    names = [name for name, _ in seen]
    assert names[-3:] == ["close", "_rounds", "_rounds"] and "holds" in names, seen  # the whole end reached
    for at in range(1, len(seen) + 1):
        pressed(engine, cache, at)


class PressTwice(PressOnce):
    """Two presses: at the `at`-th point of CODES, then at the `then`-th point after it (`pressed` counts them).
    The first press's raise unsets the trace function, so a profile function, called as the next function returns
    or starts (before any signal point), sets it again, on the frames running too."""

    def __init__(self, at: int, then: int):
        super().__init__(at)
        self.then, self.pressed = then, 0

    def step(self, frame, event, arg):
        if event in ("call", "opcode") and frame.f_lasti in CODES[frame.f_code] and len(self.seen) + 1 == self.at:
            self.pressed += 1
            sys.setprofile(self.again)
        return super().step(frame, event, arg)

    def again(self, frame, event, arg):
        sys.setprofile(None)
        self.at += self.then
        sys.settrace(self)
        running = frame
        while running is not None:  # the frames running go on traced from their next instruction
            if running.f_code in CODES:
                running.f_trace, running.f_trace_opcodes = self.step, True
            running = running.f_back
        if event == "call" and frame.f_code in CODES:  # a function's start, which its trace's "call" event missed
            self.step(frame, event, arg)


def test_two_ctrl_cs_in_a_runs_end_leave_its_cache_free(llama_pair):
    """A second Ctrl-C at any of the 3 points after the first, wherever the first lands in a run's end."""
    engine, cache = SpeculativeEngine(*llama_pair), PromptCache()
    engine.generate(PROMPT, cache=cache, **GREEDY)
    ends, twice = len(pressed(engine, cache, 0)), 0
    for at in range(1, ends + 1):
        for then in range(1, 4):
            press = PressTwice(at, then)
            sys.settrace(press)
            try:
                engine.generate(PROMPT, cache=cache, **GREEDY)
            except KeyboardInterrupt:
                pass
            finally:
                sys.settrace(None)
                sys.setprofile(None)
            twice += press.pressed == 2
            assert not cache.busy, f"the cache is still held after Ctrl-Cs at the ends of {press.seen[at - 1:press.at]}"
    assert twice > ends  # most first presses were followed by a second


def test_two_ctrl_cs_as_a_run_opens_its_cache_leave_it_no_other_turns_tokens(llama_pair, monkeypatch):
    """A Ctrl-C as `open` began to take the cache to a new prompt (the last turn's tokens still in it, untrimmed), then
    one as its `except` began to forget them (`_drop`'s start): the run's end closed the cache with the new prompt,
    which then stood for the last turn's keys and values, and the next run of that prompt reused them (inexact)."""
    engine, cache = SpeculativeEngine(*llama_pair), PromptCache()
    engine.generate([3, 4, 40, 41, 42, 43, 44, 45], cache=cache, **GREEDY)  # the last turn
    prompt = [3, 4, 50, 51, 52, 53, 54, 55]  # two tokens shared

    def press(*args, **kwargs):
        raise KeyboardInterrupt

    with monkeypatch.context() as patch, pytest.raises(KeyboardInterrupt):
        patch.setattr(cache, "_open", press)  # the first press: nothing in the cache changed yet
        patch.setattr(cache, "_drop", press)  # the second
        engine.generate(prompt, cache=cache, **GREEDY)
    assert not cache.busy and cache.reusable(prompt) <= 2
    plain = engine.generate(prompt, speculative=False, **GREEDY).token_ids
    assert engine.generate(prompt, cache=cache, **GREEDY).token_ids == plain
