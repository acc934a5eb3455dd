"""The Stop button's bookkeeping, per browser session (`Stops`): the chat's run in flight and the messages that wait
for their turn in the queue, which Stop, the queue's refusal and a closed tab each end. No gradio here: the Chat tab's
handlers (`chat_handlers`) call it with a page's session hash.
"""

from __future__ import annotations

import threading


class Stops:
    """The Stop button's events, per browser session: the run in flight, and those that wait for their turn in the
    queue (in the queue's order). Stop sets them all: the run ends at its next round, a waiting one when it starts."""

    def __init__(self):
        self._events: dict[str, threading.Event] = {}
        self._waiting: dict[str, list[threading.Event]] = {}
        self._shown: dict[str, list] = {}  # the chat as its newest waiting message left it, per session
        self._guard = threading.Lock()

    def wait(self, key: str, shown: list | None = None) -> None:
        """A run was asked for (`waiting`) and waits for its turn; `shown`: the chat as that left it."""
        with self._guard:
            self._waiting.setdefault(key, []).append(threading.Event())
            self._shown[key] = shown

    def start(self, key: str) -> threading.Event:
        """The run's event: the one it waited with (set if Stop was pressed meanwhile), else a new one (an API
        call, which does not wait first)."""
        with self._guard:
            queue = self._waiting.get(key)
            self._events[key] = event = queue.pop(0) if queue else threading.Event()
            if queue == []:
                del self._waiting[key]
        return event

    def newer(self, key: str) -> bool:
        """Whether this session asked for another run after the one that started last (it waits for its turn)."""
        with self._guard:
            return bool(self._waiting.get(key))

    def end(self, key: str, event: threading.Event) -> None:
        with self._guard:
            if self._events.get(key) is event:
                del self._events[key]
            if key not in self._waiting:
                self._shown.pop(key, None)

    def never_ran(self, key: str) -> list | None:
        """This session's newest run was refused as it joined the queue (gradio's "This application is currently
        busy": a ZeroGPU Space's queue is bounded): its wait ends here, as the run would have ended it. Returns the
        chat as its message left it (None: none waits)."""
        with self._guard:
            shown, queue = self._shown.get(key), self._waiting.get(key)
            if not queue:
                return None
            queue.pop()
            if not queue:
                del self._waiting[key]
                self._shown.pop(key, None)
        return shown

    def gone(self, key: str) -> None:
        """This session's page is gone (a closed tab): gradio dropped its runs that waited in the queue with it, so
        their waits end here (none would ever end them, and every visitor's message would then wait behind them),
        and its run in flight ends at its next round (nobody reads it)."""
        with self._guard:
            events = [self._events.get(key), *self._waiting.pop(key, ())]
            self._shown.pop(key, None)
        for event in events:
            if event is not None:
                event.set()

    def set(self, key: str) -> list | None:
        """Stop this session's runs. Returns the chat as its waiting message left it when one waits and none is in
        flight (the page shows at once that it stopped; the run says the same when its turn comes), else None."""
        with self._guard:
            events = [self._events.get(key), *self._waiting.get(key, ())]
            waits = events[0] is None and any(e is not None and not e.is_set() for e in events[1:])
            shown = self._shown.get(key) if waits else None
        for event in events:
            if event is not None:
                event.set()
        return shown

    def any_busy(self) -> bool:
        """Whether any session has a run in flight or waiting (a new one waits behind it: one runs at a time). Known
        here, in the server's process, where on ZeroGPU the runs themselves go on in another."""
        with self._guard:
            return bool(self._events) or any(not e.is_set() for q in self._waiting.values() for e in q)

    def busy(self, key: str) -> bool:
        """Whether this browser session has a run in flight, or one waiting that Stop has not stopped."""
        with self._guard:
            return key in self._events or any(not e.is_set() for e in self._waiting.get(key, ()))
