"""The draft model and prompt lookup in one drafter: copy when the context repeats, else ask the model.

Chat and code answers repeat what came before (names, code from the question, the answer's own list
items), and there a copy is both free and longer than a small model's guess. So each round this
drafter first looks for an earlier occurrence of the context's last n tokens (n = 3, then 2): if one
exists it proposes up to `lookup_tokens` tokens that followed it, with no model forward; otherwise the
draft model proposes K tokens as `ModelDrafter` does. Which proposer runs depends only on the context,
so the proposal is still a distribution fixed before the target's draws: lookup rounds report one-hot
q (probs None), model rounds the model's q, and verification stays exact for both.

The model's KV cache simply falls behind during lookup rounds; the next model round feeds every token it
has not seen in one forward (`ModelDrafter.propose` does this already). Token trees are not drafted (a
copied branch has no q to rank children by), so the engine refuses tree settings for this drafter.
"""

from __future__ import annotations

import torch

from specui.drafters.base import Draft
from specui.drafters.model import ModelDrafter
from specui.drafters.prompt_lookup import PromptLookupDrafter
from specui.sampling import Sampling

LOOKUP_TOKENS = 6  # a copy's length; an 8-row verify costs ~1.15 one-token forwards of SmolLM2 on a CPU
MIN_NGRAM = 2  # a one-token match is too weak a reason to skip the model


class ModelLookupDrafter(ModelDrafter):
    """Prompt lookup (n-grams of `min_ngram`..3 tokens, up to `lookup_tokens` copied) where the context
    repeats, the draft model's K tokens elsewhere. `copied` says whether the last proposal was a copy
    (the engine records it in the round)."""

    name = "draft model + lookup"
    propose_tree = None  # no token trees: the engine checks for these methods
    observe_tree = None

    def __init__(self, model: torch.nn.Module, *, lookup_tokens: int = LOOKUP_TOKENS, min_ngram: int = MIN_NGRAM):
        super().__init__(model)
        if lookup_tokens < 1:
            raise ValueError(f"lookup_tokens must be at least 1, got {lookup_tokens}")
        self.lookup = PromptLookupDrafter(max_ngram=max(3, min_ngram), min_ngram=min_ngram)
        self.lookup_tokens = lookup_tokens
        self.copied = False

    def longest(self, k: int) -> int:
        """The most tokens a proposal for K = k may hold: a copy may be longer than the model's K."""
        return max(k, self.lookup_tokens) if k > 0 else 0

    def start(self, prompt: list[int], *, sampling: Sampling, seed: int, resume: dict | None = None) -> None:
        super().start(prompt, sampling=sampling, seed=seed, resume=resume)
        self.lookup.start(prompt, sampling=sampling, seed=seed)
        self.copied = False

    def propose(self, context: list[int], k: int) -> Draft:
        if k > 0:
            copy = self.lookup.propose(context, self.longest(k))
            if copy.tokens.numel():
                self.copied = True
                return Draft(copy.tokens.to(self.device), None)
        self.copied = False
        return super().propose(context, k)

    def observe(self, num_accepted: int) -> None:
        if not self.copied:  # a copied round leaves the model's cache as it was: it catches up later
            super().observe(num_accepted)
