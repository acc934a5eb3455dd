"""Ctrl-C in the engine's turns (specui/turns.py) leaves nothing held: raised at every point of `Turns.place` and
`Turns.take` where a signal handler runs (at a function's start and just after each call returns), by a trace
function, in a run alone and in a run that waits in line behind another thread's; and a real SIGINT delivered while
the main thread's run waits in line. Each time the other thread's run ends, then two more runs at once end, each
exact (plain decoding's tokens)."""

from __future__ import annotations

import linecache
import signal
import sys
import threading

import pytest

from specui import SpeculativeEngine
from specui.drafters import PromptLookupDrafter
from specui.turns import Turns
from tests.engine.test_interrupt_forward import PROMPT
from tests.engine.test_interrupt_threads import signal_points
from tests.engine.test_library_threads import WAIT, at_once
from tests.helpers import make_model, noisy_copy

GREEDY = dict(max_new_tokens=4, temperature=0.0, ignore_eos=True)
POINTS = {code: signal_points(code) for code in (Turns.place.__code__, Turns.take.__code__)}
WAITS = Turns.take.__code__  # the line where a run waits for the place before it: `with before:`


@pytest.fixture(scope="module")
def engine():
    target = make_model("llama", layers=2, seed=3)
    return SpeculativeEngine(target, noisy_copy(target, noise=0.2, seed=4))


class PressAt:
    """A trace function that raises KeyboardInterrupt before the `at`-th signal point of the turns' code this thread
    reaches (0: never), counts the points, and calls `waiting` when the thread comes to wait in line."""

    def __init__(self, at: int = 0, waiting=lambda: None):
        self.at, self.seen, self.waiting = at, 0, waiting

    def __call__(self, frame, event, arg):
        if frame.f_code not in POINTS:
            return None
        frame.f_trace_opcodes = True
        return self.step(frame, event, arg)  # the "call" event: the function starts (at its RESUME)

    def step(self, frame, event, arg):
        if event in ("call", "opcode") and frame.f_lasti in POINTS[frame.f_code]:
            self.seen += 1
            if self.seen == self.at:
                raise KeyboardInterrupt(f"at offset {frame.f_lasti} of {frame.f_code.co_name}")
        if event == "line" and frame.f_code is WAITS and "with before" in _line(frame):
            self.waiting()
        return self.step


def _line(frame) -> str:
    return linecache.getline(frame.f_code.co_filename, frame.f_lineno)


def traced(press, run):
    sys.settrace(press)
    try:
        return run()
    finally:
        sys.settrace(None)


class Holding(PromptLookupDrafter):
    """Prompt lookup whose rounds hold the turn until `go` is set, saying when the first began."""

    def __init__(self, began: threading.Event, go: threading.Event):
        super().__init__()
        self.began, self.go = began, go

    def propose(self, context, k):
        self.began.set()
        assert self.go.wait(WAIT), "never let go"
        return super().propose(context, k)


def after(engine, plain, other=None) -> None:
    """The other thread's run ends exact; then two runs at once end, exact."""
    if other is not None:
        other.join(WAIT)
        assert not other.is_alive(), "the other thread's run is stuck"
        assert other.tokens == plain
    assert at_once([lambda: engine.generate(PROMPT, **GREEDY).token_ids] * 2) == [plain, plain]


class Other(threading.Thread):
    """Another thread's run that holds its first round until let go."""

    def __init__(self, engine):
        super().__init__(daemon=True)
        self.engine, self.began, self.go, self.tokens = engine, threading.Event(), threading.Event(), None

    def run(self):
        self.tokens = self.engine.generate(PROMPT, drafter=Holding(self.began, self.go), **GREEDY).token_ids


def test_a_ctrl_c_at_any_point_of_a_lone_runs_turns_leaves_nothing_held(engine):
    plain = engine.generate(PROMPT, speculative=False, **GREEDY).token_ids
    count = PressAt()
    assert traced(count, lambda: engine.generate(PROMPT, **GREEDY).token_ids) == plain
    assert count.seen >= 10
    for at in range(1, count.seen + 1):
        with pytest.raises(KeyboardInterrupt):
            traced(PressAt(at), lambda: engine.generate(PROMPT, **GREEDY))
        after(engine, plain)


def test_a_ctrl_c_at_any_point_of_a_run_waiting_in_line_leaves_nothing_held(engine):
    """The main thread's run asks while another's holds the turn (its first round, until the main thread comes to
    wait in line): every point of joining the line, waiting and going on, then both runs' rounds taking turns."""
    plain = engine.generate(PROMPT, speculative=False, **GREEDY).token_ids
    most = 0
    for at in range(0, 200):
        other = Other(engine)
        other.start()
        assert other.began.wait(WAIT)
        press = PressAt(at, waiting=other.go.set)
        try:
            tokens = traced(press, lambda: engine.generate(PROMPT, **GREEDY).token_ids)
            assert at == 0 or press.seen < at, "the Ctrl-C was not raised"
            assert tokens == plain
        except KeyboardInterrupt:
            assert 0 < at <= press.seen
        finally:
            other.go.set()
        after(engine, plain, other)
        most = max(most, press.seen)
        if at > most:  # every point the runs reached was pressed
            break
    assert most >= 10


def test_a_sigint_while_waiting_in_line_leaves_nothing_held(engine):
    """A real Ctrl-C (SIGINT to the main thread) while its run waits in line, blocked on the place before it: the
    wait is cut short, the place given up, and the run in the turn goes on."""
    plain = engine.generate(PROMPT, speculative=False, **GREEDY).token_ids
    other = Other(engine)
    other.start()
    assert other.began.wait(WAIT)
    main, blocked = threading.get_ident(), threading.Event()

    def press():  # once the main thread waits in line, SIGINT; let the other thread go once it is handled
        assert blocked.wait(WAIT)
        while True:  # until the main thread's frame is inside the wait (it is blocked in `with before:`)
            frame = sys._current_frames().get(main)
            if frame is not None and frame.f_code is WAITS and "with before" in _line(frame):
                break
            threading.Event().wait(0.001)
        signal.pthread_kill(main, signal.SIGINT)

    presser = threading.Thread(target=press, daemon=True)
    presser.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            traced(PressAt(0, waiting=blocked.set), lambda: engine.generate(PROMPT, **GREEDY))
    finally:
        other.go.set()
    presser.join(WAIT)
    after(engine, plain, other)
