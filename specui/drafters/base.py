"""The drafter protocol: who proposes the tokens the target checks, and how many per round.

Every drafter has the same three methods, as transformers' candidate generators do:
    start(prompt, sampling=, seed=)  a new generation begins
    propose(context, k) -> Draft     up to k tokens to follow `context` (the whole sequence so far)
    observe(num_accepted)            how many of the last proposal the target accepted

Drafters that read the target itself say so with two optional attributes:
    target_features: tuple[int, ...]   indices into transformers' `hidden_states` (0 the embeddings, i the
        input of layer i, the layer count the final normed state). The engine then passes the target's
        states of those layers side by side: `start(..., features=[len(prompt) - 1, F])` for the prompt
        (its last token opens round 1) and `observe(n, features=[n + 1, F])` for the verified tokens
        (the round's first token and the n accepted drafts), taken from the verify forward, at no cost.
    shares_target: bool   the engine passes its target `CachedLM` as `start(..., target=)`: an early-exit
        draft runs the target's first layers on the target's own KV cache.
A drafter that draws from distributions may stop a round's drafting early (`Confidence`): it has an attribute
`stop_below` (0: always K tokens), which the engine sets from `DecodeSettings.draft_confidence`.
A drafter whose proposal may be longer than K (the model + lookup drafter copies up to 6 tokens) says
how long with an optional method `longest(k) -> int`; without it the engine keeps at most k tokens.

`Draft.probs` holds, per drafted token, the distribution q it was sampled from. A deterministic
drafter (prompt lookup) returns `probs=None`: its q is one-hot on the proposed token, and verification
treats it exactly that way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch

from specui.sampling import Sampling


@dataclass(frozen=True)
class Draft:
    tokens: torch.Tensor  # [k] int64
    probs: torch.Tensor | None  # [k, V] the q each token was drawn from; None: deterministic (one-hot q)

    @staticmethod
    def empty(device: torch.device | str = "cpu") -> Draft:
        return Draft(torch.empty(0, dtype=torch.long, device=device), None)


class Drafter(Protocol):
    """What the engine asks of a drafter (pass any object with these methods as `drafter=`).

    start: a run begins with this prompt, sampling transform and seed (reset any state; draw from your own
           generator seeded with `seed` for reproducible runs: an int in [0, 2**32), which torch, numpy's
           `RandomState` and `random` all take, that the engine derives from the run's seed, so it never repeats
           the draws the target judges the drafts with).
    propose: up to k next tokens after `context` (the prompt and every token emitted so far) as a `Draft`: the
             tokens, and q, the distribution each was drawn from ([n, V'] rows, V' <= the target's vocabulary, ids
             past V' have q 0), or None for a deterministic drafter (one-hot q). The accept/reject rule is exact
             only for the q each token was really drawn from; the engine refuses a q that is no distribution, and
             `specui.check_drafter` tests the law. k may be 0 (a run's last token): return `Draft.empty()`.
    observe: how many of the last proposal's tokens the target accepted (the engine then appends those and one
             token of its own to the context).
    name: shown in the UI and in error messages.
    """

    name: str

    def start(self, prompt: list[int], *, sampling: Sampling, seed: int) -> None: ...

    def propose(self, context: list[int], k: int) -> Draft: ...

    def observe(self, num_accepted: int) -> None: ...


def features_of(drafter) -> tuple[int, ...]:
    """The target states a drafter reads (its `target_features`), () for one that reads none."""
    return tuple(getattr(drafter, "target_features", None) or ())


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


class Confidence:
    """Whether a round's drafting goes on: while the draft stays confident, i.e. the product of its top
    probabilities (its own softmax at temperature 1) over the round's tokens so far is at least `stop_below`, an
    estimate of the chance that the whole chain survives verification (EAGLE-2 ranks its tree's nodes by the same
    product); 0 drafts K tokens always. K stays the most a round drafts, and a round drafts at least one token.

    The rule reads nothing but the drafter's own logits, so the proposal (how many tokens, and each token drawn
    from the q it reports) is fixed before the target's draws: verification stays exact, in greedy decoding and
    in sampling. It saves the draft steps, and the verify rows, of tokens unlikely to be accepted. A dynamic
    token tree takes the same number as a floor on its nodes' path probabilities (`specui.drafters.tree.grow`)."""

    def __init__(self, stop_below: float = 0.0):
        self.stop_below, self.chance = stop_below, 1.0

    def goes_on(self, logits: torch.Tensor) -> bool:
        """After drafting a token from `logits` (the draft's, over its vocabulary): whether to draft another."""
        if self.stop_below <= 0:
            return True
        return self.goes_on_after(float(torch.softmax(logits.float(), dim=-1).max()))

    def goes_on_after(self, top: float) -> bool:
        """The same, given the drafted token's top probability (`tools.stop_model` replays recorded chains so)."""
        if self.stop_below <= 0:
            return True
        self.chance *= top
        return self.chance >= self.stop_below
