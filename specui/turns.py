"""The engine's turns: runs on several threads take the engine one round at a time, first come, first served.

A plain lock is unfair in CPython: the thread that releases it runs on and takes it again before a waiting thread
has woken, so one run could take twenty rounds in a row while another waited. Here each turn queues behind the one
asked before it (a CLH queue of locks): a thread asking for a turn holds a fresh lock, its place, for as long as it
waits and runs, and first waits until the place before it is given up. With two runs, their rounds alternate; with
more, a run that asked waits at most one turn of each run that asked before it.

Used as two items of one `with` statement, both C locks that the statement itself takes and gives back:

    with turns.place(), turns.take():
        ...  # the turn

`place()` only makes the lock; the statement takes it; `take()` then joins the line and waits for the place before
it, and returns the turn's own lock (a `threading.RLock`), which the statement takes. So a Ctrl-C anywhere, while
waiting in line included, leaves nothing held: every lock is given back by the `with` statement, never by Python
code that a KeyboardInterrupt could cut short (tests/engine/test_turns_interrupt.py). A place given up that way
lets the next in line go to the turn's lock at once: the order may slip, never the one-at-a-time.

Alone, a turn is uncontended lock acquires and no wait. A turn taken within the thread's own turn (a drafter that
runs the engine) goes straight in, as with a reentrant lock.
"""

from __future__ import annotations

import threading


class Turns:
    """One engine's turns (see the module's docstring): `with turns.place(), turns.take(): ...`."""

    def __init__(self) -> None:
        self._lock = threading.RLock()  # the turn itself: one thread at a time, reentrant
        self._line = threading.Lock()  # guards `_last`
        self._last: threading.Lock | None = None  # the place of the latest thread to join the line
        self._mine = threading.local()  # each thread's place, from place() to take()

    def place(self) -> threading.Lock:
        """A fresh place in line for this thread: a lock, free until the `with` statement takes it."""
        self._mine.place = place = threading.Lock()
        return place

    def take(self) -> threading.RLock:
        """Join the line with this thread's place (taken), wait until the place before it is given up, and return
        the turn's lock for the `with` statement to take. Within its own turn, the thread goes straight in."""
        if self._lock._is_owned():  # a turn within this thread's turn: waiting in line would wait for itself
            return self._lock
        with self._line:
            before, self._last = self._last, self._mine.place
        if before is not None and before.locked():  # the thread before is in its turn or waits for it
            with before:
                pass
        return self._lock
