"""The draft model and prompt lookup in one drafter: copy when the context repeats, else ask the model.

Copies come first (`specui.drafters.copies`): where the context's last 3 or 2 tokens occurred before, the
round proposes up to `lookup_tokens` tokens that followed them, with no model forward; elsewhere the
draft model proposes K tokens as `ModelDrafter` does. The model's KV cache simply falls behind during
copied rounds; the next model round feeds every token it has not seen in one forward
(`ModelDrafter.propose` does this already).
"""

from __future__ import annotations

import torch

from specui.drafters.copies import MIN_NGRAM, CopiesFirst
from specui.drafters.model import ModelDrafter
from specui.sampling import Sampling

LOOKUP_TOKENS = 6  # a copy's length; an 8-row verify costs ~1.15 one-token forwards of SmolLM2 on a CPU


class ModelLookupDrafter(CopiesFirst, ModelDrafter):
    """Prompt lookup (n-grams of `min_ngram`..3 tokens, up to `lookup_tokens` copied) where the context
    repeats, the draft model's K tokens elsewhere."""

    name = "draft model + lookup"

    def __init__(self, model: torch.nn.Module, *, lookup_tokens: int = LOOKUP_TOKENS, min_ngram: int = MIN_NGRAM):
        super().__init__(model)
        self.copies(lookup_tokens, min_ngram)

    def start(self, prompt: list[int], *, sampling: Sampling, seed: int, resume: dict | None = None) -> None:
        super().start(prompt, sampling=sampling, seed=seed, resume=resume)
        self.start_copies(prompt, sampling, seed)

    def observe(self, num_accepted: int) -> None:
        if not self.copied:  # a copied round leaves the model's cache as it was: it catches up later
            super().observe(num_accepted)
