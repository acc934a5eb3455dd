"""Numbers about one run: pure functions over `specui.events.GenerationResult`, for every view of it.

Timing uses engine time: prefill plus each round's draft and verify seconds, as the engine measured
them. Time a UI spends rendering between rounds is left out, so a streamed run is timed like an
unwatched one, and the speculative and plain runs (decoded one after the other, never overlapping)
are timed the same way.

The theoretical speedup is `specui.metrics.theory` (Leviathan et al. 2023, Theorem 3.8, with the
alpha fitted to the measured tokens per round), with c the median seconds per drafted token over the
median seconds of one target forward, both from this run (the plain run's forwards when there is one).
The chat tab and the Teach tab both show this figure.
"""

from __future__ import annotations

from dataclasses import dataclass

from specui import metrics


def round_times(result) -> list[float]:
    """Engine seconds since the start at the end of each round (prefill included)."""
    t, times = result.prefill_s, []
    for r in result.rounds:
        t += r.draft_s + r.verify_s
        times.append(t)
    return times


def engine_seconds(result) -> float:
    times = round_times(result)
    return times[-1] if times else result.prefill_s


@dataclass(frozen=True)
class RunStats:
    tokens: int
    rounds: int
    seconds: float  # engine time
    tokens_per_s: float
    acceptance_rate: float | None  # accepted drafts / drafted tokens
    mean_accepted_length: float  # tokens per target forward, bonus included
    mean_k: float  # K asked of the drafter, averaged over rounds
    cost_ratio: float | None  # c: one draft forward / one target forward
    theory: metrics.Theory | None = None  # Theorem 3.8 at the fitted alpha, the run's K and c

    def as_dict(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "theory"}


def cost_ratio(result, plain=None) -> float | None:
    """c: median seconds per drafted token / median seconds of one target forward (the plain run's, if any)."""
    rounds = result.rounds
    per_draft_token = [r.draft_s / r.num_drafted for r in rounds if r.num_drafted]
    forwards = [r.verify_s for r in (plain.rounds if plain is not None and plain.rounds else rounds)]
    if per_draft_token and forwards and metrics.median(forwards) > 0:
        return metrics.draft_cost_ratio(metrics.median(per_draft_token), metrics.median(forwards))
    return None


def run_stats(result, *, plain=None) -> RunStats:
    """Summarise one run. With the plain run, c uses its time per token as the target's cost."""
    seconds = engine_seconds(result)
    rounds = result.rounds
    c = cost_ratio(result, plain)
    return RunStats(
        tokens=len(result.token_ids), rounds=len(rounds), seconds=seconds,
        tokens_per_s=len(result.token_ids) / seconds if seconds > 0 else 0.0,
        acceptance_rate=result.acceptance_rate, mean_accepted_length=result.mean_accepted_length,
        mean_k=sum(r.num_draft_tokens for r in rounds) / len(rounds) if rounds else 0.0, cost_ratio=c,
        theory=metrics.theory(rounds, c=c),
    )


def speedup(spec: RunStats, plain: RunStats | None) -> float | None:
    if plain is None or plain.tokens_per_s <= 0 or spec.tokens_per_s <= 0:
        return None
    return spec.tokens_per_s / plain.tokens_per_s


def first_difference(a: list[int], b: list[int]) -> int | None:
    """Index of the first token where two outputs differ (None if identical)."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))
