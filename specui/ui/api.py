"""The `/generate` API: one request decoded to the end and answered as a dict (for `gradio_client`).

The run decodes on a thread of its own (named `specui-generate-N`) while the endpoint, a coroutine,
awaits it. Gradio cancels an event by cancelling its asyncio task (a client's `job.cancel()`); a plain
function would leave its worker thread decoding to the end while the concurrency slot is handed to the
next request. Here the cancel sets the run's stop event, so the run ends at its next round, and the
endpoint waits for that before it lets the cancel through: the slot frees only once decoding stopped.
A client that vanishes without a cancel (a killed process, a dropped connection) is marked dead by Gradio (its
event's `alive`); the endpoint watches for that too (`client_alive`, every `POLL_S`) and stops the run the same way,
the slot freeing once the round in flight is done. Gradio marks it when the session's message stream
(/gradio_api/queue/data) drops; a client killed before it opened that stream (gradio_client opens it a moment after
its job joined the queue) is marked by `client_streams` when its heartbeat drops, the last stream it had.
A client gone with no stream open at all (a raw HTTP client killed right after its /queue/join) leaves nothing to
notice; it had its run decode to its end before the slot freed. A run whose session has had no stream open
(`client_streams.open_streams`: a heartbeat, a message stream, a /call read of its answer) for `UNHEARD_S` seconds
stops as a dead client's does: a live client holds one open (gradio_client its heartbeat from the start, the page
both), or opens its read within that grace (a /call client reads after its POST), however slowly it then reads.

The API builds no charts: it returns none (`figures=False`). The API page ("Use via API") names and describes each
parameter and the answer (`serve_generate`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import itertools
import threading
import time

import gradio as gr

from specui.drafters.registry import DRAFTER_NAMES, LABELS, name_of
from specui.presets import ConfigError
from specui.settings import (MAX_CONFIDENCE, MAX_DRAFT_TOKENS, MAX_NEW_TOKENS, MAX_REPETITION_PENALTY, MAX_SEED,
                             MAX_TEMPERATURE, MAX_TREE_NODES, MAX_TREE_WIDTH)
from specui.ui import client_streams
from specui.ui.request import MAX_SYSTEM_CHARS, MAX_TOP_K, SEEDS_DRAWN, Settings, SettingsError, said, seeded
from specui.ui.session import Showcase, decode

_names = itertools.count(1)


def decode_all(showcase: Showcase, prompt: str, settings: Settings, stop: threading.Event):
    """Decode to the end (or until `stop`); the last (frame, run)."""
    frame = run = None
    for frame, run in decode(showcase, prompt, settings, stop=stop, figures=False):
        pass
    return frame, run


POLL_S = 0.25  # how often a run checks that its client is still there
UNHEARD_S = 30.0  # a run whose session has had no stream open this long stops: nobody is there to read it


def client_alive(request: gr.Request | None):
    """A check that turns False once Gradio marks this request's event dead (its client disconnected
    without cancelling), or once its session has had no stream open for `UNHEARD_S` seconds (where `ClientStreams`
    counts them); always True where it cannot tell (no request, another Gradio)."""
    raw = getattr(request, "request", None)
    try:
        queue = raw.app.get_blocks()._queue
        queue.active_jobs
    except AttributeError:
        return lambda: True
    session = getattr(request, "session_hash", None)
    streams = client_streams.open_streams(raw.app) if session and client_streams.watching(raw.app) else None
    heard = time.monotonic()  # the run starts: its grace with it

    def alive() -> bool:
        nonlocal heard
        if streams is not None:
            if streams.get(session):
                heard = time.monotonic()
            elif time.monotonic() - heard > UNHEARD_S:
                return False  # nobody has listened for the grace: gone without a stream (or never there)
        for job in queue.active_jobs:
            for event in job or ():
                if event.request is raw:
                    return event.alive
        return True

    return alive


async def run_stoppable(work, stop: threading.Event, alive=lambda: True):
    """`work()` on a thread of its own; when the awaiting task is cancelled, set `stop`, wait for `work`
    to return, then let the cancellation through. When `alive()` turns False (the client is gone),
    set `stop` and let the run end at its next round."""
    future: concurrent.futures.Future = concurrent.futures.Future()

    def target():
        try:
            future.set_result(work())
        except BaseException as e:  # re-raised in the awaiting task
            future.set_exception(e)

    threading.Thread(target=target, daemon=True, name=f"specui-generate-{next(_names)}").start()
    waiting = asyncio.wrap_future(future)
    try:
        while not waiting.done():
            await asyncio.wait({waiting}, timeout=POLL_S)  # never cancels `waiting` itself
            if not waiting.done() and not stop.is_set() and not alive():
                stop.set()  # nobody is waiting for the answer
        return waiting.result()
    except asyncio.CancelledError:
        stop.set()  # the run ends at its next round
        while not waiting.done():
            try:
                await asyncio.wait({waiting})
            except asyncio.CancelledError:  # cancelled again: still wait, it is one round at most
                continue
        raise


def own_settings(showcase: Showcase, preset: str | None, drafter: str | None, num_draft_tokens: int | None,
                 draft_confidence: float | None, *, tree: bool = False) -> tuple:
    """(drafter, K, confidence) with each one left out (None) taken from the preset named (None: the default one): its
    drafter, its K and its `draft_confidence` for the drafter, as the page's controls follow the preset; a token
    tree's run (`tree`) keeps no confidence floor unless it names one, as the library, the benchmark and the terminal
    do (docs/engine.md). An unknown preset raises `ConfigError`, naming the known ones."""
    own = showcase.config.get(preset)
    drafter = drafter or own.drafter
    name = name_of(drafter) or None  # a label ("draft model") or a name
    return (drafter, own.k_for(name) if num_draft_tokens is None else num_draft_tokens,
            own.confidence_for(name, tree=tree) if draft_confidence is None else draft_confidence)


TEXTS = ("prompt", "preset", "drafter", "system")  # strings, or null for the default
INTEGERS = ("num_draft_tokens", "top_k", "max_new_tokens", "seed", "tree_width", "tree_nodes")
NUMBERS = ("temperature", "top_p", "draft_confidence", "repetition_penalty")
FLAGS = ("adaptive", "compare")


def type_problem(values: dict) -> str | None:
    """What is wrong with the JSON types of the API's parameters (None when nothing is), naming the parameter. The
    ranges are the page's checks (`Settings.from_ui`), which read what its widgets send and so take "8" for 8, True
    for 1 and "no" for true: an API call gets its types checked first, so a wrong one is refused, not guessed."""
    def number(v) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool)

    for name, v in values.items():
        if v is None:  # the default (prompt: "Type a prompt first.")
            continue
        if name in TEXTS and not isinstance(v, str):
            return f"{name} must be a string, got {said(v)}"
        if name in INTEGERS and not (number(v) and (isinstance(v, int) or v.is_integer())):  # float(10**400) overflows
            return f"{name} must be a whole number, got {said(v)}"
        if name in NUMBERS and not number(v):
            return f"{name} must be a number, got {said(v)}"
        if name in FLAGS and not isinstance(v, bool):
            return f"{name} must be true or false, got {said(v)}"
    return None


# each parameter of /generate and its answer as the API page ("Use via API") tells them. Gradio's page writes 'The
# input value that is provided in the "NAME" Api component.' and then this; NAME was "1st", "2nd", ... and nothing
# followed, so a reader learnt nothing of what a parameter does. The limits are the ones the request is checked
# against (`Settings.from_ui`'s), read from where it reads them; docs/showcase.md has the same table
PARAMETERS = {
    "prompt": "The message (a chat preset wraps it in the chat template) or the text to continue.",
    "preset": "A preset of models.yaml (the page's Preset).",
    "drafter": f"{', '.join(DRAFTER_NAMES)} or the page's label ('{LABELS['eagle']}'); None: the preset's.",
    "num_draft_tokens": f"K, the most tokens drafted a round, 1 to {MAX_DRAFT_TOKENS}; None: the preset's K for the "
                        "drafter.",
    "adaptive": "Adaptive K: K moves between 1 and max(2K, 8) with the acceptance (not with token trees).",
    "temperature": f"0: greedy; above 0 (up to {MAX_TEMPERATURE:g}), sampled.",
    "top_p": "Nucleus sampling, above 0 to 1 (1: off).",
    "top_k": f"Sample among the k most likely tokens only, up to {MAX_TOP_K:,} (0: off).",
    "max_new_tokens": f"The most tokens the reply may have, 1 to {MAX_NEW_TOKENS}.",
    "seed": f"A sampled run's seed, 0 to {MAX_SEED:,}; -1 or None: a fresh one below {SEEDS_DRAWN:,}, which the "
            "answer's seed gives back.",
    "compare": "Then decode with the target alone: the answer adds plain_text, plain_stats, speedup and (greedy) "
               "identical.",
    "tree_width": f"Children per expanded node of a token tree (1: one chain of K drafts), 1 to {MAX_TREE_WIDTH}.",
    "tree_nodes": f"With tree_width above 1: 0 the static tree (at most {MAX_TREE_NODES} nodes), N (up to "
                  f"{MAX_TREE_NODES}) a dynamic tree of N nodes.",
    "system": f"A chat preset's system message, up to {MAX_SYSTEM_CHARS:,} characters (empty: the chat template's "
              "own); base models ignore it.",
    "draft_confidence": "A chain stops drafting once the draft's chance of being accepted whole falls below it, 0 to "
                        f"{MAX_CONFIDENCE:g} (0: always K); None: the preset's for the drafter (a token tree's: 0).",
    "repetition_penalty": f"Transformers' repetition penalty, above 0 up to {MAX_REPETITION_PENALTY:g} (1: off; above "
                          "1, tokens already in the prompt or the reply become less likely); the output stays "
                          "exactly the target's.",
}
ANSWER = ("A dict: text, tokens (id, text, kind, p, q, accept), stats, stop_reason, seed, stopped and, with compare, "
          "plain_text, plain_stats, speedup and identical (greedy; None when sampled).")


def serve_generate(showcase: Showcase, **options):
    """The `/generate` endpoint (`options`: gr.api's) inside the current gr.Blocks, each parameter and the answer
    named and described on the API page (`PARAMETERS`, `ANSWER`)."""
    generate = generate_endpoint(showcase)
    gr.api(generate, api_name="generate", **options)
    fn = next(f for f in gr.context.get_blocks_context().fns.values() if f.fn is generate)
    names = [name for name in inspect.signature(generate).parameters if name != "request"]
    for component, name in zip(fn.inputs, names, strict=True):
        component.label = name
        component._api_info = {**component._api_info, "additional_description": PARAMETERS[name]}
    for component in fn.outputs:
        component.label = "answer"
        component._api_info = {**component._api_info, "description": ANSWER}


def generate_endpoint(showcase: Showcase):
    """The `/generate` API function: its parameters (names, defaults) are the API's."""
    default = showcase.config.get(None)

    async def generate(prompt: str, preset: str = default.name, drafter: str | None = None,
                       num_draft_tokens: int | None = None, adaptive: bool = False,
                       temperature: float = 0.0, top_p: float = 1.0, top_k: int = 0, max_new_tokens: int = 64,
                       seed: int = 0, compare: bool = False, tree_width: int = 1, tree_nodes: int = 0,
                       system: str = "", draft_confidence: float | None = None, repetition_penalty: float = 1.0,
                       request: gr.Request = None) -> dict:
        """Decode the prompt speculatively (and plainly too with compare=True) and answer one dict: the text
        (without the end-of-text token that closed it), every token with its kind, p, q and acceptance probability,
        the stats and, with compare, the speedup and (greedy) whether both outputs are identical. Each parameter
        below says what it does (docs/showcase.md has the same table)."""
        problem = type_problem(dict(prompt=prompt, preset=preset, drafter=drafter, num_draft_tokens=num_draft_tokens,
                                    adaptive=adaptive, temperature=temperature, top_p=top_p, top_k=top_k,
                                    max_new_tokens=max_new_tokens, seed=seed, compare=compare, tree_width=tree_width,
                                    tree_nodes=tree_nodes, system=system, draft_confidence=draft_confidence,
                                    repetition_penalty=repetition_penalty))
        if problem:
            raise gr.Error(problem, print_exception=False)
        try:
            drafter, num_draft_tokens, draft_confidence = own_settings(showcase, preset, drafter, num_draft_tokens,
                                                                       draft_confidence, tree=tree_width > 1)
        except ConfigError as e:  # no such preset
            raise gr.Error(str(e), print_exception=False) from None
        try:
            settings = seeded(Settings.from_ui(preset=preset, drafter=drafter, num_draft_tokens=num_draft_tokens,
                                        adaptive=adaptive, draft_confidence=draft_confidence,
                                        temperature=temperature, top_p=top_p, top_k=top_k,
                                        repetition_penalty=repetition_penalty,
                                        max_new_tokens=max_new_tokens, seed=seed, compare=compare,
                                        tree_width=tree_width, tree_nodes=tree_nodes, system=system))
        except SettingsError as e:
            raise gr.Error(str(e), print_exception=False) from None  # the client's settings: no fault of ours
        stop = threading.Event()
        frame, run = await run_stoppable(lambda: decode_all(showcase, prompt, settings, stop), stop,
                                         client_alive(request))
        if frame.error:
            raise gr.Error(frame.error, print_exception=False)
        return run.as_dict()

    return generate
