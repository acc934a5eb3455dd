"""The engine's turns: runs on several threads take the engine one round at a time, first come, first served.

A plain lock is unfair in CPython: the thread that releases it runs on and takes it again before a waiting thread
has woken, so one run could take twenty rounds in a row while another waited. Here each turn queues behind the one
asked before it (a CLH queue of locks): a thread asking for a turn holds a fresh lock, its place, for as long as it
waits and runs, and first waits until the place before it is given up. With two runs, their rounds alternate; with
more, a run that asked waits at most one turn of each run that asked before it.

Used as three items of one `with` statement, all C locks that the statement itself takes and gives back:

    place, mark = turns.place()
    with mark, place, turns.take(place, mark):
        ...  # the turn

`place()` only makes two free locks: the place in line, which the threads behind wait for, and a mark that only this
thread ever takes, held from before it joins the line until its place is given up (the statement gives its items back
last first: a mark given back before the place left a point where the thread's place was held, but no turn of its was
under way, and a turn asked for there waited for that place, its own, for good). `take()` then joins the line and waits
for the place before it, and returns the turn's own lock (a `threading.RLock`), which the statement takes. So a Ctrl-C
anywhere, while waiting in line included, leaves nothing held: every lock is given back by the `with` statement, never
by Python code that a KeyboardInterrupt could cut short (tests/engine/test_turns_interrupt.py). A place given up that
way lets the next in line go to the turn's lock at once: the order may slip, never the one-at-a-time.

Alone, a turn is uncontended lock acquires and no wait. A turn asked for while the thread's own is under way (its mark
held: a drafter that runs the engine within its round; a signal handler or a finaliser that runs one while the thread
waits in line, or between its turn's end and its place's) goes to the turn's lock at once, without a place in line,
which would wait for the thread's own place: within its turn it goes straight in, as with a reentrant lock; in line, it
waits only for the turn under way. Whether a mark is held is public (`Lock.locked()`) and exact, as no other thread
takes it (a place is: the one behind takes it as it goes).

Loads take turns too, one at a time in a process (`specui.loading.load_pair`, `PairCache`): `in_turn` with a
`LoadTurn`, a lock without a line (loads are few) and a note of whose turn it is, which says when a load waits and
refuses one asked for within the thread's own.
"""

from __future__ import annotations

import threading
from collections.abc import Callable


class Turns:
    """One engine's turns (see the module's docstring): `with mark, place, turns.take(place, mark): ...`."""

    def __init__(self) -> None:
        self._lock = threading.RLock()  # the turn itself: one thread at a time, reentrant
        self._line = threading.Lock()  # guards `_last`
        self._last: threading.Lock | None = None  # the place of the latest thread to join the line
        self._mine = threading.local()  # `marks`: each thread's marks, those of its turns under way

    @staticmethod
    def place() -> tuple[threading.Lock, threading.Lock]:
        """A fresh place in line and a mark for this thread: two locks, free until the `with` statement takes them."""
        return threading.Lock(), threading.Lock()

    def take(self, place: threading.Lock, mark: threading.Lock) -> threading.RLock:
        """Join the line with `place` (taken), wait until the place before it is given up, and return the turn's lock
        for the `with` statement to take. With another turn of this thread under way (in line or in its turn: its
        mark held), no place in line: the turn's lock at once."""
        mine = self._mine
        under_way = [held for held in getattr(mine, "marks", ()) if held.locked()]  # this thread's: taken by it
        mine.marks = [*under_way, mark]  # those given back are left out: one a turn, at most
        if under_way:  # waiting in line behind its own place would wait for itself
            return self._lock
        with self._line:
            before, self._last = self._last, place
        if before is not None and before.locked():  # the thread before is in its turn or waits for it
            with before:
                pass
        return self._lock


class LoadTurn:
    """One load at a time (`in_turn`): a re-entrant lock, whose release raises unless this thread took it, and the
    thread that holds it for a load (`owner`: its id, None between loads), noted and cleared by plain stores."""

    __slots__ = ("lock", "owner")

    def __init__(self) -> None:
        self.lock, self.owner = threading.RLock(), None


WAITING = "Waiting for another model's load to finish"


def in_turn(turn: LoadTurn, say: Callable[[str], None], work: Callable[[], object]):
    """`work()` once this thread holds `turn`, given back however it ends; `say(WAITING)` first when another thread
    holds it as this one asks. Asked by taking it: a look before taking (`locked()`) missed a load that took it in
    between, which was then waited for unannounced, or announced one that ended meanwhile. A Ctrl-C anywhere gives it
    back: taken and given back in one `try`, and a re-entrant lock's release raises unless this thread took it. A turn
    asked for within this thread's own (a `say` that loads) is refused: it went through, a pair loaded amid another.
    `owner` says whose turn it is: noted once the lock is taken, and cleared in the `finally` with no call before the
    release (a Ctrl-C, which comes only as a call returns, cannot leave it noted for a turn given back). A load that
    a signal handler asks for just as the lock's taking returns, before the note, goes through: whole, before this
    turn's `work()` begins, so not amid it."""
    me = threading.get_ident()
    if turn.owner == me:  # asked by the thread whose turn it is: it would wait for itself with a plain lock
        raise RuntimeError("a model's load was asked for within another load on the same thread (a progress function "
                           "that loads?): load one after the other")
    try:
        if not turn.lock.acquire(blocking=False):
            say(WAITING)
            turn.lock.acquire()
        turn.owner = me
        return work()
    finally:  # nothing is called before the release here: no Ctrl-C comes in between
        if turn.owner == me:
            turn.owner = None
        try:
            turn.lock.release()
        except RuntimeError:  # never taken: a Ctrl-C (or the say function's error) came first
            pass
