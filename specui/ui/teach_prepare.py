"""The Teach tab's settings check: the widgets' values -> `Settings`, the loaded pair, its engine and the
prompt's ids, or a refusal (`specui.ui.toasts`) that says what is wrong. Every Teach handler starts here."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from specui.drafters import MODEL_DRAFTERS
from specui.engine import SpeculativeEngine
from specui.ui.request import Settings, SettingsError, in_page_words
from specui.ui.toasts import refusal

log = logging.getLogger("specui.ui")


@dataclass(frozen=True)
class Prepared:
    settings: Settings
    preset: object
    pair: object
    engine: SpeculativeEngine
    ids: list[int]


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
        log.warning("teaching: %s", e)
        raise refusal(str(e)) from None
    if settings.drafter in MODEL_DRAFTERS and pair.draft is None:
        raise refusal(f"Preset '{chosen.name}' has no draft model: choose prompt lookup.")
    try:
        ids = showcase.encode(pair, text, ())
    except Exception as e:  # noqa: BLE001 - e.g. a tokenizer without a chat template
        raise refusal(f"The prompt could not be encoded: {type(e).__name__}: {e}") from None
    settings = settings.but(seed=0 if settings.seed is None else settings.seed)
    prepared = Prepared(settings, chosen, pair, pair.engine(), ids)
    return prepared, showcase.lock(chosen.name)
