"""The Teach tab's settings check: the widgets' values -> `Settings`, the loaded pair, its engine and the
prompt's ids, or a refusal (`specui.ui.toasts`) that says what is wrong. Every Teach handler starts here.

A chat message handed to the Teach tab (`teach_handoff`) brings the conversation before it and the system prompt
(the `context` State: history, system, the message's text): while the prompt box holds that message, its ids are
the chat template's of all three, as the chat's run read them (`Showcase.encode`); another prompt is decoded alone.

A Seed of -1 (or a blank box) means what it means in the Chat tab: a fresh seed, drawn for the handler's whole run
(`request.seeded`, the Chat tab's rule), which the run's facts then show (the status line, the export's name), so it
can be replayed."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from specui import spaces
from specui.drafters import MODEL_DRAFTERS
from specui.engine import SpeculativeEngine
from specui.ui.request import Settings, SettingsError, in_page_words, seeded
from specui.ui.toasts import refusal

log = logging.getLogger("specui.ui")


@dataclass(frozen=True)
class Prepared:
    settings: Settings
    preset: object
    pair: object
    engine: SpeculativeEngine
    ids: list[int]
    conversation: dict  # what the ids hold besides the prompt (`conversation`): {} when it is decoded alone


def handed(c, data: dict) -> dict | None:
    """The chat's conversation handed off with the prompt (`c.context`: history, system, the message's text), while
    the prompt box still holds that message; None once another prompt is typed, or when none came with it."""
    context = data.get(c.context)
    if not context or data.get(c.prompt) != context["prompt"]:
        return None
    return context


def conversation(context: dict | None) -> dict:
    """What a handed-off `context` adds to the prompt, as a run's extras: the messages before it and whether a
    system prompt comes first ({} for none: the prompt is decoded alone)."""
    if not context or not (context["history"] or context["system"]):
        return {}
    return {"messages_before": len(context["history"]), "system_prompt": bool(context["system"])}


def conversation_words(extras: dict) -> str:
    """`conversation`'s extras in words: "the 4 messages before it and the system prompt" ("" for none)."""
    n, system = extras.get("messages_before") or 0, extras.get("system_prompt")
    parts = [("the message before it" if n == 1 else f"the {n} messages before it") if n else "",
             "the system prompt" if system else ""]
    return " and ".join(part for part in parts if part)


def handed_note(extras: dict) -> str:
    """The status line's word on a handed-off message's conversation (`conversation`'s extras; "" for none)."""
    words = conversation_words(extras)
    return f"**Decode** decodes it after {words}, as the chat did." if words else ""


def prepare(showcase, c, data: dict, *, drafter: str | None = None) -> tuple[Prepared, object]:
    """Check the settings of the Teach tab's controls `c` and load the pair: (Prepared, the pair's lock),
    or raise gr.Error. `showcase` is the app's (config, pair cache, locks)."""
    try:
        settings = Settings.from_ui(preset=data[c.preset], drafter=drafter or data[c.drafter],
                                    num_draft_tokens=data[c.k], draft_confidence=data[c.confidence],
                                    temperature=data[c.temperature], repetition_penalty=data[c.penalty],
                                    max_new_tokens=data[c.max_new], seed=data[c.seed])
        chosen = showcase.config.get(settings.preset)
    except (SettingsError, ValueError) as e:
        raise refusal(in_page_words(str(e))) from None
    text = data[c.prompt]
    if not text or not text.strip():
        raise refusal("Type a prompt first.")
    try:
        pair = showcase.cache.get(chosen)
    except Exception as e:  # noqa: BLE001 - LoadError or anything a loader throws: a message, not a traceback
        log.warning("teaching: %s", e)  # the whole error, for whoever runs the app; a Space's visitor is told less
        raise refusal(spaces.load_failure_said(chosen.name, e)) from None
    if settings.drafter in MODEL_DRAFTERS and pair.draft is None:
        raise refusal(f"Preset '{chosen.name}' has no draft model: choose prompt lookup.")
    context = handed(c, data) if pair.preset.chat_template else None  # a base model reads no conversation
    history, system = (context["history"], context["system"]) if context else ((), "")
    try:
        ids = showcase.encode(pair, text, history, system)
    except Exception as e:  # noqa: BLE001 - e.g. a tokenizer without a chat template
        raise refusal(f"The prompt could not be encoded: {type(e).__name__}: {e}") from None
    settings = seeded(settings)
    prepared = Prepared(settings, chosen, pair, pair.engine(), ids, conversation(context))
    return prepared, showcase.lock(chosen.name)
