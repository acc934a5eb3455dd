"""Drafters: who proposes the tokens the target checks.

Every drafter has the same three methods, as transformers' candidate generators do:
    start(prompt, sampling=, seed=)  a new generation begins
    propose(context, k) -> Draft     up to k tokens to follow `context` (the whole sequence so far)
    observe(num_accepted)            how many of the last proposal the target accepted

`Draft.probs` holds, per drafted token, the distribution q it was sampled from. A deterministic
drafter (prompt lookup) returns `probs=None`: its q is one-hot on the proposed token, and verification
treats it exactly that way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch

from specui.kv import CachedLM, model_device
from specui.sampling import Sampling, choose


@dataclass(frozen=True)
class Draft:
    tokens: torch.Tensor  # [k] int64
    probs: torch.Tensor | None  # [k, V] the q each token was drawn from; None: deterministic (one-hot q)

    @staticmethod
    def empty(device: torch.device | str = "cpu") -> Draft:
        return Draft(torch.empty(0, dtype=torch.long, device=device), None)


class Drafter(Protocol):
    name: str

    def start(self, prompt: list[int], *, sampling: Sampling, seed: int) -> None: ...

    def propose(self, context: list[int], k: int) -> Draft: ...

    def observe(self, num_accepted: int) -> None: ...


class ModelDrafter:
    """A small causal LM drafts k tokens autoregressively, sampling each from the q it reports.

    Its KV cache holds a prefix of the context. After a round, `observe` rolls it back to the
    accepted tokens; the next `propose` feeds whatever it has not seen yet (the round's last token,
    and after a fully accepted block also the last draft token, which it never fed itself).
    """

    name = "draft model"

    def __init__(self, model: torch.nn.Module):
        self.model = model
        self.device = model_device(model)
        self.vocab_size = model.get_input_embeddings().num_embeddings

    def _visible(self, ids: list[int]) -> list[int]:
        # A draft with a smaller vocabulary (e.g. Qwen2.5-0.5B under 7B) cannot embed the target's extra
        # ids; it sees its last id instead. That can only cost acceptance, never exactness.
        return [min(t, self.vocab_size - 1) for t in ids]

    def start(self, prompt: list[int], *, sampling: Sampling, seed: int) -> None:
        self.sampling = sampling
        # Its own generator: the draft may sit on another device than the target.
        self.generator = torch.Generator(device=self.device).manual_seed(seed ^ 0x5DEECE66D)
        self.lm = CachedLM(self.model)
        if len(prompt) > 1:
            self.lm.extend(self._visible(prompt[:-1]), last_only=True)
        self._valid = len(prompt) - 1  # cached tokens known to be part of the context
        self._proposed_at = len(prompt)

    def propose(self, context: list[int], k: int) -> Draft:
        self._proposed_at = len(context)
        if k == 0:
            return Draft.empty(self.device)
        self.lm.trim(min(self.lm.length, self._valid))
        # [V] at the last context token; the lm head runs on that position only
        logits = self.lm.extend(self._visible(context[self.lm.length :]), last_only=True)[-1]
        tokens, probs = [], []
        for i in range(k):
            token, q = choose(logits, self.sampling, self.generator)
            tokens.append(token)
            probs.append(q)
            if i + 1 < k:  # the last draft token is fed only if the target accepts it
                logits = self.lm.extend(token.view(1))[-1]
        return Draft(torch.stack(tokens), torch.stack(probs))

    def observe(self, num_accepted: int) -> None:
        self._valid = self._proposed_at + num_accepted


class PromptLookupDrafter:
    """Proposes the tokens that followed the most recent earlier occurrence of the context's last
    n-gram (longest n first). No second model: cheap, deterministic, strong on code and quotes.

    n-grams are indexed incrementally (the context only grows), so a proposal costs O(k), not O(L).
    """

    name = "prompt lookup"

    def __init__(self, *, max_ngram: int = 3, min_ngram: int = 1):
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


class DraftLength:
    """K for the next round: fixed, or adaptive (one more after a fully accepted block, one fewer
    after a rejection, within [1, k_max]), the heuristic schedule of transformers' assisted generation
    with steps of one. It depends only on the tokens, so a seeded run stays reproducible."""

    def __init__(self, k: int, *, adaptive: bool = False, k_max: int | None = None):
        self.k = k
        self.adaptive = adaptive
        self.k_max = k_max if k_max is not None else max(2 * k, 8)

    def update(self, *, num_accepted: int, num_drafted: int) -> None:
        if not self.adaptive or num_drafted == 0:
            return
        if num_accepted == num_drafted:
            self.k = min(self.k + 1, self.k_max)
        else:
            self.k = max(self.k - 1, 1)
