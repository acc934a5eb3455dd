"""Ctrl-C at every point of `kv.cpu_threads` where a signal handler runs (just after a call returned, at the
generator's start and where it resumes after its yield), during a real run of an engine whose prompt is read on
its own thread count (`prompt_threads`): torch's thread count is put back each time. A Ctrl-C just after
`torch.set_num_threads(count)`, before the block's `try`, left torch on the prompt's count for good (every later
round ran on it)."""

from __future__ import annotations

import dis
import itertools
import sys

import pytest
import torch

from specui import SpeculativeEngine
from specui.kv import cpu_threads
from tests.engine.test_interrupt_forward import PROMPT
from tests.helpers import make_model

CODE = cpu_threads.__wrapped__.__code__


def signal_points(code) -> set[int]:
    """The offsets where a pending signal's handler runs in `code` (CPython checks after a call returns, and at a
    RESUME: the function's start and its return from a yield): the instruction after each call, and each RESUME."""
    ops = list(dis.get_instructions(code))
    return {b.offset for a, b in itertools.pairwise(ops) if a.opname.startswith("CALL")} \
        | {op.offset for op in ops if op.opname == "RESUME"}


POINTS = signal_points(CODE)


class PressAt:
    """A trace function that raises KeyboardInterrupt before the `at`-th signal point `cpu_threads` reaches (0:
    never), and counts the points it saw."""

    def __init__(self, at: int = 0):
        self.at, self.seen = at, 0

    def __call__(self, frame, event, arg):
        if frame.f_code is not CODE:
            return None
        frame.f_trace_opcodes = True
        return self.step(frame, event, arg)  # the "call" event: the generator starts or resumes (at a RESUME)

    def step(self, frame, event, arg):
        if event in ("call", "opcode") and frame.f_lasti in POINTS:
            self.seen += 1
            if self.seen == self.at:
                raise KeyboardInterrupt(f"at offset {frame.f_lasti} of cpu_threads")
        return self.step


def test_a_ctrl_c_at_any_point_of_the_prompts_thread_count_puts_torchs_count_back():
    before = torch.get_num_threads()
    engine = SpeculativeEngine(make_model("llama", layers=2, seed=3), prompt_threads=before + 1)
    settings = {"max_new_tokens": 3, "temperature": 0.0, "ignore_eos": True, "speculative": False}
    count = PressAt()
    sys.settrace(count)
    try:
        engine.generate(PROMPT, **settings)
    finally:
        sys.settrace(None)
    assert count.seen >= 5 and torch.get_num_threads() == before
    try:
        for at in range(1, count.seen + 1):
            sys.settrace(PressAt(at))
            try:
                with pytest.raises(KeyboardInterrupt):
                    engine.generate(PROMPT, **settings)
            finally:
                sys.settrace(None)
            assert torch.get_num_threads() == before, f"a Ctrl-C at the {at}-th point left torch on the prompt's count"
    finally:
        torch.set_num_threads(before)  # for the tests after this one
