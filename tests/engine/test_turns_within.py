"""A turn asked for on a thread whose own turn is under way, as a signal handler or a finaliser would (both run on a
thread at any point where it calls or waits): within the turn it goes straight in; while the thread waits in line it
waits only for the turn under way (with its place in line, behind the thread's own, it waited for itself for good).
Raised by a trace function at every point of the turns' code where a handler runs, in a run that waits in line behind
another thread's, and at every point of the engine's `with` statements that take a turn and give it back, in a run
alone; and by a real signal delivered while the main thread's run is blocked in line. Real tiny models;
every run exact (plain decoding's tokens)."""

from __future__ import annotations

import dis
import linecache
import signal
import sys
import threading

import pytest

from specui import SpeculativeEngine
from specui.turns import Turns
from tests.engine.test_interrupt_forward import PROMPT
from tests.engine.test_interrupt_threads import signal_points
from tests.engine.test_library_threads import WAIT
from tests.engine.test_turns_interrupt import GREEDY, WAITS, Other, _line, traced
from tests.helpers import make_model, noisy_copy

POINTS = {code: signal_points(code) for code in (Turns.place.__code__, Turns.take.__code__)}
RUN = SpeculativeEngine._run.__code__  # its `with` statements take each turn and give it back


def on_lines(code, text: str) -> set[int]:
    """The signal points of `code` on its lines that read `text`."""
    points, starts, line, on = signal_points(code), dict(dis.findlinestarts(code)), None, set()
    for op in dis.get_instructions(code):
        line = starts.get(op.offset) or line
        if op.offset in points and line and text in linecache.getline(code.co_filename, line):
            on.add(op.offset)
    return on


ENDS = {RUN: on_lines(RUN, "self._turns.take(")}


@pytest.fixture(scope="module")
def engine():
    target = make_model("llama", layers=2, seed=3)
    return SpeculativeEngine(target, noisy_copy(target, noise=0.2, seed=4))


class HandlerAt:
    """A trace function that runs `handler()` at the `at`-th signal point of the turns' code this thread reaches
    outside the handler (0: never), as a signal handler or a finaliser would run there, counts those points, and
    calls `waiting` when the thread comes to wait in line."""

    def __init__(self, handler, at: int, waiting, points=POINTS):
        self.handler, self.at, self.seen, self.inside, self.waiting = handler, at, 0, False, waiting
        self.points = points

    def __call__(self, frame, event, arg):
        if frame.f_code not in self.points or self.inside:
            return None
        frame.f_trace_opcodes = True
        return self.step(frame, event, arg)  # the "call" event: the function starts (at its RESUME)

    def step(self, frame, event, arg):
        if not self.inside and event in ("call", "opcode") and frame.f_lasti in self.points[frame.f_code]:
            self.seen += 1
            if self.seen == self.at:
                self.inside = True
                try:
                    self.handler()
                finally:
                    self.inside = False
        if not self.inside and event == "line" and frame.f_code is WAITS and "with before" in _line(frame):
            self.waiting()
        return self.step


def on_a_thread(run) -> threading.Thread:
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_a_turn_asked_for_at_any_point_of_a_run_waiting_in_line_goes_through(engine):
    """A run asks while another thread's holds the turn (its first round, until the run comes to wait in line or the
    handler lets it go); at each
    point of its turns' code in turn, a handler on its thread runs the engine (plain decoding of the same prompt):
    the handler's run, the run and the other thread's end, exact. Left stuck, the thread is a daemon: the test fails
    in bounded time."""
    plain = engine.generate(PROMPT, speculative=False, **GREEDY).token_ids
    most, at = 0, 0
    while at <= most:
        other = Other(engine)
        other.start()
        assert other.began.wait(WAIT)
        handled, tokens = [], []

        def handler(other=other, handled=handled):
            other.go.set()
            handled.append(engine.generate(PROMPT, speculative=False, **GREEDY).token_ids)

        trace = HandlerAt(handler, at, waiting=other.go.set)
        thread = on_a_thread(lambda trace=trace, tokens=tokens: tokens.append(
            traced(trace, lambda: engine.generate(PROMPT, **GREEDY).token_ids)))
        thread.join(WAIT)
        other.go.set()
        assert not thread.is_alive(), f"a turn asked for at the {at}-th point waited for its own thread's place"
        other.join(WAIT)
        assert not other.is_alive() and other.tokens == plain
        reached = 0 < at <= trace.seen  # a run that waited in line less often than another reaches fewer points
        assert tokens == [plain] and handled == ([plain] if reached else [])
        most, at = max(most, trace.seen), at + 1
    assert most >= 10


def test_a_turn_asked_for_by_a_signal_handler_while_the_thread_waits_in_line_goes_through(engine):
    """A real signal to the main thread while its run is blocked in line (behind another thread's first round): its
    handler runs the engine, and waits only for the round under way. Were it stuck (waiting for the main thread's own
    place), a SIGINT after WAIT s ends it with KeyboardInterrupt."""
    plain = engine.generate(PROMPT, speculative=False, **GREEDY).token_ids
    other = Other(engine)
    other.start()
    assert other.began.wait(WAIT)
    main, handled, done = threading.get_ident(), [], threading.Event()

    def handler(signum, frame):
        other.go.set()
        handled.append(engine.generate(PROMPT, speculative=False, **GREEDY).token_ids)

    def press():  # once the main thread is blocked in line, the signal; SIGINT if the run is still stuck after WAIT s
        while True:
            frame = sys._current_frames().get(main)
            if frame is not None and frame.f_code is WAITS and "with before" in _line(frame):
                break
            threading.Event().wait(0.001)
        signal.pthread_kill(main, signal.SIGUSR1)
        if not done.wait(WAIT):
            signal.pthread_kill(main, signal.SIGINT)

    before = signal.signal(signal.SIGUSR1, handler)
    presser = on_a_thread(press)
    try:
        tokens = engine.generate(PROMPT, **GREEDY).token_ids
    except KeyboardInterrupt:
        pytest.fail("the signal handler's turn waited for its own thread's place in line")
    finally:
        done.set()
        other.go.set()
        signal.signal(signal.SIGUSR1, before)
    presser.join(WAIT)
    other.join(WAIT)
    assert tokens == plain and handled == [plain] and other.tokens == plain


def test_a_turn_asked_for_at_any_point_of_the_with_statements_that_take_and_give_back_a_turn_goes_through(engine):
    """A run alone; at each point of the engine's `with` statements that take its turns and give them back (where a
    handler runs: after each item is taken, and after each is given back, last first), a handler on its thread runs
    the engine. With the mark given back before the place, a handler just between found no turn of its thread under
    way and queued behind its own place, still held, for good (the thread is a daemon: the test fails in bounded
    time)."""
    plain = engine.generate(PROMPT, speculative=False, **GREEDY).token_ids
    most, at = 0, 0
    while at <= most:
        handled, tokens = [], []

        def handler(handled=handled):
            handled.append(engine.generate(PROMPT, speculative=False, **GREEDY).token_ids)

        trace = HandlerAt(handler, at, waiting=lambda: None, points=ENDS)
        thread = on_a_thread(lambda trace=trace, tokens=tokens: tokens.append(
            traced(trace, lambda: engine.generate(PROMPT, **GREEDY).token_ids)))
        thread.join(WAIT)
        assert not thread.is_alive(), f"a turn asked for at the {at}-th point waited for its own thread's place"
        assert tokens == [plain] and handled == ([plain] if 0 < at <= trace.seen else [])
        most, at = max(most, trace.seen), at + 1
    assert most >= 14 and len(ENDS[RUN]) >= 14  # the prompt's turn (8 points) and a round's (6) at least
