"""Speculative decoding figures, as pure functions shared by the benchmark and the UI.

Definitions (Leviathan, Kalman, Matias 2023, "Fast Inference from Transformers via Speculative
Decoding", section 3; the counting conventions of vLLM and Spec-Bench):
    acceptance rate: accepted draft tokens / drafted tokens, every draft counted (those after a rejection,
           never judged, too); a count of this run, not the paper's alpha
    alpha  the paper's per-token acceptance E[beta], as `fitted_alpha` estimates it from the rounds (each at the
           K it could accept: a round the token budget cut short is not read as rejections)
    K      draft tokens proposed per round (gamma in the paper)
    c      cost of one draft forward / cost of one target forward (one token each, KV cached)
    mean accepted length: tokens emitted per target forward, bonus included (plain decoding = 1.0;
           gpt-fast prints this minus one); this run's count: the prompt's forward emits none and is not
           counted, and a last round that the budget or an eos cut short counts the tokens it emitted
    expected tokens per round (eq. 1): (1 - alpha^(K+1)) / (1 - alpha), K+1 when alpha = 1
    walltime speedup (Theorem 3.8): (1 - alpha^(K+1)) / ((1 - alpha)(K c + 1))
The optimal K has no closed form; `best_k` maximises over integers.

Rounds are anything with `num_accepted` and `drafted` (a list) or `num_drafted` (an int), such as
`specui.events.Round`; no torch, no models.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


def _drafted(round_) -> int:
    n = getattr(round_, "num_drafted", None)
    return int(n) if n is not None else len(round_.drafted)


def _emitted(round_) -> int:
    ids = getattr(round_, "token_ids", None)
    return len(ids) if ids is not None else int(round_.num_accepted) + 1


def acceptance_rate(rounds: Iterable) -> float | None:
    """Accepted draft tokens / drafted tokens over `rounds`; None when nothing was drafted."""
    accepted = drafted = 0
    for r in rounds:
        accepted += int(r.num_accepted)
        drafted += _drafted(r)
    return accepted / drafted if drafted else None


def mean_accepted_length(rounds: Iterable) -> float | None:
    """Tokens emitted per target forward (= per round), bonus included; None for no rounds.

    Plain decoding gives 1.0; a fully accepted round of K drafts gives K+1.
    """
    tokens = forwards = 0
    for r in rounds:
        tokens += _emitted(r)
        forwards += 1
    return tokens / forwards if forwards else None


def _check_alpha(alpha: float) -> float:
    alpha = float(alpha)
    if not 0.0 <= alpha <= 1.0 or math.isnan(alpha):
        raise ValueError(f"alpha must be in [0, 1], got {alpha!r}")
    return alpha


def _check_k(k: int) -> int:
    if isinstance(k, bool) or not isinstance(k, int) or k < 0:
        raise ValueError(f"K must be an integer >= 0, got {k!r}")
    return k


def expected_tokens_per_round(alpha: float, k: int) -> float:
    """(1 - alpha^(K+1)) / (1 - alpha): tokens one round emits on average; K+1 at alpha = 1, 1 at alpha = 0."""
    alpha, k = _check_alpha(alpha), _check_k(k)
    if alpha == 1.0:
        return float(k + 1)
    return (1.0 - alpha ** (k + 1)) / (1.0 - alpha)


def alpha_from_mean_accepted_length(mean_length: float, k: int) -> float:
    """The per-token alpha whose expected tokens per round (eq. 1) equals a measured mean accepted length.

    accepted / drafted underestimates the paper's alpha when rounds stop at the first rejection
    (drafts after it count as drafted but never had a chance); this inverts eq. 1 instead, so that
    `theoretical_speedup` predicts exactly the tokens per round that were measured.
    """
    k = _check_k(k)
    mean_length = float(mean_length)
    if not 1.0 <= mean_length <= k + 1 + 1e-9:
        raise ValueError(f"a mean accepted length with K={k} must be in [1, {k + 1}], got {mean_length!r}")
    if k == 0 or mean_length >= k + 1:
        return 1.0 if k > 0 else 0.0
    return _alpha_giving(mean_length, {k: 1})


def _alpha_giving(tokens: float, rounds_at: dict[int, int]) -> float:
    """The alpha in [0, 1] at which rounds_at's rounds (K -> how many rounds at that K) expect `tokens` tokens in all
    (eq. 1 summed), by bisection: the expected tokens increase with alpha."""
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if sum(n * expected_tokens_per_round(mid, k) for k, n in rounds_at.items()) < tokens:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def theoretical_speedup(alpha: float, k: int, c: float, *, verify_cost: float = 1.0) -> float:
    """Leviathan et al. Theorem 3.8: (1 - alpha^(K+1)) / ((1 - alpha)(K c + 1)).

    The theorem assumes verifying K+1 tokens costs one target forward and nothing else costs time;
    `verify_cost` replaces that 1 with a measured cost (in target forwards) of the K+1-token forward.
    """
    c, verify_cost = float(c), float(verify_cost)
    if not c >= 0 or math.isinf(c):
        raise ValueError(f"c (draft cost / target cost) must be a finite number >= 0, got {c!r}")
    if not verify_cost > 0 or math.isinf(verify_cost):
        raise ValueError(f"verify_cost must be a finite number > 0, got {verify_cost!r}")
    return expected_tokens_per_round(alpha, k) / (_check_k(k) * c + verify_cost)


def best_k(alpha: float, c: float, k_max: int = 16) -> int:
    """The K in 1..k_max that maximises `theoretical_speedup` (the smallest on ties)."""
    if isinstance(k_max, bool) or not isinstance(k_max, int) or k_max < 1:
        raise ValueError(f"k_max must be an integer >= 1, got {k_max!r}")
    best = (1, theoretical_speedup(alpha, 1, c))
    for k in range(2, k_max + 1):
        s = theoretical_speedup(alpha, k, c)
        if s > best[1] * (1 + 1e-12):
            best = (k, s)
    return best[0]


def draft_cost_ratio(draft_seconds: float | Sequence[float], target_seconds: float | Sequence[float]) -> float:
    """c = one draft forward / one target forward. Give single timings or samples (medians are used)."""
    d = statistics.median(draft_seconds) if isinstance(draft_seconds, Sequence) else float(draft_seconds)
    t = statistics.median(target_seconds) if isinstance(target_seconds, Sequence) else float(target_seconds)
    if not t > 0:
        raise ValueError(f"the target's forward time must be > 0, got {t!r}")
    if not d >= 0:
        raise ValueError(f"the draft's forward time must be >= 0, got {d!r}")
    return d / t


def efficiency(measured_speedup: float, theoretical: float) -> float | None:
    """Measured speedup / theoretical speedup (1.0: no overhead beyond the model forwards)."""
    return measured_speedup / theoretical if theoretical > 0 else None


def median(values: Iterable[float | None]) -> float | None:
    """The median of the values that are not None (the mean of the middle two for an even count); None if none."""
    vals = [float(v) for v in values if v is not None]
    return statistics.median(vals) if vals else None


def run_k(rounds: Iterable) -> int | None:
    """The K of a run: the draft length asked in most rounds that asked for drafts (the larger on ties).

    A fixed-K run gives K even when its last rounds asked for fewer (the token budget was nearly spent).
    """
    counts: dict[int, int] = {}
    for r in rounds:
        k = int(getattr(r, "num_draft_tokens", 0) or 0)
        if k > 0:
            counts[k] = counts.get(k, 0) + 1
    return max(counts, key=lambda k: (counts[k], k)) if counts else None


def _could_accept(round_, k: int | None) -> int:
    """The most drafts a round could have accepted: the K asked of its drafter (`num_draft_tokens`, which the
    engine cuts to the token budget: K = min(K, tokens left - 1)), or more where a copy drafted more; `k` for a
    round that does not say what it asked."""
    asked = getattr(round_, "num_draft_tokens", None)
    asked = int(asked) if asked is not None else int(k or 0)
    return max(asked, _drafted(round_))


def fitted_alpha(rounds: Sequence, k: int | None = None) -> float | None:
    """specui's one alpha estimator: the per-token alpha of eq. 1 that gives the tokens the rounds' verifications
    gave, each round at the K it could accept: sum over rounds of (1 - alpha^(K_r+1)) / (1 - alpha) equals the sum
    of (num_accepted_r + 1).

    A round counts as far as it could go, so a run is not read low for where its budget or an eos cut it short:
    K_r is the K asked of that round (`_could_accept`: the engine asks fewer drafts as the token budget runs out;
    a round asked none says nothing about alpha), and its tokens are its verification's (num_accepted + 1, what an
    eos cut of the emitted tokens leaves alone). A drafter that proposed fewer than it was asked (prompt lookup
    without a match, a confidence stop) still counts at the K asked: that is the drafter's own doing. For a fixed-K
    run without such cuts this is eq. 1 inverted at the mean accepted length.

    `k` (default `run_k(rounds)`) is the K of the run, used for rounds that do not say theirs; None when no round
    drafted, and None for a run that mixes copied rounds with the model's (`copied`, the model + lookup drafter):
    two proposers of different lengths, acceptance and cost, which Theorem 3.8's one alpha, one K and one c do not
    describe.
    """
    if len({bool(getattr(r, "copied", False)) for r in rounds if _drafted(r)}) > 1:
        return None
    k = run_k(rounds) if k is None else k
    if not k or acceptance_rate(rounds) is None:
        return None
    rounds_at: dict[int, int] = {}  # K_r -> rounds that could accept K_r drafts
    tokens = 0
    for r in rounds:
        k_r = _could_accept(r, k)
        if k_r:  # a round that could accept nothing emits one token at any alpha
            rounds_at[k_r] = rounds_at.get(k_r, 0) + 1
            tokens += min(int(r.num_accepted), k_r) + 1
    if not rounds_at:
        return None
    if tokens <= sum(rounds_at.values()):
        return 0.0
    if tokens >= sum(n * (k_r + 1) for k_r, n in rounds_at.items()):
        return 1.0
    return _alpha_giving(tokens, rounds_at)


@dataclass(frozen=True)
class Theory:
    """Theorem 3.8 at a run's fitted alpha, its K and a cost ratio c: the one theoretical figure."""

    alpha: float
    k: int
    c: float
    tokens_per_round: float  # eq. 1 at (alpha, K)
    speedup: float  # Theorem 3.8 at (alpha, K, c), verification costing one forward
    best_k: int  # the K that maximises Theorem 3.8 at (alpha, c)
    best_k_speedup: float


def theory(rounds: Sequence, *, c: float | None, k: int | None = None) -> Theory | None:
    """The theoretical figures of a run (chat tab, Teach tab and benchmark alike); None without drafts or c,
    or without a fitted alpha."""
    k = run_k(rounds) if k is None else k
    alpha = fitted_alpha(rounds, k)
    if alpha is None or c is None:
        return None
    best = best_k(alpha, c)
    return Theory(alpha=alpha, k=k, c=c, tokens_per_round=expected_tokens_per_round(alpha, k),
                  speedup=theoretical_speedup(alpha, k, c), best_k=best,
                  best_k_speedup=theoretical_speedup(alpha, best, c))
