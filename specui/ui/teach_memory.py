"""The Teach tab remembers, in the browser, the prompt and settings of its last decoded run and the round on show:
after a refresh they come back, and a page that opens on the Teach tab (`?tab=teach`: a projector reconnected, a
laptop woken, F5) decodes that run again (the same seed, the same draws) and shows the round the class had reached.
A run still on its first round (decoded, never stepped on, or stepped back to it) keeps no round: its page costs
nothing when it opens (no decode, no ZeroGPU call), says the lesson's prompt is back, and Next decodes it at round 1,
the round it would have come back to.

Gradio's BrowserState keeps them in the page's localStorage, encrypted with the server's key: a restarted server
cannot read them back and the tab opens on its defaults, as a page on another browser does. What is kept is what
Decode read, but for a prompt over MAX_PROMPT characters (its settings come back without it, nothing decoded); a
value that no longer fits (a preset gone from models.yaml, a number outside its slider) is left at the tab's default.
A chat message's conversation (`teach_prepare`) is not kept (what people wrote stays out of the browser's storage,
and it may be long): only how many messages came before the prompt, so that after a refresh the status line says the
prompt is now decoded alone.
"""

from __future__ import annotations

import math

import gradio as gr

from specui.ui import teach_keys
from specui.ui.teach_prepare import conversation_words
from specui.ui.toasts import calmly

STORAGE_KEY = "specui-teach-lesson"
ROUND = "round"  # the round on show (0-based) once past the first, written at each step
FIELDS = ("prompt", "preset", "drafter", "k", "confidence", "temperature", "penalty", "max_new", "seed")
MAX_PROMPT = 20_000  # characters kept: a lesson's prompt, not a book


def build() -> gr.BrowserState:
    """The browser's memory of the last decoded run (empty until one is decoded)."""
    return gr.BrowserState({}, storage_key=STORAGE_KEY)


def kept(controls, data: dict, *, conversation: dict | None = None, seed: int | None = None) -> dict:
    """What the memory keeps of a decoded run: its settings as the controls (`controls`: teach_layout.Controls) held
    them, by field name, and `conversation` (`teach_prepare.conversation`: how many messages came before the prompt,
    whether a system prompt did; none of their text). `seed`: the seed the run drew with, kept for the box's (-1 or a
    blank Seed box draws one: a refresh decodes that seed again, not a fresh one); a greedy run's plays no part, and
    the box comes back as it was set (a blank as -1, what it means there)."""
    settings = {name: data[getattr(controls, name)] for name in FIELDS}
    if not _fits(settings["prompt"]):  # never put back: a refresh would decode the box's prompt as this run
        del settings["prompt"]
    if settings["temperature"] == 0:  # greedy: no draw reads the seed, so none drawn is put in the box
        seed = -1 if settings["seed"] is None or settings["seed"] == "" else None
    return {**settings, **({} if seed is None else {"seed": seed}), **(conversation or {})}


def _fits(prompt) -> bool:
    """Whether `prompt` is one the memory keeps and puts back (a longer one stays out of the browser's storage)."""
    return isinstance(prompt, str) and len(prompt) <= MAX_PROMPT


def at_round(saved, index: int):
    """The memory `saved` with `index` as the round on show (unchanged when nothing was decoded); the first round is
    no round to come back to (a refresh would decode the run for what one press of Next gives)."""
    if not isinstance(saved, dict) or not _fits(saved.get("prompt")):
        return saved
    rest = {key: value for key, value in saved.items() if key != ROUND}
    return {**rest, ROUND: int(index)} if index > 0 else rest


def resumed_round(saved) -> int | None:
    """The round to decode again and show after a refresh (None: none, e.g. nothing decoded yet, a run on its first
    round, or a prompt that was decoded after a chat's conversation, which the memory does not keep: its rounds would
    not be those)."""
    if not isinstance(saved, dict) or not _fits(saved.get("prompt")) or _words(saved):
        return None
    at = saved.get(ROUND)
    return at if isinstance(at, int) and not isinstance(at, bool) and at > 0 else None


def _words(saved: dict) -> str:
    """The conversation the remembered prompt was decoded after, in words ("" when alone)."""
    n = saved.get("messages_before")
    return conversation_words({"messages_before": n if isinstance(n, int) and not isinstance(n, bool) else 0,
                               "system_prompt": saved.get("system_prompt") is True})


def restored_note(saved, *, teach: bool = True) -> str | None:
    """The status line as a page opens with `saved` (None: nothing remembered): the remembered prompt was decoded after
    a chat's conversation, which the memory does not keep; its round is being decoded again (a page opened on the
    Teach tab, `teach`); or the prompt and settings are back, and Next decodes them."""
    if not isinstance(saved, dict) or not _fits(saved.get("prompt")):
        return None
    words, at = _words(saved), resumed_round(saved)
    if words:
        return (f"The last lesson's prompt is back, but not the chat's conversation it was decoded after ({words}): "
                "the browser does not keep it, so **Decode** decodes the prompt alone. Step through it from the Chat "
                "tab to decode it as the chat did.")
    if at is not None and teach:
        return f"The last lesson is back: decoding it again (the same seed, the same draws) to show round {at + 1}…"
    return "The last lesson's prompt and settings are back: **Next round ▶** (or **Decode**) decodes it at round 1."


def on_teach(request: gr.Request | None) -> bool:
    """Whether the page was opened on the Teach tab (`?tab=teach`)."""
    params = getattr(request, "query_params", None) or {}
    return str(params.get("tab") or "").strip().lower() == "teach"


def restored(config, controls, saved) -> dict:
    """The controls' values from the memory `saved`: each that still fits, others unchanged (the tab's default)."""
    saved = saved if isinstance(saved, dict) else {}
    out = {getattr(controls, name): gr.update() for name in FIELDS}
    for name in FIELDS:
        value = saved.get(name)
        component = getattr(controls, name)
        if name == "prompt":
            fits = _fits(value)
        elif name == "preset":
            fits = value in config.names
        elif name == "drafter":
            fits = value in [choice for _, choice in _choices(component)]
        elif name == "seed":
            fits = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        else:  # a slider's number
            fits = (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
                    and component.minimum <= value <= component.maximum)
        if fits:
            out[component] = value
    return out


def _choices(component) -> list[tuple[str, str]]:
    return [choice if isinstance(choice, tuple) else (choice, choice) for choice in component.choices]


def wire(demo: gr.Blocks, config, controls, memory: gr.BrowserState, *, status=None) -> None:
    """When the page opens, put the remembered run's settings back into the Teach tab's controls (and into `status`,
    the step-through's status line, what came back: `restored_note`)."""
    outputs = [getattr(controls, name) for name in FIELDS]

    def load(saved, request: gr.Request):  # gradio injects the request by its annotation
        values = restored(config, controls, saved)
        if status is not None:
            note = restored_note(saved, teach=on_teach(request))
            values[status] = gr.update() if note is None else note
        return values

    demo.load(load, [memory], outputs + ([status] if status is not None else []), show_progress="hidden",
              api_visibility="private", queue=False)


def resume(demo: gr.Blocks, config, ui, decode, said, inputs, outputs, **event) -> None:
    """When a page opens on the Teach tab (`?tab=teach`) with a remembered run, decode it again with its settings and
    show the round it was on (`resumed_round`): `decode(data, at=)` is the tab's Decode (`teaching.decode`), `said`
    its refusal's answer; `ui` the `teaching.TeachTab`, `inputs` and `outputs` Decode's with `ui.memory` among the
    inputs. A page opened on another tab decodes nothing (its visitor may never look at the Teach tab).

    Two steps, so that only a page with a run to come back to joins the engine's queue (`event`): every page's load
    asks, outside the queue, whether one is due (`due`), and only a yes changes `wanted`, whose change decodes. One
    queued load for every page (any tab, any visitor, nothing remembered) waited behind the run in progress, counted
    against a ZeroGPU Space's queue (a Send refused as busy) and laid gradio's queue overlay over the step view."""
    c = ui.controls
    # how many resumes this page asked for, a change being one due: a hidden number, not a gr.State, whose change
    # an unqueued event's output does not set off
    wanted = gr.Number(0, precision=0, visible=False)

    def due(saved, asked: int, request: gr.Request):  # gradio injects the request by its annotation
        return asked + 1 if on_teach(request) and resumed_round(saved) is not None else gr.skip()

    def resumed(data: dict):
        saved = data[ui.memory]
        at = resumed_round(saved)
        if at is None:
            return {c.play: gr.update()}  # a no-op (an empty dict is one value to gradio)
        kept = {k: v for k, v in restored(config, c, saved).items() if not isinstance(v, dict)}  # dict: gr.update()
        return calmly(lambda values: decode(values, at=at), said)({**data, **kept})

    demo.load(due, [ui.memory, wanted], [wanted], show_progress="hidden", api_visibility="private", queue=False)
    teach_keys.redraw_after("step", wanted.change(resumed, inputs, outputs, **event))  # a press could land first
