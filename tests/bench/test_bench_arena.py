"""`python -m specui.bench --drafter all`'s figures (`specui.bench.arena.summarise`) from hand-made runs: each drafter's
K is the K it was given, as the chat tab's arena table and stats line give it, even where the token budget cut every
round short."""

from __future__ import annotations

from specui.bench.arena import arms, summarise
from specui.bench.run import Plan, PromptRun
from specui.events import GenerationResult, Round
from specui.settings import DecodeSettings


def result(asked: list[int], *, plain: bool = False) -> GenerationResult:
    """A run whose rounds asked for `asked` drafts each (plain: one token a round) and accepted them all."""
    out = GenerationResult(prefill_s=0.01)
    for i, k in enumerate(asked):
        drafted = [] if plain else list(range(k))
        tokens = [*drafted, 9]
        out.add(Round(index=i, token_ids=tokens, kinds=["plain"] if plain else ["accepted"] * k + ["bonus"],
                      drafted=drafted, num_accepted=len(drafted), target_probs=[0.5] * k, draft_probs=[1.0] * k,
                      accept_probs=[1.0] * k, uniforms=[], token_target_probs=[0.5] * len(tokens),
                      token_draft_probs=[None] * len(tokens), residual_top=[], num_draft_tokens=0 if plain else k,
                      draft_s=0.0 if plain else 0.001 * k, verify_s=0.01, elapsed_s=0.0, speculative=not plain))
    out.stop_reason = "length"
    return out


def test_each_drafter_reports_the_k_it_was_given_not_the_most_a_round_asked_for():
    plan = Plan(decode=DecodeSettings(max_new_tokens=8, num_draft_tokens=64), repeats=1, warmup=0)
    given = arms(["plain", "model", "medusa"], ks={"medusa": 1})
    results = {"plain": result([0] * 8, plain=True), "model": result([7]), "medusa": result([1] * 4)}
    run = PromptRun(prompt_tokens=5, seconds={name: [0.1] for name in results},
                    outputs={name: [list(r.token_ids)] for name, r in results.items()}, results=results)
    figures = summarise([run], plan, arms=given)["drafters"]
    assert {name: d["num_draft_tokens"] for name, d in figures.items()} == {"plain": None, "model": 64, "medusa": 1}
