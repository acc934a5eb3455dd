"""One request, start to end: load the preset's pair, encode the prompt, run the speculative engine
(and in compare mode the target alone, afterwards, never overlapping; in arena mode plain decoding and
then every drafter of the preset, one after another: `specui.arena`) and yield throttled `Frame`s
for the UI, drawn by `chat_view`. No gradio here: `blocks` turns frames into component updates, the API
turns the final state into a dict, and the tests drive it directly.

Errors people can fix (bad settings, a prompt too long, a model that fails to load) end the run with
a readable `Frame.error`; nothing here lets a traceback reach the page.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
import weakref
from collections.abc import Iterator, Sequence
from dataclasses import replace

from specui import arena, lesson, spaces
from specui.engine import ContextLengthError
from specui.loading import LoadError
from specui.prompt_cache import chat_history, leave_out_oldest, turn_ids
from specui.text import TokenText, not_unicode, reading_note
from specui.tree_steps import tree_record
from specui.ui import chat_view, render, runs, stats
from specui.ui.gpu_calls import GpuCalls
from specui.ui.pages import Pages
from specui.ui.request import Settings
from specui.ui.runs import Frame, Run

log = logging.getLogger("specui.ui")


# A streamed reply's markup the page is sent per second at most. The browser reads each frame's reply whole (a chat's
# goes on the wire as what it gained: `render.render_reply`): an arena of 512 tokens is 1.3 MB of spans, which ten
# frames a second kept a browser on a 2-core machine busy throughout, a click on Stop waiting up to half a minute
# (tools.page_lag). Frames of a large reply come less often; a chat's reply (tens of kB) streams at the interval.
# A page slower still (a loaded machine): a frame also waits until it has drawn all but the last one sent (`Paced`).
FRAME_BYTES_PER_S = 1_000_000


class Throttle:
    """True at most once per `interval` seconds, or per `hold` seconds where that is longer; `first=False`: False on
    its first call whenever it comes, True on the next."""

    def __init__(self, interval: float, *, first: bool = True):
        self.interval, self.last, self.hold, self.skip = interval, float("-inf"), 0.0, not first

    def __call__(self) -> bool:
        if self.skip:
            self.skip = False
            return False
        now = time.monotonic()
        if now - self.last >= max(self.interval, self.hold):
            self.last = now
            return True
        return False


class Showcase:
    """The app's state: the config, the loaded pairs, one lock per pair. `run` serves one request."""

    def __init__(self, config, cache, *, text_interval: float = 0.1, chart_interval: float = 0.7):
        self.config, self.cache = config, cache
        self.text_interval, self.chart_interval = text_interval, chart_interval
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()
        self._warm: list[weakref.ref] = []  # the pairs that have run once (weak: an evicted pair goes)
        self._pools: weakref.WeakSet = weakref.WeakSet()  # the pairs' conversation caches runs have picked from
        self.live = 0  # runs in flight (started and neither finished, stopped nor closed)
        self.calls = GpuCalls(self)  # requests under ZeroGPU (a plain call elsewhere)
        self.pages = Pages()  # what each run's page has drawn: a frame waits for the last but one
        self._start_failed: tuple[str, str] | None = None  # the preload's preset and its error, until it loads
        self._starting = threading.Event()  # set while the starting preset preloads (`preload_soon`, `preload`)

    def lock(self, preset_name: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(preset_name, threading.Lock())

    def _load(self, preset) -> Iterator[str]:
        """Load (or fetch from the cache) a preset's pair on a worker thread, yielding its progress lines;
        returns the pair (raises LoadError)."""
        lines: queue.Queue = queue.Queue()
        box: dict = {}

        def work():
            try:
                box["pair"] = self.cache.get(preset, progress=lambda line: lines.put(
                    line + ("…" if line.startswith("Loading") else "")))
            except BaseException as e:  # re-raised on the request's thread
                box["error"] = e
            finally:
                lines.put(None)

        threading.Thread(target=work, daemon=True, name=f"specui-load-{preset.name}").start()
        while (line := lines.get()) is not None:
            yield line
        if "error" in box:
            error = box["error"]
            if isinstance(error, LoadError):
                raise error
            raise LoadError(f"Preset '{preset.name}' could not be loaded: {type(error).__name__}: {error}")
        if self._start_failed and self._start_failed[0] == preset.name:  # it loads now (the Hub back, say)
            self._start_failed = None
        return box["pair"]

    def encode(self, pair, prompt: str, history: Sequence[dict], system: str = "") -> list[int]:
        """The prompt's ids: in the chat template after the system message (if any) and the history (the answers
        as the tokens the model wrote, where the history has them: `chat_ids`), or the text alone for a base
        model."""
        messages = [*chat_history(history, self._continues), {"role": "user", "content": prompt}]
        return turn_ids(pair.tokenizer, pair.preset, messages, system=system)

    def chats(self, preset_name: str | None) -> bool | None:
        """Whether a preset of this config (None: its default) wraps messages in a chat template; None when the
        config holds no such preset."""
        try:
            return bool(self.config.get(preset_name).chat_template)
        except ValueError:
            return None

    def _continues(self, preset_name: str | None) -> bool:
        """Whether an answer's preset is a base model (no chat template): its exchanges are no conversation. An answer
        that names none, or a preset no longer in the config, is kept."""
        return preset_name is not None and self.chats(preset_name) is False

    def run(self, prompt: str, settings: Settings, *, history: Sequence[dict] = (),
            stop: threading.Event | None = None, figures: bool = True,
            owner: str | None = None, due=None) -> Iterator[tuple[Frame, Run]]:
        """Yield (frame, run) as the request goes; the last frame has done=True. `figures=False` (the API)
        builds no charts. Setting `stop` (or closing this generator) ends the run at the next round. owner: whose
        conversation it is (a page's session), so that another's new chat does not take its cache (`PromptCaches`).
        due: whether a streamed frame would be sent now (`pages.Paced.ready`; None: whenever the throttle says)."""
        with self._guard:
            self.live += 1
        try:
            yield from self._run(prompt, settings, history=history, stop=stop or threading.Event(), figures=figures,
                                 owner=owner, due=due or (lambda: True))
        finally:
            with self._guard:
                self.live -= 1

    def _run(self, prompt, settings, *, history, stop, figures, owner=None, due) -> Iterator[tuple[Frame, Run]]:
        run = Run(settings)

        def fail(message: str):
            run.error, run.phase = message, "done"
            return Frame(message=render.render_error(message), stats=stats.stats_html(None, status="Error"),
                         done=True, error=message), run

        if not prompt or not prompt.strip():
            yield fail("Type a prompt first.")
            return
        if problem := _not_text({"prompt": prompt, "system prompt": settings.system}):
            yield fail(problem)
            return
        try:
            preset = self.config.get(settings.preset)
        except ValueError as e:  # ConfigError
            yield fail(str(e))
            return
        run.preset = preset.name  # known now: a Stop while it loads keeps a reply that names it (`reply_message`)
        loading = self._load(preset)
        try:
            while True:
                line = next(loading)  # progress lines while the pair loads (nothing when it is cached)
                yield Frame(message=render.render_note(line), stats=stats.stats_html(None, status=line)), run
        except StopIteration as done:
            pair = done.value
        except LoadError as e:
            log.warning("%s", e)  # the whole error, for whoever runs the app; a Space's visitor is told less
            yield fail(spaces.load_failure_said(preset.name, e))
            return
        try:
            ids = self.encode(pair, prompt, history, settings.system)
        except Exception as e:  # e.g. a tokenizer without a chat template
            log.exception("encoding the prompt")
            yield fail(f"The prompt could not be encoded: {type(e).__name__}: {e}")
            return
        engine = pair.engine()
        try:
            try:
                streams = self._open(run, engine, ids, preset, pair, owner)
            except ContextLengthError as e:  # a chat's earlier turns fill the context: the oldest are left out
                if not (history and pair.preset.chat_template and e.limit):
                    raise
                ids, run.left_out = leave_out_oldest(
                    history, lambda kept: self.encode(pair, prompt, kept, settings.system), limit=e.limit,
                    new_tokens=settings.decode.max_new_tokens)
                run.context = e.limit
                streams = self._open(run, engine, ids, preset, pair, owner)
        except ValueError as e:  # bad settings, ContextLengthError
            yield fail(str(e))
            return
        lock = self.lock(preset.name)
        text_due = Throttle(self.text_interval)
        # the first token's frame goes without charts: four plotly figures built and drawn held it back (0.3 s in the
        # page, tools.page_latency), however long the warm-up and the prompt's reading took; the next frame has them,
        # or the page would show the last run's charts beside this run's tokens until `chart_interval` had passed
        chart_due = Throttle(self.chart_interval, first=False) if figures else (lambda: False)
        try:
            if not self.warmed(pair):  # seconds the page would spend on the load's "Ready" (the chat preset: 1-3 s)
                yield Frame(message=render.render_note(chat_view.WARMING),
                            stats=stats.stats_html(None, status=chat_view.WARMING)), run
            self.warm_up(engine, pair, ids)
            if settings.arena:  # the drafters the pair's warm-up did not run, with the arena's settings
                arena.warm_up(engine, ids, settings.decode, lock=lock, ks=dict(preset.drafter_tokens),
                              confidences=dict(preset.draft_confidence))
            if line := reading_note(run.reading):  # a long message: seconds before its first token, said as they pass
                lead = render.render_note(run.left_out_note)  # first, in its place in the reply's frames (no jump)
                message = f'<div class="specui-out">{lead}{render.render_note(line)}</div>'
                yield Frame(message=message, stats=stats.stats_html(None, status=line)), run
            for phase, result, views, stream in streams:  # one run at a time
                run.phase = phase
                yield from self._drive(run, stream, result, pair, ids, views, lock, stop, due, text_due, chart_due)
                if run.phase == "stopped":
                    break
        except Exception as e:  # a model failing mid-run: say so, keep serving
            log.exception("generation failed")
            yield fail(f"Generation failed: {type(e).__name__}: {e}")
            return
        if run.phase != "stopped":
            run.phase = "done"
        yield self.frame(run, figures=figures, final=True), run

    def _open(self, run: Run, engine, ids, preset, pair, owner=None):
        # the earlier turns' target cache (the arena runs without one), picked only for a prompt the engine takes: a
        # pick makes room for the prompt, letting other conversations' caches go (the stream is not started)
        run.reading = len(ids)
        if run.settings.arena:
            return runs.streams(run, engine, ids, preset)
        engine.stream(ids, run.settings.decode.but(speculative=True))  # ContextLengthError before any pick
        self._pools.add(pair.conversations)
        cache = pair.conversations.pick(ids, pair.target, owner=owner)
        run.reading -= 0 if cache is None else cache.reusable(ids, pair.target)
        return runs.streams(run, engine, ids, preset, cache)

    def forget(self, owner: str) -> None:
        """`owner`'s conversations are over (a closed tab: no page holds them any more): their target caches go,
        rather than fill the memory budget until newer ones push them out (`PromptCaches.forget`)."""
        if owner:  # the API's runs have no owner, and share their caches
            self.forget_here(owner)
            self.calls.forget(owner)  # under ZeroGPU the worker's copies go with the next request's call

    def forget_here(self, owner: str) -> None:
        """`forget` in this process alone."""
        for pool in list(self._pools):
            pool.forget(owner)

    def preload_soon(self, preset, *, progress=None) -> None:
        """`preload` on a thread of its own (`specui-preload`), marked as loading from now on: a page that opens before
        the thread has begun is told to ask again (`starting`), not that all is well."""
        self._starting.set()
        threading.Thread(target=self.preload, args=(preset,), kwargs={"progress": progress}, daemon=True,
                         name="specui-preload").start()

    def starting(self) -> bool:
        """Whether the starting preset is still preloading: what `start_problem` says is not known yet."""
        return self._starting.is_set()

    def preload(self, preset, *, progress=None) -> None:
        """Load `preset`'s pair and warm it up (the app does this in the background as it starts), so the first
        request neither waits for the load nor for first-call allocations (about 1.2 s for the chat preset on a
        CPU). `progress` receives the load's lines. A failure is logged and kept for the pages that open
        (`start_problem`); a request shows it again.

        On a ZeroGPU Space call it on the thread that imported `spaces`, before the server starts (app.py does): the
        pair loads there, where the package fakes CUDA (`spaces.loading_for_zero_gpu`), once, and the worker process
        of every GPU call, Chat's and Teach's alike, forks with it. Not warmed up: no GPU exists outside a call."""
        self._starting.set()
        try:
            if spaces.zero_gpu():
                with spaces.loading_for_zero_gpu():
                    self.cache.get(preset, progress=progress)
                return
            pair = self.cache.get(preset, progress=progress)
            self.warm_up(pair.engine(), pair, self.encode(pair, "Hello!", []))
        except Exception as e:  # the log has the error and its advice, for whoever runs the app (a Space's owner)
            log.warning("could not preload preset %s: %s", preset.name, e)
            self._start_failed = (preset.name, str(e))
        finally:
            self._starting.clear()  # after the failure is kept: a page that asks then is told it

    def start_failure(self) -> tuple[str, str] | None:
        """(the starting preset's name, its error) when its preload failed; None: it loaded, or loads still, or
        loaded since."""
        failed = self._start_failed
        if failed and self.cache.holds(failed[0]):  # loaded since: the Teach tab's Decode too
            self._start_failed = failed = None
        return failed

    def start_problem(self) -> str | None:
        """What whoever runs the app is told of the starting preset that did not load, the error's advice included
        (None: it loaded, or loads still, or loaded since). A Space's visitors are told less (`start_notice`)."""
        if (failed := self.start_failure()) is None:
            return None
        name, error = failed
        named = "" if f"'{name}'" in error else f" ('{name}')"  # a LoadError names it already
        return (f"The preset this app starts on{named} did not load: {error} Another preset from the menu may load; "
                "this one is tried again when a message is sent with it.")

    def warmed(self, pair) -> bool:
        """Whether `pair` has run once (`warm_up`)."""
        with self._guard:
            self._warm = [ref for ref in self._warm if ref() is not None]
            return any(ref() is pair for ref in self._warm)

    def warm_up(self, engine, pair, ids) -> None:
        """Run both paths once on a fresh pair (chat and Teach tab alike), so first-call allocations are
        not timed as decoding."""
        if self.warmed(pair):
            return
        lesson.warm_up(engine, ids, lock=self.lock(pair.preset.name))
        with self._guard:
            self._warm.append(weakref.ref(pair))

    def _drive(self, run, stream, result, pair, ids, views, lock, stop, due, text_due, chart_due):
        decoder, special = TokenText(pair.tokenizer, ids), frozenset(pair.tokenizer.all_special_ids)
        clock = None  # engine seconds: prefill, then each round's draft and verify time
        try:
            while True:
                if stop.is_set():
                    run.phase = "stopped"
                    break
                with lock:  # one generation step at a time per model pair; never held across a yield
                    rnd = next(stream, None)
                if rnd is None:
                    break
                clock = (result.prefill_s if clock is None else clock) + rnd.draft_s + rnd.verify_s
                views.extend(render.round_views(rnd, decoder.push, decoder.peek, time_s=clock, special=special))
                if rnd.tree is not None and result is run.spec:  # a tree round: its tree, with texts, for the tree view
                    run.trees[rnd.index] = tree_record(rnd, tokenizer=pair.tokenizer, greedy=run.settings.greedy,
                                                       context_ids=ids + result.token_ids[: -len(rnd.token_ids)])
                if due() and text_due():
                    frame = self.frame(run, figures=chart_due())
                    text_due.hold = len(frame.message) / FRAME_BYTES_PER_S
                    yield frame, run
        finally:
            stream.close()
        rest = decoder.flush()
        if rest and views:
            last = views[-1]
            views[-1] = replace(last, text=last.text + rest)

    @staticmethod
    def frame(run: Run, *, figures: bool = False, final: bool = False) -> Frame:
        """Render the run as it stands (`chat_view.frame`)."""
        return chat_view.frame(run, figures=figures, final=final)


def decode(showcase: Showcase, prompt: str, settings: Settings, *, history: Sequence[dict] = (),
           stop: threading.Event | None = None, figures: bool = True, owner: str | None = None,
           page: bool = False) -> Iterator[tuple[Frame, Run]]:
    """`showcase.run` under one ZeroGPU allocation (see `GpuCalls`); `page`: paced by what the page drew (`Paced`)."""
    return showcase.calls.decode(prompt, settings, history=history, stop=stop, figures=figures, owner=owner,
                                 page=page)


def _not_text(texts: dict[str, str]) -> str | None:
    """What makes one of `texts` (name -> text) no Unicode text a tokenizer reads (None: nothing): an API client's JSON
    may hold a lone surrogate ("\\ud800"), which no tokenizer encodes (it raised a TypeError naming its own types)."""
    problems = (not_unicode(text, f"The {name}") for name, text in texts.items())
    return next((f"{p}; send the text as UTF-8" for p in problems if p), None)
