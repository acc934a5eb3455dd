"""`python -m specui.bench --drafter all`: plain decoding and every drafter of the preset, side by side.

The arms are plain decoding and one per drafter (`specui.arena.contestants`), timed with the benchmark's
own harness (`specui.bench.run.run_prompts`: warm-up passes, then the arms interleaved per prompt, the
per-prompt median kept) on the same prompts, settings and seeds, one run at a time. Per arm:
    tokens/s, speedup   all tokens / the sum of the per-prompt medians; over plain decoding's
    acceptance rate, alpha, mean accepted length   `specui.metrics` over the rounds of the first timed run of each
                        prompt (alpha: `fitted_alpha`, each round at the K it was asked)
    K                   the K it was given, as chosen: the preset's own K for it (`drafter_tokens`), else the
                        plan's (the chat tab's arena table and stats line give the same, `specui.arena.chosen_k`)
    c                   `specui.runstats.rounds_cost_ratio`: median seconds per draft forward in those rounds (a
                        chain's drafted token, a token tree's level)
                        over the median seconds of plain decoding's one-token forwards (the chat tab's c)
    theoretical speedup `specui.metrics.theory` at the fitted alpha, that K and that c
    identical_to_plain  greedy: every timed output equals plain decoding's, on every prompt
A head drafter (EAGLE, Medusa, early exit) named alone runs here too, beside plain decoding: transformers
has no assisted generation to time it against. With token trees (`--tree-width`), every drafter also runs
its chain of the same K (arm "NAME chain"), side by side, and reports the tree's tokens per target forward
and speed over the chain's.
"""

from __future__ import annotations

from collections.abc import Sequence

from specui import metrics, runstats
from specui.arena import PLAIN, label
from specui.bench.run import CHAIN, Arm, Plan, PromptRun, prompt_medians, tokens_per_s, tree_over_chain
from specui.settings import DecodeSettings

CHAIN_ARM = " " + CHAIN  # with token trees: the arm "NAME chain" drafts NAME's chain of K


def arms(names: Sequence[str], decode: DecodeSettings | None = None, *,
         ks: dict[str, int] | None = None, confidences: dict[str, float] | None = None) -> dict[str, Arm]:
    """One arm per contestant, keyed by its name: plain decoding, or the engine with that drafter, at its K
    in `ks` (a preset's `drafter_tokens`; default and for names missing there: the plan's K) and its
    draft_confidence in `confidences` (a preset's `draft_confidence`; else the plan's); when `decode` draws
    token trees, each drafter's chain of the same K right after it."""
    ks, confidences = ks or {}, confidences or {}
    out = {}
    for name in names:
        out[name] = Arm("plain") if name == PLAIN else Arm("speculative", k=ks.get(name), drafter=name,
                                                           confidence=confidences.get(name))
        if name != PLAIN and decode is not None and decode.tree_width > 1:
            out[name + CHAIN_ARM] = Arm("speculative", k=ks.get(name), drafter=name, chain=True)
    return out


def _k(arm: Arm | None, decode: DecodeSettings) -> int:
    """The K an arm ran at, as chosen: its own, else the plan's (even where the token budget cut rounds short)."""
    return decode.num_draft_tokens if arm is None or arm.k is None else arm.k


def _confidence(arm: Arm | None, decode: DecodeSettings) -> float:
    """The draft_confidence an arm ran with: its own, else the plan's."""
    return decode.draft_confidence if arm is None or arm.confidence is None else arm.confidence


def _rounds(runs: list[PromptRun], name: str) -> list:
    return [x for r in runs for x in r.results[name].rounds]


def summarise(runs: list[PromptRun], plan: Plan, *, arms: dict[str, Arm] | None = None) -> dict:
    """The figures of each arm of `arms` (keyed by name, plain first; with token trees each drafter's chain arm,
    "NAME chain", after it and the tree's ratios over it), the identity check and one row per prompt."""
    s = plan.decode
    n, greedy = s.max_new_tokens, s.greedy
    tps = tokens_per_s(runs, n)
    plain_rounds = _rounds(runs, PLAIN)
    names = list(tps)  # the arms, in the order `arms` made them
    drafters = {}
    for name in names:
        rounds = _rounds(runs, name)
        c = None if name == PLAIN else runstats.rounds_cost_ratio(rounds, plain_rounds)
        k = None if name == PLAIN else _k((arms or {}).get(name), s)
        fit = metrics.theory(rounds, c=c, k=k)
        chain = name.endswith(CHAIN_ARM)
        drafters[name] = {
            "label": f"{label(name.removesuffix(CHAIN_ARM))}, {CHAIN}" if chain else label(name),
            "num_draft_tokens": k,
            "draft_confidence": None if name == PLAIN else _confidence((arms or {}).get(name), s),
            "tokens_per_s": tps[name], "speedup_vs_plain": tps[name] / tps[PLAIN],
            "acceptance_rate": metrics.acceptance_rate(rounds),
            "mean_accepted_length": metrics.mean_accepted_length(rounds),
            "draft_cost_ratio": c, "alpha_per_token": fit.alpha if fit else None,
            "theoretical_speedup": fit.speedup if fit else None,
            "identical_to_plain": all(r.matches_plain(name) for r in runs) if greedy else None,
        }
    for name in names:
        if name + CHAIN_ARM in drafters:  # the tree over its chain, side by side
            drafters[name].update(tree_over_chain(drafters[name], drafters[name + CHAIN_ARM]))
    rows = []
    for r, md in zip(runs, prompt_medians(runs)):
        rows.append({"prompt_tokens": r.prompt_tokens, "prompt_end": r.preview, "drafters": {name: {
            "tokens_per_s": n / md[name], "speedup_vs_plain": md[PLAIN] / md[name],
            "acceptance_rate": metrics.acceptance_rate(r.results[name].rounds),
            "mean_accepted_length": metrics.mean_accepted_length(r.results[name].rounds),
            "identical_to_plain": r.matches_plain(name) if greedy else None,
            "tokens": len(r.outputs[name][0])} for name in names}})
    checks = [d["identical_to_plain"] for name, d in drafters.items() if name != PLAIN]
    return {"drafters": drafters, "identical_to_plain": all(checks) if greedy else None,
            "num_draft_tokens": s.num_draft_tokens, "rows": rows}
