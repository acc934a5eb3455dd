"""A skeptic's sampling checks: whole runs under combinations the other chi-square tests leave out.

`test_whole_run_law` judges whole runs (EOS inside blocks, budgets ending inside blocks) for three settings; the
first-two-token tests judge one or two rounds. Neither samples with adaptive K (K changes between rounds, so only
whole runs can tell), with a very high or very low temperature, with the repetition penalty on the heads that draft
without it (Medusa, early exit) or on EAGLE's chain, with Medusa's trees, or with the copying drafters under a
penalty. Each case here runs 2,000 seeded whole runs and compares them by chi-square with the target's law,
enumerated with full forwards (`test_whole_run_law.smallest_p`). Two broken variants show the power at these
settings: a verify that resamples from p instead of the residual (with adaptive K), and a drafter that samples at
the run's temperature but reports q at temperature 1 (at temperatures 0.15 and 5).
"""

from __future__ import annotations

import pytest
import torch

from specui import SpeculativeEngine
from specui.drafters import Draft
from specui.drafters.model import ModelDrafter
from specui.heads import eagle, early_exit, medusa
from tests.engine.head_helpers import perturb
from tests.engine.test_engine_sampling import resample_from_target
from tests.engine.test_whole_run_law import EOS, smallest_p
from tests.helpers import five_token_pair


@pytest.fixture(scope="module")
def engine():
    target, draft = five_token_pair()
    heads = {"eagle": perturb(eagle.build(target, token_ids=torch.arange(5)), scale=0.3, seed=5),
             "medusa": perturb(medusa.build(target, token_ids=torch.tensor([0, 1, 2, 4]), num_heads=2), scale=0.3,
                               seed=2),
             "early_exit": perturb(early_exit.build(target, token_ids=torch.tensor([0, 1, 3, 4]), exit_layer=1),
                                   scale=0.2, seed=2)}
    return SpeculativeEngine(target, draft, heads=heads, eos_token_id=EOS)


CASES = {
    "draft model, adaptive K, top-k": dict(drafter="model", num_draft_tokens=1, adaptive=True, temperature=0.9,
                                           top_k=4),
    "draft model, temperature 5": dict(drafter="model", num_draft_tokens=3, temperature=5.0),
    "draft model, temperature 0.15": dict(drafter="model", num_draft_tokens=3, temperature=0.15),
    "model + lookup, adaptive, penalty": dict(drafter="model_lookup", num_draft_tokens=2, adaptive=True,
                                              temperature=1.0, repetition_penalty=1.6),
    "EAGLE chain, penalty, confidence": dict(drafter="eagle", num_draft_tokens=3, temperature=1.0,
                                             repetition_penalty=1.5, draft_confidence=0.3),
    "Medusa chain, penalty": dict(drafter="medusa", num_draft_tokens=2, temperature=1.0, repetition_penalty=1.6),
    "Medusa tree, top-p": dict(drafter="medusa", num_draft_tokens=2, tree_width=2, temperature=1.2, top_p=0.85),
    "early exit, adaptive, penalty": dict(drafter="early_exit", num_draft_tokens=2, adaptive=True, temperature=1.0,
                                          repetition_penalty=1.6),
    "early exit + lookup, penalty, top-k": dict(drafter="early_exit_lookup", num_draft_tokens=3, temperature=1.1,
                                                top_k=3, repetition_penalty=1.3),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CASES))
def test_whole_runs_follow_the_target(engine, name):
    assert smallest_p(engine, CASES[name]) > 1e-3


@pytest.mark.slow
def test_adaptive_k_moves_in_these_runs(engine):
    """The adaptive cases have power only if K changes: runs of 5 tokens see K of 1, 2 and 3."""
    settings = CASES["draft model, adaptive K, top-k"]
    ks = {r.num_drafted for seed in range(60)
          for r in engine.generate([1, 2, 4, 1, 2], max_new_tokens=5, seed=seed, ignore_eos=True, **settings).rounds}
    assert {1, 2} <= ks, ks


class Broken(SpeculativeEngine):
    verify = staticmethod(resample_from_target)


@pytest.mark.slow
def test_a_verify_that_resamples_from_p_is_caught_with_adaptive_k(engine):
    """(At temperature 5 the same bug is invisible here, p = 0.18: target and draft are near uniform there, so the
    residual is nearly p; that case's power comes from the drafter below.)"""
    broken = Broken(engine.target_model, engine.draft_model, eos_token_id=EOS)
    assert smallest_p(broken, CASES["draft model, adaptive K, top-k"]) < 1e-6


class ReportsAtTemperatureOne:
    """Draws from q at the run's temperature T but reports q at temperature 1 (q_T ** T, normalised): the bug of a
    drafter that forgets the sampling transform in what it reports."""

    name = "reports at temperature 1"

    def __init__(self, inner, temperature: float):
        self.inner, self.temperature = inner, temperature

    def start(self, prompt, **kw):
        self.inner.start(prompt, **kw)

    def propose(self, context, k):
        draft = self.inner.propose(context, k)
        if draft.probs is None:  # nothing drafted (k = 0)
            return draft
        cold = draft.probs.double() ** self.temperature
        return Draft(draft.tokens, (cold / cold.sum(-1, keepdim=True)).to(draft.probs.dtype))

    def observe(self, num_accepted, **kw):
        self.inner.observe(num_accepted, **kw)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["draft model, temperature 0.15", "draft model, temperature 5"])
def test_a_drafter_that_reports_q_at_temperature_one_is_caught(engine, name):
    settings = CASES[name]
    drafter = ReportsAtTemperatureOne(ModelDrafter(engine.draft_model), settings["temperature"])
    assert smallest_p(engine, {**settings, "drafter": drafter}) < 1e-6
