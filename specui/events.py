"""What the engine reports: one `Round` per draft-then-verify step, and the whole `GenerationResult`.

Everything a UI draws comes from these records; nothing here needs a model or a tokenizer.
Token provenance ("kinds"):
    accepted   a draft token the target accepted
    resampled  the target's token at the first rejection (greedy: its correction)
    bonus      the target's extra token after a fully accepted block (also the token of a round
               whose drafter proposed nothing, e.g. prompt lookup without a match)
    plain      a token of plain decoding by the target alone
"""

from __future__ import annotations

from dataclasses import dataclass, field

from specui import metrics

KINDS = ("accepted", "resampled", "bonus", "plain")


@dataclass(frozen=True)
class Round:
    """One round: K drafted tokens checked by one target forward, emitting 1..K+1 tokens.

    Per drafted position i (lists of length len(drafted)):
        target_probs[i]  p(x_i), the target's probability of the drafted token
        draft_probs[i]   q(x_i), the drafter's probability (1.0 for deterministic drafters)
        accept_probs[i]  min(1, p/q) (greedy: 1.0 if x_i is the target's argmax, else 0.0)
        uniforms[i]      the uniform draw r_i compared with p/q (empty in greedy mode)
    Per emitted token j (lists of length len(token_ids)):
        kinds[j]         provenance, see the module docstring
        token_target_probs[j]  p of the emitted token at its position
        token_draft_probs[j]   q of the emitted token at its position, None where the drafter
                               gave no distribution (bonus and plain tokens, deterministic drafts)
    In greedy mode p and q are the models' plain softmax probabilities, shown for information.
    """

    index: int
    token_ids: list[int]
    kinds: list[str]
    drafted: list[int]
    num_accepted: int
    target_probs: list[float]
    draft_probs: list[float]
    accept_probs: list[float]
    uniforms: list[float]
    token_target_probs: list[float]
    token_draft_probs: list[float | None]
    residual_top: list[tuple[int, float]]  # at a rejection: the residual's most likely tokens
    num_draft_tokens: int  # K asked of the drafter this round (it may propose fewer)
    draft_s: float  # seconds spent drafting
    verify_s: float  # seconds in the target forward and the accept/reject decision
    elapsed_s: float  # seconds since the generation started (prefill included) when the round ended
    speculative: bool = True

    @property
    def num_drafted(self) -> int:
        return len(self.drafted)


@dataclass
class GenerationResult:
    """The tokens of one generation, their provenance, and every round that produced them."""

    token_ids: list[int] = field(default_factory=list)  # new tokens only
    kinds: list[str] = field(default_factory=list)
    rounds: list[Round] = field(default_factory=list)
    prefill_s: float = 0.0
    total_s: float = 0.0
    stop_reason: str = ""  # "eos" | "length"
    seed: int | None = None
    speculative: bool = True

    def add(self, round_: Round) -> None:
        self.rounds.append(round_)
        self.token_ids.extend(round_.token_ids)
        self.kinds.extend(round_.kinds)
        self.total_s = round_.elapsed_s

    @property
    def num_drafted(self) -> int:
        return sum(r.num_drafted for r in self.rounds)

    @property
    def num_accepted(self) -> int:
        return sum(r.num_accepted for r in self.rounds)

    @property
    def acceptance_rate(self) -> float | None:
        """Accepted draft tokens / drafted tokens (None when nothing was drafted)."""
        return metrics.acceptance_rate(self.rounds)

    @property
    def mean_accepted_length(self) -> float:
        """Tokens emitted per target forward, bonus included (vLLM / Spec-Bench); plain decoding = 1.0."""
        return metrics.mean_accepted_length(self.rounds) or 0.0

    @property
    def tokens_per_s(self) -> float:
        return len(self.token_ids) / self.total_s if self.total_s > 0 else 0.0
