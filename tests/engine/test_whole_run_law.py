"""Sampling exactness over whole runs: every token of a run, EOS and the token budget included.

The first-two-token tests (`test_engine_sampling.py`) judge one or two rounds. Here a run of L = 5 tokens with an
EOS id (a run ends at it) is judged whole: its law, enumerated from the target alone (full forwards, transformers'
own `RepetitionPenaltyLogitsProcessor` as the penalty's reference), against thousands of seeded runs, by a chi-square
test over the whole sequences and over each later position's marginal. That covers what a first round cannot: rounds
that start after accepted blocks, an EOS inside an accepted block (tokens after it dropped), and a last round whose
block the budget cuts short. A verify that resamples from p instead of the residual fails it.
"""

import pytest
import torch
from scipy.stats import chisquare
from transformers import RepetitionPenaltyLogitsProcessor

from specui import SpeculativeEngine
from specui.heads import eagle
from specui.sampling import Sampling, logits_to_probs
from tests.engine.head_helpers import perturb
from tests.engine.test_engine_sampling import resample_from_target
from tests.helpers import five_token_pair

PROMPT, LENGTH, EOS, RUNS = [1, 2, 4, 1, 2], 5, 3, 2000


@pytest.fixture(scope="module")
def models():
    target, draft = five_token_pair()
    return target, draft, {"eagle": perturb(eagle.build(target, token_ids=torch.arange(5)), scale=0.3, seed=5)}


def exact_runs(target, settings: dict) -> dict[tuple[int, ...], float]:
    """P(run) for every run of LENGTH tokens, or fewer ending at EOS, by enumeration with full forwards."""
    sampling = Sampling(**{k: settings[k] for k in ("temperature", "top_k", "top_p") if k in settings})
    penalty = RepetitionPenaltyLogitsProcessor(settings.get("repetition_penalty", 1.0))
    done, live = {}, {(): 1.0}
    for _ in range(LENGTH):
        runs = list(live)
        contexts = torch.tensor([PROMPT + list(r) for r in runs])
        with torch.no_grad():
            logits = penalty(contexts, target(contexts).logits[:, -1])
        grown = {}
        for run, p in zip(runs, logits_to_probs(logits, sampling).double()):
            for token in range(p.shape[0]):
                if p[token] > 0:
                    (done if token == EOS else grown)[run + (token,)] = live[run] * float(p[token])
        live = grown
    return {**done, **live}


def p_value(counts: dict, law: dict) -> float:
    """Chi-square of observed runs against the law (runs expected fewer than 5 times pooled); none impossible."""
    assert set(counts) <= set(law), f"runs the target never makes: {sorted(set(counts) - set(law))[:3]}"
    n = sum(counts.values())
    big = [r for r in law if law[r] * n >= 5]
    small = [r for r in law if law[r] * n < 5]
    observed = [counts.get(r, 0) for r in big] + ([sum(counts.get(r, 0) for r in small)] if small else [])
    expected = [law[r] * n for r in big] + ([sum(law[r] for r in small) * n] if small else [])
    scale = n / sum(expected)
    return chisquare(observed, [e * scale for e in expected]).pvalue


def at(position: int, runs: dict) -> dict:
    """The law (or counts) of the token at `position` (-1: the run ended before it)."""
    out = {}
    for run, v in runs.items():
        key = run[position] if position < len(run) else -1
        out[key] = out.get(key, 0) + v
    return out


def smallest_p(engine, settings: dict) -> float:
    """The smallest p-value of the whole runs' test and the later positions' (3 to LENGTH), Bonferroni-corrected."""
    counts = {}
    for seed in range(RUNS):
        run = tuple(engine.generate(PROMPT, max_new_tokens=LENGTH, seed=seed, **settings).token_ids)
        assert len(run) == LENGTH or run[-1] == EOS
        counts[run] = counts.get(run, 0) + 1
    law = exact_runs(engine.target_model, settings)
    p_values = [p_value(counts, law)] + [p_value(at(i, counts), at(i, law)) for i in range(2, LENGTH)]
    return min(p_values) * len(p_values)


CASES = {
    "draft model, K 4, penalty, top-p": dict(drafter="model", num_draft_tokens=4, temperature=1.0, top_p=0.9,
                                             repetition_penalty=1.3),
    "EAGLE tree, K 2": dict(drafter="eagle", num_draft_tokens=2, tree_width=2, temperature=0.8, top_k=4),
    "prompt lookup, K 3, penalty": dict(drafter="prompt_lookup", num_draft_tokens=3, temperature=1.2,
                                        repetition_penalty=1.6),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CASES))
def test_whole_runs_follow_the_target(models, name):
    target, draft, heads = models
    engine = SpeculativeEngine(target, draft, heads=heads, eos_token_id=EOS)
    assert smallest_p(engine, CASES[name]) > 1e-3


@pytest.mark.slow
def test_a_broken_rule_fails_the_whole_run_test(models):
    target, draft, _ = models

    class Broken(SpeculativeEngine):
        verify = staticmethod(resample_from_target)

    engine = Broken(target, draft, eos_token_id=EOS)
    assert smallest_p(engine, dict(drafter="model", num_draft_tokens=2, temperature=1.0)) < 1e-6
