"""Numbers about one run: pure functions over `specui.events.GenerationResult`, for every view of it.

Timing uses engine time: prefill plus each round's draft and verify seconds, as the engine measured
them. Time a UI spends rendering between rounds is left out, so a streamed run is timed like an
unwatched one, and the speculative and plain runs (decoded one after the other, never overlapping)
are timed the same way.

The theoretical speedup is `specui.metrics.theory` (Leviathan et al. 2023, Theorem 3.8, with the
alpha fitted to the measured tokens per round, each round at the K it was asked: `metrics.fitted_alpha`),
with c the median seconds per draft forward (a chain's drafted token, a token tree's level: `draft_forwards`) over the
median seconds of one target forward, both from this run (the plain run's forwards when there is one; without
one, the speculative rounds' verify forwards of K+1 tokens, which cost more than one token's where the verify-cost
curve climbs, as on a CPU: c then reads low and the theory high, and the tooltip says so).
The chat tab, the Teach tab and the API's `stats` all give this figure, at the K chosen (`run_stats(k=)`).

`explain_divergence` says why a greedy speculative run and a plain one part: in reduced precision a
batched (K+1)-token forward and a one-token forward differ in the last bits, so at a near-tie (two
candidates whose probabilities are within a rounding step) the two runs may pick different tokens.
"""

from __future__ import annotations

import dataclasses
import math
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
    mean_accepted_length: float | None  # tokens per target forward, bonus included (None: no round, no forward)
    mean_k: float | None  # K asked of the drafter, averaged over rounds (None: no round)
    cost_ratio: float | None  # c: one draft forward / one target forward
    theory: metrics.Theory | None = None  # Theorem 3.8 at the fitted alpha, the run's K and c
    prefill_s: float = 0.0  # reading the prompt (its new tokens, after what the conversation's cache held)
    reused_tokens: int = 0  # prompt tokens the conversation's cache held (`specui.prompt_cache`)
    trees: bool = False  # the run drafted token trees (no theory: Theorem 3.8 counts chains)
    tree_nodes: int = 0  # token trees: the most nodes a round drafted (the static tree: width + width² + ... to K)

    def as_dict(self) -> dict:
        """JSON-able (the API's `stats`): the numbers, and `theory`, Theorem 3.8's figures at the K this RunStats was
        made with (`run_stats(k=)`: the K chosen, as the chat tab's stats line), or None."""
        out = {k: v for k, v in self.__dict__.items() if k not in ("theory", "trees", "tree_nodes")}
        out["theory"] = dataclasses.asdict(self.theory) if self.theory is not None else None
        return out


def cost_ratio(result, plain=None) -> float | None:
    """c: median seconds per draft forward (a chain's drafted token, a token tree's level) / median seconds of one
    target forward (the plain run's, if any)."""
    return rounds_cost_ratio(result.rounds, plain.rounds if plain is not None and plain.rounds else result.rounds)


def draft_forwards(round_) -> int:
    """The drafter's forwards in a round: one per drafted token of a chain, one per level of a token tree (each level
    one forward over its nodes), where a tree round's `drafted` lists only the path the target walked."""
    nodes = getattr(round_, "tree", None)
    if not nodes:
        return round_.num_drafted
    depth = [0] * len(nodes)
    for i, node in enumerate(nodes):  # a node's parent comes before it
        depth[i] = 1 if node.parent < 0 else depth[node.parent] + 1
    return max(depth)


def rounds_cost_ratio(rounds, forward_rounds) -> float | None:
    """`cost_ratio` over rounds (of one run or several): the drafting rounds' seconds per draft forward (a chain's
    per drafted token, a tree's per level: `draft_forwards`), and the rounds whose verify seconds time one target
    forward (plain decoding's, or the same rounds). Rounds whose draft was copied (`copied`: no model forward) are
    left out when the run has model rounds too: c is the model's cost."""
    drafting = [r for r in rounds if r.num_drafted]
    model_rounds = [r for r in drafting if not r.copied]
    per_draft_token = [r.draft_s / draft_forwards(r) for r in (model_rounds or drafting)]
    forwards = [r.verify_s for r in forward_rounds]
    if per_draft_token and forwards and metrics.median(forwards) > 0:
        return metrics.draft_cost_ratio(metrics.median(per_draft_token), metrics.median(forwards))
    return None


def run_stats(result, *, plain=None, k: int | None = None) -> RunStats:
    """Summarise one run. With the plain run, c uses its time per token as the target's cost. Theorem 3.8 is taken
    at `k`: the K chosen (the chat tab and the Teach tab: even where the token budget cut every round short), else the
    run's own (`metrics.run_k`)."""
    seconds = engine_seconds(result)
    rounds = result.rounds
    c, trees = cost_ratio(result, plain), any(r.tree for r in rounds)
    return RunStats(
        tokens=len(result.token_ids), rounds=len(rounds), seconds=seconds,
        tokens_per_s=len(result.token_ids) / seconds if seconds > 0 else 0.0,
        acceptance_rate=result.acceptance_rate, mean_accepted_length=result.mean_accepted_length,
        mean_k=sum(r.num_draft_tokens for r in rounds) / len(rounds) if rounds else None, cost_ratio=c,
        # Theorem 3.8 counts a chain of K drafts: a tree run's stats give none (the benchmark reads a tree as such a
        # chain with the tree's tokens per forward, and says so)
        theory=None if trees else metrics.theory(rounds, c=c, k=k), prefill_s=result.prefill_s,
        reused_tokens=result.reused_tokens, trees=trees,
        tree_nodes=max((len(r.tree) for r in rounds if r.tree), default=0),
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


NEAR_TIE_REL_TOL = 0.1  # ~ a few bfloat16 steps of a logit below 16 (one step there moves p by up to 6%)


@dataclass(frozen=True)
class Divergence:
    """Where two greedy outputs part, and whether a near-tie explains it."""

    index: int  # the first position where they differ
    token_a: int | None  # run a's token there (None: run a had ended)
    token_b: int | None
    prob_a: float | None  # the target's probability of token_a in run a
    prob_b: float | None
    near_tie: bool  # both tokens present and their probabilities within the tolerance

    def describe(self) -> str:
        if self.token_a is None or self.token_b is None:
            return f"the outputs differ in length from token {self.index} on"
        verdict = ("a near-tie: rounding in one forward or the other decides it" if self.near_tie
                   else "not a near-tie")
        return (f"token {self.index}: {self.token_a} (p {self.prob_a:.4f}) vs {self.token_b} (p {self.prob_b:.4f}), "
                f"{verdict}")


def explain_divergence(a_ids: list[int], a_probs: list[float], b_ids: list[int], b_probs: list[float], *,
                       rel_tol: float = NEAR_TIE_REL_TOL, abs_tol: float = 1e-6) -> Divergence | None:
    """Explain where two greedy runs of the same prompt part (None when they are identical).

    a_ids, b_ids: the two runs' new tokens; a_probs, b_probs: the target's probability of each of those
    tokens in its own run (`token_probs(result)`). Each run's token is its own forward's argmax, so
    at a divergence caused by rounding both are near the top and their probabilities nearly equal:
    `near_tie` holds when |p_a - p_b| <= max(rel_tol * max(p_a, p_b), abs_tol). A divergence that is
    not a near-tie is not explained by precision, and is worth a bug report.
    """
    if len(a_probs) != len(a_ids) or len(b_probs) != len(b_ids):
        raise ValueError("need one probability per token in each run")
    i = first_difference(a_ids, b_ids)
    if i is None:
        return None
    if i >= len(a_ids) or i >= len(b_ids):
        return Divergence(i, a_ids[i] if i < len(a_ids) else None, b_ids[i] if i < len(b_ids) else None,
                          a_probs[i] if i < len(a_probs) else None, b_probs[i] if i < len(b_probs) else None, False)
    pa, pb = float(a_probs[i]), float(b_probs[i])
    near = math.isfinite(pa) and math.isfinite(pb) and abs(pa - pb) <= max(rel_tol * max(pa, pb), abs_tol)
    return Divergence(i, int(a_ids[i]), int(b_ids[i]), pa, pb, near)


def token_probs(result) -> list[float]:
    """The target's probability of each emitted token, in order (from the rounds' records)."""
    return [float(p) for r in result.rounds for p in r.token_target_probs]
