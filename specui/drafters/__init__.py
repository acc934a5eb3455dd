"""Drafters: who proposes the tokens the target checks. One module per drafter, one protocol.

    base           the `Drafter` protocol, `Draft` and the K schedule `DraftLength`
    model          `ModelDrafter`: a small causal LM
    prompt_lookup  `PromptLookupDrafter`: copies from the context, no second model
    registry       the drafter names used everywhere (`MODEL`, `PROMPT_LOOKUP`, `DRAFTER_NAMES`)
"""

from specui.drafters.base import Draft, Drafter, DraftLength
from specui.drafters.model import ModelDrafter
from specui.drafters.prompt_lookup import PromptLookupDrafter
from specui.drafters.registry import DRAFTER_NAMES, LABELS, MODEL, PROMPT_LOOKUP

__all__ = ["Draft", "Drafter", "DraftLength", "ModelDrafter", "PromptLookupDrafter", "DRAFTER_NAMES", "LABELS",
           "MODEL", "PROMPT_LOOKUP"]
