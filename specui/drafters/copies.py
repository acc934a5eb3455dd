"""Copies first: a drafter that copies where the context repeats and asks its own proposer elsewhere.

Chat and code answers repeat what came before (names, code from the question, the answer's own list
items), and there a copy is both free and longer than a small proposer's guess. `CopiesFirst` goes
before a drafter class (`class ModelLookupDrafter(CopiesFirst, ModelDrafter)`): each round it first
looks for an earlier occurrence of the context's last n tokens (n = 3, then `min_ngram`): if one exists
it proposes up to `lookup_tokens` tokens that followed it, with no forward; otherwise the drafter it
is mixed into proposes K tokens. Which proposer runs depends only on the context, so the proposal is
still a distribution fixed before the target's draws: copied rounds report one-hot q (probs None),
the others their proposer's q, and verification stays exact for both.

`copied` says whether the last proposal was a copy (the engine records it in the round). Token trees
are not drafted (a copied branch has no q to rank children by), so the engine refuses tree settings.
"""

from __future__ import annotations

from specui.drafters.base import Draft
from specui.drafters.prompt_lookup import PromptLookupDrafter
from specui.sampling import Sampling

MIN_NGRAM = 2  # a one-token match is too weak a reason to skip the proposer


class CopiesFirst:
    """Mixed in before a drafter class; its `__init__` calls `copies(lookup_tokens, min_ngram)` and its
    `start` calls `start_copies(prompt, sampling, seed)`."""

    propose_tree = None  # no token trees: the engine checks for these methods
    observe_tree = None
    copied = False

    def copies(self, lookup_tokens: int, min_ngram: int = MIN_NGRAM) -> None:
        if lookup_tokens < 1:
            raise ValueError(f"lookup_tokens must be at least 1, got {lookup_tokens}")
        self.lookup = PromptLookupDrafter(max_ngram=max(3, min_ngram), min_ngram=min_ngram)
        self.lookup_tokens = lookup_tokens

    def start_copies(self, prompt: list[int], sampling: Sampling, seed: int) -> None:
        self.lookup.start(prompt, sampling=sampling, seed=seed)
        self.copied = False

    def longest(self, k: int) -> int:
        """The most tokens a proposal for K = k may hold: a copy may be longer than the proposer's K."""
        return max(k, self.lookup_tokens) if k > 0 else 0

    def propose(self, context: list[int], k: int) -> Draft:
        if k > 0:
            copy = self.lookup.propose(context, self.longest(k))
            if copy.tokens.numel():
                self.copied = True
                return Draft(copy.tokens.to(self.device), None)
        self.copied = False
        return super().propose(context, k)
