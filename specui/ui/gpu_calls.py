"""A showcase's runs under ZeroGPU: each request's speculative and plain runs inside one GPU allocation
(`GpuCalls`), and the Teach tab's model work, each action in one allocation (`GpuWork`).

`specui.spaces.gpu` is ZeroGPU's decorator on a ZeroGPU Space and a plain call elsewhere.
"""

from __future__ import annotations

import itertools
import threading
from collections import deque
from collections.abc import Iterator, Sequence

from specui.spaces import gpu, zero_gpu
from specui.ui.pages import Paced
from specui.ui.request import Settings


class GpuCalls:
    """A showcase's runs, each under one ZeroGPU allocation when the app runs on a ZeroGPU Space (a plain
    call elsewhere): the speculative run and, in compare mode, the plain run are timed inside the same call.

    ZeroGPU pickles a call's arguments and results, and a showcase (models, locks) or an Event does not
    pickle: they stay in this object (`live`, key -> stop event of the calls in flight) and the decorated
    call (`on_gpu`) carries only the key and plain data.
    """

    def __init__(self, showcase, *, duration: int = 180):
        self.showcase = showcase
        self.live: dict[int, threading.Event | None] = {}
        self.paced: dict[int, Paced] = {}  # key -> the pacing of the calls in flight that a page reads (`decode`)
        self._keys = itertools.count()
        self.on_gpu = gpu(duration=duration)(self._serve)
        self.apart = zero_gpu()  # the decorated call runs in a worker process, where a Stop set here is not seen
        # the pages closed since the last call (`Showcase.forget`): under ZeroGPU the worker holds the conversations'
        # caches, and hears of them with the next call (no allocation of their own); the most recent are enough, as
        # the worker keeps a few caches at most (`cache_pool.GPU_CACHES`)
        self.gone: deque[str] = deque(maxlen=64)
        self._gone_guard = threading.Lock()

    def forget(self, owner: str) -> None:
        """`owner`'s page is closed: its conversation's caches in the worker go with the next call (under ZeroGPU)."""
        if self.apart:
            with self._gone_guard:
                self.gone.append(owner)

    def decode(self, prompt: str, settings: Settings, *, history: Sequence[dict] = (),
               stop: threading.Event | None = None, figures: bool = True, owner: str | None = None,
               page: bool = False) -> Iterator[tuple]:
        """The run's (frame, run) pairs; `page`: a page reads them, and says which it drew (`Paced`, here in the
        server's process, where the page's word arrives: a worker never hears it). Other clients (the API, gradio's
        client) are sent every frame the throttle lets through, unmarked."""
        key = next(self._keys)
        self.live[key] = stop
        paced = self.paced[key] = Paced(self.showcase.pages) if page else None
        with self._gone_guard:
            gone = list(self.gone)
            self.gone.clear()
        calls = self.on_gpu(key, prompt, settings, list(history), figures, owner, gone)
        heard = False  # whether the worker ran (a call ZeroGPU refuses, a quota spent, raises before any frame)

        def ran() -> Iterator[tuple]:  # the call's frames, each one (sent to the page or not) hearing a Stop
            nonlocal heard
            for frame, run in calls:
                heard = True
                yield frame, run
                if self.apart and stop is not None and stop.is_set() and not frame.done:
                    # the worker's copy of `stop` never hears it: end its call (ZeroGPU stops the worker of a
                    # generator its caller closes) and say so here, from the run as it last stood
                    calls.close()
                    run.phase = "stopped"
                    yield self.showcase.frame(run, figures=figures, final=True), run
                    return

        frames = paced.frames(ran()) if paced else ran()
        try:
            yield from frames
        finally:
            frames.close()
            calls.close()
            self.live.pop(key, None)
            self.paced.pop(key, None)
            if gone and not heard:  # the next call takes them (forgetting twice is harmless), the newest kept
                with self._gone_guard:
                    self.gone = deque([*gone, *self.gone], maxlen=self.gone.maxlen)

    def _serve(self, key: int, prompt: str, settings: Settings, history: list[dict],
               figures: bool = True, owner: str | None = None, gone: Sequence[str] = ()) -> Iterator[tuple]:
        # on ZeroGPU this runs in a worker process forked once and reused while idle: its copy of `live` is the
        # fork's, without the keys of later calls (their lookup was a KeyError: every request after the first
        # failed), and a Stop set in the server never reaches it
        for closed in gone:  # the caches of pages closed since the last call, held here (nothing elsewhere)
            self.showcase.forget_here(closed)
        stop = self.live.get(key) or threading.Event()
        paced = self.paced.get(key)  # in this process, a frame the page is not ready for is not even rendered
        yield from self.showcase.run(prompt, settings, history=history, stop=stop, figures=figures, owner=owner,
                                     due=paced.ready if paced else None)


class GpuWork:
    """Model work under one ZeroGPU allocation per call (a plain call elsewhere): `work(task, *args)` yields what
    `task(holder, *args)` yields, each Teach action that runs a model being one such call (`specui.ui.teach_work`).

    ZeroGPU pickles the arguments and each yielded value: `task` is a module-level function (pickled by its name),
    `args` and what it yields are plain data, never a component, a lock or a model. The call runs in a worker process
    forked from the server after the app was built, which holds its own copy of `holder` (e.g. the loaded pairs)."""

    def __init__(self, holder, *, duration: int = 180):
        self.holder = holder
        self.on_gpu = gpu(duration=duration)(self._serve)

    def __call__(self, task, *args) -> Iterator:
        calls = self.on_gpu(task, args)
        try:
            yield from calls
        finally:
            calls.close()

    def _serve(self, task, args: tuple) -> Iterator:
        yield from task(self.holder, *args)
