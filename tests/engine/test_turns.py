"""Fair turns on one engine (specui/turns.py): two runs streaming from two threads at once, on real (tiny, random)
models, take the engine's rounds in order of asking, so a run that asked for its next round waits for at most one
round of the other; each run's tokens are still what it gives alone (greedy: plain decoding's; sampled: its seed's).
With a plain lock the thread that ended a round took the next one before the waiting thread woke: 5 to 60 rounds
in a row while the other waited. A run alone waits for no one; a turn taken within the thread's own turn (a drafter
that runs the engine) goes straight in, as with the reentrant lock before. On bare turns, without a model: three
threads take turns in the order they asked, and the next in line waits for the outer turn of one within which a turn
was taken."""

from __future__ import annotations

import inspect
import sys
import threading
import time
from pathlib import Path

import pytest

import specui
from specui import SpeculativeEngine
from specui.drafters import PromptLookupDrafter
from specui.turns import Turns
from tests.engine.test_interrupt_windows import with_exits
from tests.engine.test_library_threads import WAIT, at_once
from tests.helpers import make_model, noisy_copy

PROMPTS = ([5, 17, 3, 88, 41, 9, 5, 17], [60, 2, 33, 71, 8, 60, 2, 90, 14])
ROUNDS = 60  # each run's rounds (one token each: its drafter's proposals never match)


@pytest.fixture(scope="module")
def engine():
    target = make_model("llama", layers=2, seed=3)
    return SpeculativeEngine(target, noisy_copy(target, noise=0.2, seed=4))


class Logged(PromptLookupDrafter):
    """A drafter that proposes nothing (each round is one target token) and notes, inside the engine's turn, which
    run's round began."""

    def __init__(self, log: list, name: str):
        super().__init__()
        self.log, self.name = log, name

    def propose(self, context, k):
        self.log.append(("round", self.name))
        return super().propose(context, 0)


def longest_wait(log: list) -> int:
    """The most rounds of the other run that began between a run's asking for a round (its last ask before it) and
    that round."""
    most, asked = 0, {}  # run -> the other's rounds begun since its last ask
    for what, name in log:
        if what == "ask":
            asked[name] = 0
        else:
            most = max(most, asked.pop(name, 0))
            for other in asked:
                asked[other] += 1
    return most


def lines_of(function, test) -> tuple:
    """(function's code, the numbers of its lines whose text passes `test`)."""
    source, first = inspect.getsourcelines(function)
    return function.__code__, {first + i for i, line in enumerate(source) if test(line.strip())}


# where a run asks for its turn: the engine's `with` line (with a plain lock, it waits there), and with the line of
# turns, the line after it joined the line (the order holds from there; from the `with` line to there, the OS may
# leave the thread unscheduled for a while, on a loaded machine)
ASKS = dict([lines_of(SpeculativeEngine._run, lambda line: line.startswith("with ") and "inference_mode()" in line),
             lines_of(Turns.take, lambda line: "before.locked()" in line)])
EXITS = {code: with_exits(code) for code in ASKS}  # a `with` block's end runs on its first line again


class Asks:
    """A trace function that notes in `log` when a thread's run asks for its turn (a round's, or the prompt's read:
    the `with` line, then, with the line of turns, its place in line)."""

    def __init__(self, log: list, names: dict):
        self.log, self.names = log, names  # names: thread id -> the run's name

    def __call__(self, frame, event, arg):
        return self.line if frame.f_code in ASKS else None

    def line(self, frame, event, arg):
        if event == "line" and frame.f_lineno in ASKS[frame.f_code] and frame.f_lasti not in EXITS[frame.f_code]:
            self.log.append(("ask", self.names[threading.get_ident()]))
        return self.line


IN_LINE = lines_of(Turns.take, lambda line: line.startswith("with before"))  # where a turn waits for the one before


def until(done, thread: threading.Thread, what: str) -> None:
    """Return once `done()`; fail if `thread` ends first or WAIT s pass ("a never took its turn", ...)."""
    deadline = time.monotonic() + WAIT
    while not done():
        assert thread.is_alive() and time.monotonic() < deadline, what
        threading.Event().wait(0.001)


def in_line(thread: threading.Thread) -> None:
    """Return once `thread` waits in line (in take(), for the place before its own); fail if it does not in WAIT s."""
    code, lines = IN_LINE

    def waits() -> bool:
        frame = sys._current_frames().get(thread.ident)
        return frame is not None and frame.f_code is code and frame.f_lineno in lines
    until(waits, thread, "it never waited in line")


def started(run) -> threading.Thread:
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def ended(*threads: threading.Thread) -> None:
    for thread in threads:
        thread.join(WAIT)
    assert not any(thread.is_alive() for thread in threads), "a thread is stuck in line"


def test_three_threads_take_turns_in_the_order_they_asked():
    """Bare turns, no model: a holds the turn; b, then c, ask and wait in line; a, its turn over, asks again at once
    and goes after c. A take() that skipped the wait, or that waited for its own place, fails here, in bounded time
    and without a model."""
    turns, order, go = Turns(), [], threading.Event()

    def turn(name: str, hold: bool = False) -> None:
        place, mark = turns.place()
        with mark, place, turns.take(place, mark):
            order.append(name)
            if hold:
                assert go.wait(WAIT)

    a = started(lambda: (turn("a", hold=True), turn("a")))
    until(lambda: order, a, "a never took its turn")
    b = started(lambda: turn("b"))
    in_line(b)
    c = started(lambda: turn("c"))
    in_line(c)
    go.set()
    ended(a, b, c)
    assert order == ["a", "b", "c", "a"]


def test_a_turn_within_a_turn_goes_in_while_the_next_in_line_waits_for_the_outer_one():
    """Bare turns: a, in its turn with b waiting in line behind it, takes a turn within its own (the outer turn's mark
    held): it goes straight in, and b goes only when a's outer
    turn ends. A take() that put the inner turn in line (behind b, who waits for a) fails here in bounded time; in
    test_a_turn_within_the_threads_own_turn_goes_straight_in it waited for its own outer place for good."""
    turns, order, go = Turns(), [], threading.Event()

    def a():
        place, mark = turns.place()
        with mark, place, turns.take(place, mark):
            order.append("a")
            assert go.wait(WAIT)
            inner, inner_mark = turns.place()
            with inner_mark, inner, turns.take(inner, inner_mark):
                order.append("a within")
            order.append("a ends")

    def b():
        place, mark = turns.place()
        with mark, place, turns.take(place, mark):
            order.append("b")

    first = started(a)
    until(lambda: order, first, "a never took its turn")
    second = started(b)
    in_line(second)
    go.set()
    ended(first, second)
    assert order == ["a", "a within", "a ends", "b"]


def run_logged(engine, prompt, log: list, name: str, names: dict, **settings) -> list[int]:
    names[threading.get_ident()] = name
    return engine.generate(prompt, drafter=Logged(log, name), max_new_tokens=ROUNDS, ignore_eos=True,
                           **settings).token_ids


@pytest.mark.parametrize("sampled", [False, True], ids=["greedy", "sampled"])
def test_two_threads_rounds_alternate_and_each_gets_what_it_gets_alone(engine, sampled):
    settings = dict(temperature=0.8, top_p=0.9, seed=11) if sampled else dict(temperature=0.0)
    log, names = [], {}
    alone = [run_logged(engine, prompt, [], "alone", names, **settings) for prompt in PROMPTS]
    if not sampled:
        assert alone == [engine.generate(p, speculative=False, max_new_tokens=ROUNDS, ignore_eos=True,
                                         temperature=0.0).token_ids for p in PROMPTS]
    threading.settrace(Asks(log, names))  # the threads at_once starts
    try:
        together = at_once([lambda i=i: run_logged(engine, PROMPTS[i], log, "ab"[i], names, **settings)
                            for i in (0, 1)])
    finally:
        threading.settrace(None)
    assert together == alone
    rounds = [name for what, name in log if what == "round"]
    assert rounds.count("a") == rounds.count("b") == ROUNDS
    # at most the other's round that was under way (with the plain lock, 5 to 60 here)
    assert longest_wait(log) <= 1, "".join(rounds)


class Lines:
    """A trace function that notes the source of the lines run in `function` on this thread."""

    def __init__(self, function):
        self.code = function.__code__
        source, first = inspect.getsourcelines(function)
        self.text, self.ran = {first + i: line.strip() for i, line in enumerate(source)}, set()

    def __call__(self, frame, event, arg):
        return self.line if frame.f_code is self.code else None

    def line(self, frame, event, arg):
        if event == "line":
            self.ran.add(self.text[frame.f_lineno])
        return self.line


def test_a_run_alone_waits_for_no_place_in_line(engine):
    """Alone, a turn never waits: take() joins the line, finds the place before it given up, and goes on."""
    seen = Lines(Turns.take)
    sys.settrace(seen)
    try:
        engine.generate(PROMPTS[0], max_new_tokens=5, temperature=0.0, ignore_eos=True)
    finally:
        sys.settrace(None)
    assert "before, self._last = self._last, place" in seen.ran
    assert "with before:" not in seen.ran


class Nested(PromptLookupDrafter):
    """A drafter that runs the same engine inside its round (plain decoding of a few tokens)."""

    def __init__(self, engine):
        super().__init__()
        self.engine, self.inner = engine, []

    def propose(self, context, k):
        self.inner.append(self.engine.generate(list(context[-4:]), speculative=False, max_new_tokens=2,
                                               temperature=0.0, ignore_eos=True).token_ids)
        return super().propose(context, k)


def test_a_turn_within_the_threads_own_turn_goes_straight_in(engine):
    """The engine's lock was reentrant: a drafter may run the engine inside its round. It still may, alone and with
    another thread waiting in line (which then waits for the whole round, the inner runs included)."""
    settings = dict(max_new_tokens=8, temperature=0.0, ignore_eos=True)
    plain = engine.generate(PROMPTS[0], speculative=False, **settings).token_ids
    alone = Nested(engine)
    assert engine.generate(PROMPTS[0], drafter=alone, **settings).token_ids == plain and alone.inner
    drafters = [Nested(engine), Nested(engine)]
    together = at_once([lambda d=d: engine.generate(PROMPTS[0], drafter=d, **settings).token_ids for d in drafters])
    assert together == [plain, plain]
    assert [d.inner for d in drafters] == [alone.inner, alone.inner]


PRIVATE = ("._is_owned(", "._release_save(", "._acquire_restore(")  # CPython's locks' private methods


def test_the_library_asks_its_locks_through_public_methods_only():
    """Whose turn it is (the engine's turns, a load's) was asked of `RLock._is_owned()`, a private method of CPython's
    locks that another Python need not have; now the turns note it themselves (`Lock.locked()` of a lock only its own
    thread takes, a load's `owner`)."""
    root = Path(specui.__file__).parent
    used = [f"{path.relative_to(root)}: {name}" for path in sorted(root.rglob("*.py"))
            for name in PRIVATE if name in path.read_text()]
    assert not used, used
