"""Numbers about a run, and the stats line: pure functions over `specui.events.GenerationResult`.

Timing uses engine time: prefill plus each round's draft and verify seconds, as the engine measured
them. The time the UI spends rendering between rounds is left out, so a streamed run is timed like an
unwatched one, and the speculative and plain runs (decoded one after the other, never overlapping)
are timed the same way.

The theoretical speedup is `specui.metrics.theoretical_speedup` (Leviathan et al. 2023, Theorem 3.8)
with alpha inverted from the measured tokens per round (`alpha_from_mean_accepted_length`, so the
formula predicts exactly the rounds that were seen), K the draft length asked, and c the median
seconds per drafted token over the median seconds of one target forward, both from this run (the
plain run's forwards when there is one).
"""

from __future__ import annotations

import html
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

    def as_dict(self) -> dict:
        return dict(self.__dict__)

    def theory(self) -> tuple[float, float, int] | None:
        """(theoretical speedup, alpha, K) from the measured tokens per round, or None without drafts."""
        if self.acceptance_rate is None or self.cost_ratio is None or not self.rounds:
            return None
        k = max(1, round(self.mean_k))
        alpha = metrics.alpha_from_mean_accepted_length(min(max(self.mean_accepted_length, 1.0), k + 1), k)
        return metrics.theoretical_speedup(alpha, k, self.cost_ratio), alpha, k


def run_stats(result, *, plain=None) -> RunStats:
    """Summarise one run. With the plain run, c uses its time per token as the target's cost."""
    seconds = engine_seconds(result)
    rounds = result.rounds
    per_draft_token = [r.draft_s / r.num_drafted for r in rounds if r.num_drafted]
    forwards = [r.verify_s for r in (plain.rounds if plain is not None and plain.rounds else rounds)]
    cost = None
    if per_draft_token and forwards and sorted(forwards)[len(forwards) // 2] > 0:
        cost = metrics.draft_cost_ratio(per_draft_token, forwards)
    return RunStats(
        tokens=len(result.token_ids), rounds=len(rounds), seconds=seconds,
        tokens_per_s=len(result.token_ids) / seconds if seconds > 0 else 0.0,
        acceptance_rate=result.acceptance_rate, mean_accepted_length=result.mean_accepted_length,
        mean_k=sum(r.num_draft_tokens for r in rounds) / len(rounds) if rounds else 0.0, cost_ratio=cost,
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


HINTS = {
    "acceptance rate": "accepted draft tokens / drafted tokens",
    "mean accepted length": "tokens emitted per target forward, bonus included (plain decoding = 1.0)",
    "speculative": "tokens / engine seconds (prefill + draft + verify; time spent drawing the page is left out)",
    "plain": "the target alone, same prompt, settings and seed, timed after the speculative run",
    "speedup": "speculative tokens/s / plain tokens/s (turn Compare on to measure it)",
    "theoretical speedup": "(1 - α^(K+1)) / ((1 - α)(K c + 1)), Leviathan et al. 2023, Theorem 3.8; α from the "
                           "measured tokens per round, c = draft cost / target cost measured in this run",
}


def stats_html(spec: RunStats | None, plain: RunStats | None = None, *, status: str = "") -> str:
    """The stats line under the chat (numbers only; `status` is escaped). Each name has a tooltip."""
    items = []
    if spec is not None:
        rate = "–" if spec.acceptance_rate is None else f"{100 * spec.acceptance_rate:.1f}%"
        items += [("acceptance rate", rate),
                  ("mean accepted length", f"{spec.mean_accepted_length:.2f} tokens/round"),
                  ("speculative", f"{spec.tokens_per_s:.1f} tokens/s")]
        ratio = speedup(spec, plain)
        if plain is not None:
            items.append(("plain", f"{plain.tokens_per_s:.1f} tokens/s"))
        items.append(("speedup", "–" if ratio is None else f"{ratio:.2f}×"))
        theory = spec.theory()
        if theory is not None:
            value, alpha, k = theory
            items.append(("theoretical speedup", f"{value:.2f}× (α={alpha:.2f}, K={k}, c={spec.cost_ratio:.2f})"))
        else:
            items.append(("theoretical speedup", "–"))
        items.append(("tokens", f"{spec.tokens} in {spec.rounds} rounds, {spec.seconds:.2f} s"))
    body = "".join(f'<span class="stat" title="{html.escape(HINTS.get(k, k))}"><span class="stat-name">{html.escape(k)}'
                   f'</span> <span class="stat-value">{html.escape(v)}</span></span>' for k, v in items)
    head = f'<span class="stat-status">{html.escape(status)}</span>' if status else ""
    if not body and not head:
        head = '<span class="stat-status">Send a prompt to see acceptance, tokens/s and speedup.</span>'
    return f'<div class="specui-stats">{head}{body}</div>'
