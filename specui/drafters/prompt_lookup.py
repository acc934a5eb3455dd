"""The prompt-lookup drafter: copy what followed the last n-gram's latest earlier occurrence."""

from __future__ import annotations

import numbers

import torch

from specui.drafters.base import Draft
from specui.sampling import Sampling


class PromptLookupDrafter:
    """Proposes the tokens that followed the most recent earlier occurrence of the context's last
    n-gram (longest n first). No second model: cheap, deterministic, strong on code and quotes.

    n-grams are indexed incrementally (the context only grows), so a proposal costs O(k), not O(L).
    """

    name = "prompt lookup"

    def __init__(self, *, max_ngram: int = 3, min_ngram: int = 1):
        for name, n in (("max_ngram", max_ngram), ("min_ngram", min_ngram)):  # 2.5 or "3": no Python TypeError
            if isinstance(n, bool) or not isinstance(n, numbers.Integral):
                raise ValueError(f"PromptLookupDrafter: {name} must be an integer (n-gram lengths), got {n!r}")
        if not 1 <= min_ngram <= max_ngram:
            raise ValueError(f"need 1 <= min_ngram <= max_ngram, got {min_ngram} and {max_ngram}")
        self.ngram_sizes = range(max_ngram, min_ngram - 1, -1)

    def start(self, prompt: list[int], *, sampling: Sampling, seed: int) -> None:
        self._latest: dict[tuple[int, ...], int] = {}  # n-gram -> latest start that has a continuation
        self._indexed = 0  # n-grams ending before this position are indexed

    def _index(self, context: list[int]) -> None:
        # an n-gram starting at s is indexed once a token follows it (s + n < len(context))
        for end in range(self._indexed, len(context) - 1):
            for n in self.ngram_sizes:
                start = end - n + 1
                if start >= 0:
                    self._latest[tuple(context[start : end + 1])] = start
        self._indexed = max(self._indexed, len(context) - 1)

    def propose(self, context: list[int], k: int) -> Draft:
        self._index(context)
        if k > 0:
            for n in self.ngram_sizes:
                if len(context) > n:
                    start = self._latest.get(tuple(context[-n:]))
                    if start is not None:
                        follow = context[start + n : start + n + k]
                        return Draft(torch.tensor(follow, dtype=torch.long), None)
        return Draft.empty()

    def observe(self, num_accepted: int) -> None:
        pass
