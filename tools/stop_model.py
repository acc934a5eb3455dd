"""What a drafter's rounds cost, and what a different confidence stop or cheaper parts would give: a model of the
rounds, fitted to this machine and checked against a measured run.

    python -m tools.stop_model [--preset smollm2-chat] [--drafter eagle] [--prompts 8] [--k 8]

Greedy, on the first `--prompts` held-out prompts (a chat preset's; the benchmark's built-in code otherwise), 128
tokens each, decode time only (the prefill is the same in every arm). It runs, in one process:
1. plain decoding: the time of a token (its forward, and the step's rest);
2. the drafter as the preset runs it (K and confidence stop): the measured speedup, and what each round cost, to
   fit the model's parts: a round's drafting a + b (k - 1) for k drafts (least squares), and the rest of a round
   beside its forward and drafting (the mean: a slow round counts as it did in the run);
3. the drafter at K = `--k` without a stop, teacher-forced: every round keeps none of its drafts (its token is the
   target's own, so the run writes plain decoding's tokens one a round), which records at every position of the
   answer the chain the drafter proposes there, the draft's top probability at each of its tokens, and how many of
   them the target would accept (in greedy mode a shorter chain from there accepts min(that, its length)).
A verify forward of r rows costs what the run's own verifies of r rows took (their mean), or where it had few,
the one-token forward × the verify-cost curve (`specui.verify_cost`, measured here). The model then walks each
answer as the engine would under each stop (draft while the product of the top probabilities is at least τ, as
`draft_confidence` does; keep what the target accepts; go on from the next position) and prints the predicted
speedup beside the measured one, then what it would be with drafting free, with no bookkeeping a round, with every
verify row free, and all three. The tokens each round keeps are the drafter's own, so only the costs are modelled;
greedy only (a sampled round's acceptance is a draw).
"""

from __future__ import annotations

import argparse
import itertools
import statistics
from dataclasses import dataclass, replace

import torch

from specui import chat_prompts
from specui.bench.prompts import builtin_prompts, tokenize_prompts
from specui.drafters.base import Confidence
from specui.events import Kind
from specui.loading import load_pair
from specui.presets import load_config
from specui.settings import DecodeSettings
from specui.verify_rule import Verdict
from specui.verify_cost import measure_verify_cost

TAUS = (0.0, 0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8)


@dataclass(frozen=True)
class Costs:
    """Seconds: plain decoding's token, a verify of r rows (`verify[r - 1]`), drafting k tokens (first + next (k-1)),
    and the rest of a round."""

    plain: float
    verify: tuple[float, ...]
    first: float
    next: float
    rest: float


@dataclass(frozen=True)
class Chain:
    """The chain a drafter proposes at one position of an answer (at a fixed K, without a stop): the draft's top
    probability at each of its tokens, and how many of them the target accepts."""

    top: tuple[float, ...]
    accepted: int


def drafts_under(chain: Chain, tau: float, k: int) -> int:
    """How many tokens a round drafts under a confidence stop of tau (`specui.drafters.base.Confidence`: a token
    is drafted, then the round stops once the product of the top probabilities so far falls below tau)."""
    confident, drafted = Confidence(tau), 0
    for top in chain.top[:k]:
        drafted += 1
        if not confident.goes_on_after(top):
            break
    return drafted


def predict(answers: list[list[Chain]], costs: Costs, tau: float, k: int) -> tuple[float, float]:
    """(speedup over plain decoding, tokens per round) of decoding each answer (its chain at every position) under a
    stop of tau and at most k drafts: a round at position t drafts from chain t, keeps what the target accepts of
    that, adds the target's token, and the next round starts after them."""
    tokens = seconds = rounds = 0.0
    for chains in answers:
        t = 0
        while t < len(chains):
            chain = chains[t]
            drafted = drafts_under(chain, tau, k)  # an answer's last positions hold shorter chains, as K is capped
            kept = min(chain.accepted, drafted)
            drafting = costs.first + costs.next * (drafted - 1) if drafted else 0.0
            seconds += drafting + costs.verify[min(drafted, len(costs.verify) - 1)] + costs.rest
            tokens, rounds, t = tokens + kept + 1, rounds + 1, t + kept + 1
    return costs.plain * tokens / seconds, tokens / rounds


def keep_none(*, target_probs, draft_tokens, draft_probs, generator, target_argmax=None) -> Verdict:
    """A verify rule that keeps no draft (greedy): the round's token is the target's at the first position, as plain
    decoding's; `accept_probs` still says which drafts the target's argmax agrees with."""
    best, drafted = target_argmax.tolist(), draft_tokens.tolist()
    agree = [1.0 if d == b else 0.0 for d, b in zip(drafted, best)]
    return Verdict(0, best[0], Kind.RESAMPLED if drafted else Kind.BONUS, agree, [], None)


def accepted(round_) -> int:
    """How many of a round's drafts the greedy rule would accept: the leading drafts the target's argmax agrees with."""
    n = 0
    while n < len(round_.accept_probs) and round_.accept_probs[n] == 1.0:
        n += 1
    return n


def fit_drafting(rounds) -> tuple[float, float]:
    """(first, next): least squares of draft seconds = first + next (k - 1) over rounds of k >= 1 drafts."""
    further, seconds = zip(*[(len(r.drafted) - 1, r.draft_s) for r in rounds if r.drafted])
    if len(set(further)) < 2:  # one chain length: no slope to fit
        return statistics.fmean(seconds), 0.0
    slope, intercept = statistics.linear_regression(further, seconds)
    return intercept, max(slope, 0.0)


def verify_seconds(rounds, one_token: float, ratios) -> tuple[float, ...]:
    """A verify of r rows (`[r - 1]`): the mean of the measured run's verify forwards of r rows where it has
    at least 5 of them (their cost inside the loop: caches cooled by the drafting), else the verify-cost curve's
    ratio times plain decoding's forward; never less than a verify of fewer rows."""
    by_rows: dict[int, list[float]] = {}
    for r in rounds:
        by_rows.setdefault(len(r.drafted) + 1, []).append(r.forward_s)
    seconds = [statistics.fmean(by_rows[n]) if len(by_rows.get(n, ())) >= 5 else one_token * ratio
               for n, ratio in enumerate(ratios, start=1)]
    return tuple(itertools.accumulate(seconds, max))  # more rows never cost less (a noisy point would say so)


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m tools.stop_model", description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", default="smollm2-chat", help="a preset of models.yaml (default: %(default)s)")
    ap.add_argument("--drafter", default="eagle", help="the drafter modelled (default: %(default)s)")
    ap.add_argument("--prompts", type=int, default=8, help="the first N held-out prompts (default: %(default)s)")
    ap.add_argument("--tokens", type=int, default=128, help="tokens written per prompt (default: %(default)s)")
    ap.add_argument("--k", type=int, default=8, help="the chains recorded without a stop (the longest K modelled)")
    return ap.parse_args(argv)


def main(argv=None) -> dict:
    args = parse_args(argv)
    torch.set_num_threads(1)
    preset = load_config(None).get(args.preset)
    pair = load_pair(preset)
    engine = pair.engine()
    if preset.chat_template:
        prompts = tokenize_prompts(chat_prompts.HELD_OUT[:args.prompts], pair.tokenizer, chat=True)
    else:
        prompts = builtin_prompts(pair.tokenizer, count=args.prompts, length=128)
    k_preset, tau_preset = preset.k_for(args.drafter), preset.confidence_for(args.drafter)
    k_chain = max(args.k, k_preset)  # the chains hold every K the table models

    forced = pair.engine()
    forced.verify = keep_none  # the instance's rule (`SpeculativeEngine.verify` may be swapped)

    def run(prompt, chains=False, **keywords):
        return (forced if chains else engine).generate(
            prompt, DecodeSettings(max_new_tokens=args.tokens, ignore_eos=True, seed=0, **keywords))

    arms = {"plain": {"speculative": False},
            "preset": {"drafter": args.drafter, "num_draft_tokens": k_preset, "draft_confidence": tau_preset},
            "chains": {"chains": True, "drafter": args.drafter, "num_draft_tokens": k_chain, "draft_confidence": 0.0}}
    for keywords in arms.values():  # warm every path once
        run(prompts[0], **keywords)
    results = {name: [] for name in arms}
    for prompt in prompts:  # interleaved, prompt by prompt
        for name, keywords in arms.items():
            results[name].append(run(prompt, **keywords))
        if not results["preset"][-1].token_ids == results["chains"][-1].token_ids == results["plain"][-1].token_ids:
            raise SystemExit("the drafter's greedy output differs from plain decoding's")

    def decode_seconds(name):  # a run's time after its prefill, summed over the prompts
        return sum(r.total_s - r.prefill_s for r in results[name])

    tokens = args.tokens * len(prompts)
    plain = decode_seconds("plain") / tokens
    one_token = statistics.fmean(r.forward_s for res in results["plain"] for r in res.rounds)
    curve = measure_verify_cost(pair.target, max_tokens=k_chain + 1, repeats=9)
    preset_rounds = [r for res in results["preset"] for r in res.rounds]
    first, next_ = fit_drafting(preset_rounds)
    # a round's rest: its time beside its drafting and its verify forward (bookkeeping, the loop), on average
    rest = (decode_seconds("preset") - sum(r.draft_s + r.forward_s for r in preset_rounds)) / len(preset_rounds)
    costs = Costs(plain=plain, verify=verify_seconds(preset_rounds, one_token, curve.ratios), first=first, next=next_,
                  rest=rest)
    longest = max(len(r.drafted) for res in results["chains"] for r in res.rounds)  # Medusa: at most its heads
    chains = [[Chain(tuple(r.draft_probs), accepted(r)) for r in res.rounds] for res in results["chains"]]
    measured = plain * tokens / decode_seconds("preset")

    print(f"{args.preset}, {args.drafter}, {len(prompts)} prompts x {args.tokens} tokens, greedy, decode time only")
    print(f"plain decoding {1e3 * plain:.2f} ms a token (its forward {1e3 * one_token:.2f}); drafting "
          f"{1e3 * first:.2f} ms + {1e3 * next_:.2f} ms a further token; a round's rest {1e3 * costs.rest:.2f} ms; "
          "verify-cost curve " + " ".join(f"{x:.2f}" for x in curve.ratios))
    predicted = predict(chains, costs, tau_preset, k_preset)
    print(f"the preset (K <= {k_preset}, tau {tau_preset}): measured {measured:.3f}x "
          f"({tokens / len(preset_rounds):.2f} tokens a round), the model {predicted[0]:.3f}x ({predicted[1]:.2f}; "
          f"{sum(map(len, chains))} recorded chains)")
    print("\n" + f"{'tau':18s}" + "  ".join(f"{t:>6}" for t in TAUS))
    table = {}
    free = tuple(min(v, one_token) for v in costs.verify)  # every verify at a one-token forward's cost
    for label, variant in (("today", costs), ("drafting free", replace(costs, first=0.0, next=0.0)),
                           ("no rest a round", replace(costs, rest=0.0)),
                           ("verify rows free", replace(costs, verify=free)),
                           ("all three", replace(costs, first=0.0, next=0.0, rest=0.0, verify=free))):
        row = [predict(chains, variant, t, longest if t else k_preset)[0] for t in TAUS]
        table[label] = dict(zip(TAUS, row))
        print(f"{label:18s}" + "  ".join(f"{x:5.3f}x" for x in row)
              + f"   best {max(row):.3f}x at tau {TAUS[row.index(max(row))]}")
    print(f"(tau 0: K {k_preset}, the preset's; every other tau: K <= {longest})")
    return {"measured": measured, "predicted": predicted[0], "table": table, "costs": costs}


if __name__ == "__main__":
    main()
