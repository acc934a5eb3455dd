"""Drafters: who proposes the tokens the target checks. One module per drafter, one protocol.

    base           the `Drafter` protocol, `Draft` and the K schedule `DraftLength`
    model          `ModelDrafter`: a small causal LM
    prompt_lookup  `PromptLookupDrafter`: copies from the context, no second model
    copies         `CopiesFirst`: mixed into a drafter, copies where the context repeats, the drafter elsewhere
    model_lookup   `ModelLookupDrafter`: copies where the context repeats, the draft model elsewhere
    registry       the drafter names used everywhere (`MODEL`, `PROMPT_LOOKUP`, the heads', `DRAFTER_NAMES`)

The drafters that are heads trained on the target (EAGLE, Medusa, early exit and early exit + lookup) live
in `specui.heads`.

The registry's names are plain strings and import nothing; the drafter classes (which need torch) are
imported on first use, so `specui.settings` and anything else that only names drafters stays light.
"""

from specui.drafters.registry import (COPIES, DRAFTER_NAMES, EAGLE, EARLY_EXIT, EARLY_EXIT_LOOKUP, HEAD_DRAFTERS,
                                     HEAD_OF, HEADS, LABELS, MEDUSA, MODEL, MODEL_DRAFTERS, MODEL_LOOKUP,
                                     PROMPT_LOOKUP)

_EXPORTS = {
    "Draft": "specui.drafters.base",
    "Drafter": "specui.drafters.base",
    "DraftLength": "specui.drafters.base",
    "ModelDrafter": "specui.drafters.model",
    "ModelLookupDrafter": "specui.drafters.model_lookup",
    "PromptLookupDrafter": "specui.drafters.prompt_lookup",
}
__all__ = ["COPIES", "DRAFTER_NAMES", "EAGLE", "EARLY_EXIT", "EARLY_EXIT_LOOKUP", "HEAD_DRAFTERS", "HEAD_OF", "HEADS",
           "LABELS", "MEDUSA", "MODEL", "MODEL_DRAFTERS", "MODEL_LOOKUP", "PROMPT_LOOKUP", *_EXPORTS]


def __getattr__(name):
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'specui.drafters' has no attribute {name!r}")
