"""One Ctrl-C at any point of a run's end where a signal handler runs leaves its conversation's cache free: in the
engine's own frame (`_rounds`: its inner `finally` asks `holds`, then `close`; its outer one `let_go`) and in the
cache's `holds`, `close`, `let_go` and `_drop`, raised by a trace function during a real run of a tiny model.

`let_go` (specui/engine.py, the outer `finally`) only has work to do when `close` was cut short, which takes a
first Ctrl-C; a Ctrl-C at its very start then is a second signal, within the microseconds the first one's unwinding
takes (it would leave the cache held: later runs read their prompts whole, without it). One signal never does."""

from __future__ import annotations

import sys

from specui import SpeculativeEngine
from specui.prompt_cache import PromptCache
from tests.engine.test_interrupt_threads import signal_points

CODES = {code: signal_points(code) for code in (SpeculativeEngine._rounds.__code__, PromptCache.holds.__code__,
                                                 PromptCache.close.__code__, PromptCache.let_go.__code__,
                                                 PromptCache._drop.__code__)}
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
    assert names[-4:] == ["let_go", "holds", "let_go", "_rounds"] and "close" in names, seen  # the whole end reached
    for at in range(1, len(seen) + 1):
        pressed(engine, cache, at)
