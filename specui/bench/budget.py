"""Where the time goes: the benchmark's runs split into what Theorem 3.8 counts and what it does not.

Leviathan et al.'s Theorem 3.8 counts model forwards only: one target forward per round, K draft
forwards of cost c each, nothing else. The benchmark's measured speedup also pays for everything
else. `time_budget` splits the timed engine runs of plain and speculative decoding (one run per
prompt, the one the benchmark keeps) into parts, in milliseconds per generated token, with each
forward at the cost the benchmark measured alone (t: a one-token target forward, d: a one-token
draft forward, the verify-cost curve for a round's K+1 rows):

    plain:        forwards (t each) | forwards slower in the loop | the rest of each step (sampling, the
                  round's record) | between steps | prefill
    speculative:  target forwards (t per round, as the theorem counts them) | their extra rows (the
                  verify-cost curve's excess over 1 at the round's rows: cur and every drafted token, a tree's
                  every node) | the verify slower in the loop | the rest of verification (the decision, the
                  round's record) | draft forwards (d each; a tree: one per level) | the rest of drafting
                  (sampling; forwards slower than alone, their weights evicted by the target's) | between
                  rounds | prefills (the target's and the drafter's)

"Slower in the loop": each round records its target forward's own seconds (`Round.forward_s`), and a
forward inside a generation takes longer than the same forward timed alone: its cache is longer than
the curve's (attention grows with it) and its weights were evicted by the drafter's. Rounds without
that record (older runs) count their forwards at the alone cost, as before, the difference staying in
the rest. Then the efficiency (measured speedup / the theorem's) as each part is taken away in turn: the
speculative run's bookkeeping, plain decoding's, the forwards' slowdown in the loop, the verify's extra
rows, the prefills. With all of them gone only what the theorem counts is left, and the efficiency is 1
(with the theorem's alpha fitted to these runs' mean accepted length). So the list says how much of the
gap each part is. Pure arithmetic on recorded rounds; no timing of its own.
"""

from __future__ import annotations

from bisect import bisect_left

from specui.runstats import draft_forwards


def curve_ratio(curve: dict, rows: int) -> float:
    """The verify-cost curve at `rows` new tokens, linear between its measured sizes (flat past the last)."""
    tokens, ratios = curve["tokens"], curve["ratios"]
    i = bisect_left(tokens, rows)
    if i < len(tokens) and tokens[i] == rows:
        return ratios[i]
    if i == 0:
        return ratios[0]
    if i == len(tokens):
        return ratios[-1]
    a, b = tokens[i - 1], tokens[i]
    return ratios[i - 1] + (ratios[i] - ratios[i - 1]) * (rows - a) / (b - a)


def _verified(round_) -> int:
    """The rows of a round's verify: cur and every drafted token (a tree round: every node of its tree; its
    `drafted` lists only the walked path)."""
    return 1 + (len(round_.tree) if getattr(round_, "tree", None) else round_.num_drafted)


def _in_loop(rounds, alone: float) -> float:
    """The seconds the rounds' target forwards took in the loop (`forward_s`), or `alone` (their cost timed alone)
    when some round has no such record."""
    seconds = [getattr(x, "forward_s", 0.0) for x in rounds]
    return sum(seconds) if seconds and all(s > 0 for s in seconds) else alone


def time_budget(plain_results: list, spec_results: list, *, target_s: float, draft_s: float, curve: dict,
                theory: float) -> dict:
    """Split the runs (engine `GenerationResult`s, one per prompt, plain and speculative) into parts.

    target_s, draft_s: one-token forward seconds measured alone; curve: the verify-cost curve
    (`VerifyCost.as_dict()`); theory: Theorem 3.8's speedup for these runs. Returns ms per token of each
    part, both totals, these runs' speedup and efficiency, and the efficiency with parts taken away.
    """
    tokens = sum(len(r.token_ids) for r in plain_results)
    spec_tokens = sum(len(r.token_ids) for r in spec_results)
    if tokens == 0 or tokens != spec_tokens or theory is None or theory <= 0:
        raise ValueError("the budget needs plain and speculative runs of the same length and a theoretical speedup")
    plain_steps = sum(len(r.rounds) for r in plain_results)
    plain_step_s = sum(x.verify_s for r in plain_results for x in r.rounds)
    plain_prefill = sum(r.prefill_s for r in plain_results)
    plain_forwards = _in_loop([x for r in plain_results for x in r.rounds], plain_steps * target_s)
    plain = {"forwards": plain_steps * target_s,
             "forwards slower in the loop": plain_forwards - plain_steps * target_s,
             "step rest": plain_step_s - plain_forwards,
             "between steps": sum(r.total_s for r in plain_results) - plain_prefill - plain_step_s,
             "prefill": plain_prefill}
    rounds = [x for r in spec_results for x in r.rounds]
    verify_rows = sum(curve_ratio(curve, _verified(x)) for x in rounds) * target_s
    drafted = sum(draft_forwards(x) for x in rounds)  # one per drafted token, or per level of a tree
    verify_total = sum(x.verify_s for x in rounds)
    draft_total = sum(x.draft_s for x in rounds)
    spec_prefill = sum(r.prefill_s for r in spec_results)
    verify_forwards = _in_loop(rounds, verify_rows)
    spec = {"target forwards": len(rounds) * target_s,
            "verify extra rows": verify_rows - len(rounds) * target_s,
            "verify slower in the loop": verify_forwards - verify_rows,
            "verify rest": verify_total - verify_forwards,
            "draft forwards": drafted * draft_s,
            "draft rest": draft_total - drafted * draft_s,
            "between rounds": sum(r.total_s for r in spec_results) - spec_prefill - verify_total - draft_total,
            "prefill": spec_prefill}

    def efficiency(plain_gone=(), spec_gone=()) -> float:
        p = sum(v for k, v in plain.items() if k not in plain_gone)
        s = sum(v for k, v in spec.items() if k not in spec_gone)
        return p / s / theory

    bookkeeping = ("verify rest", "draft rest", "between rounds")
    plain_own = ("step rest", "between steps")
    loop = (("forwards slower in the loop",), ("verify slower in the loop",))
    steps = [
        ("these runs", (), ()),
        ("without the speculative run's bookkeeping (verify rest, draft rest, between rounds)", (), bookkeeping),
        ("and without plain decoding's (step rest, between steps)", plain_own, bookkeeping),
        ("and without the forwards' slowdown in the loop (both runs)", plain_own + loop[0], bookkeeping + loop[1]),
        ("and without the verify's extra rows", plain_own + loop[0], bookkeeping + loop[1] + ("verify extra rows",)),
        ("and without the prefills: forwards alone, as the theorem counts", plain_own + loop[0] + ("prefill",),
         bookkeeping + loop[1] + ("verify extra rows", "prefill")),
    ]
    per_token = 1e3 / tokens
    return {
        "plain_ms_per_token": {k: v * per_token for k, v in plain.items()},
        "speculative_ms_per_token": {k: v * per_token for k, v in spec.items()},
        "plain_total_ms_per_token": sum(plain.values()) * per_token,
        "speculative_total_ms_per_token": sum(spec.values()) * per_token,
        "speedup": sum(plain.values()) / sum(spec.values()),
        "efficiency_steps": [{"without": name, "efficiency": efficiency(p, s)} for name, p, s in steps],
        "method": ("one timed run per prompt of each arm (the one the benchmark keeps); forwards at the cost "
                   "measured alone (c's forwards and the verify-cost curve), the target's slowdown in the loop from "
                   "each round's own forward time; the rest by difference"),
    }


def format_budget(b: dict | None) -> list[str]:
    """The report's lines for a budget (none without one)."""
    if not b:
        return []

    def parts(d: dict) -> str:
        return " | ".join(f"{name} {ms:.2f}" for name, ms in d.items())

    lines = ["", ("where the time goes, ms per generated token (forwards at their cost measured alone, then how much "
                  "slower the target's ran in the loop, the rest by difference; one timed run per prompt):"),
             f"  plain        {b['plain_total_ms_per_token']:6.2f} = {parts(b['plain_ms_per_token'])}",
             f"  speculative  {b['speculative_total_ms_per_token']:6.2f} = {parts(b['speculative_ms_per_token'])}",
             f"  these runs: {b['speedup']:.2f}x; efficiency (measured / Thm 3.8), taking parts away in turn:"]
    lines += [f"    {step['efficiency']:.2f}  {step['without']}" for step in b["efficiency_steps"]]
    return lines
