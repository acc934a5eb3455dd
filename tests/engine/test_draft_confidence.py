"""Drafting while confident (`DecodeSettings.draft_confidence`, `specui.drafters.base.Confidence`): a chain stops
once the product of the draft's top probabilities falls below the setting, K being the most it drafts.

The stop reads the drafter's own logits only, so the proposal is fixed before the target's draws: greedy output
stays plain decoding's for every drafter that draws from distributions, and sampled output follows the target's
distribution (the chi-square test of `test_engine_sampling`, with temperature, top-k and top-p). A drafter that
"keeps only confident drafts" by drawing again until its token is likely (so its tokens no longer follow the q
it reports) is caught by the same test.
"""

from __future__ import annotations

import pytest
import torch

from specui import SpeculativeEngine, load_engine
from specui.drafters.base import Confidence, Draft
from specui.drafters.model import ModelDrafter
from specui.heads import eagle
from specui.sampling import Sampling
from specui.settings import DecodeSettings, SettingsError
from tests.engine.test_engine_sampling import SETTINGS, exact_first_two, observed_first_two, p_value
from tests.helpers import chi_square_target, make_model


def test_the_rule_multiplies_the_drafts_top_probabilities():
    sure, unsure = torch.tensor([3.0, 0.0, 0.0]), torch.tensor([0.0, 0.0, 0.0])  # top 0.909, and 1/3
    assert all(Confidence(0.0).goes_on(unsure) for _ in range(5))  # 0: always K
    rule = Confidence(0.8)
    assert [rule.goes_on(sure) for _ in range(3)] == [True, True, False]  # 0.909, 0.826, then 0.751 < 0.8
    assert abs(rule.chance - float(torch.softmax(sure, -1).max()) ** 3) < 1e-6
    assert not Confidence(0.5).goes_on(unsure)


def test_the_setting_is_checked():
    assert DecodeSettings(draft_confidence=0.3).draft_confidence == 0.3
    for bad in (-0.1, 1.0, float("nan"), "x", None):
        with pytest.raises(SettingsError, match="draft_confidence must be a number from 0"):
            DecodeSettings(draft_confidence=bad)
    DecodeSettings(draft_confidence=0.3, tree_width=2)  # a tree takes it as a floor on its nodes (dynamic trees)


@pytest.fixture(scope="module")
def bundled():
    return load_engine("bundled")


@pytest.mark.slow
@pytest.mark.parametrize("drafter", ["model", "model_lookup", "eagle", "medusa", "early_exit"])
def test_greedy_output_stays_plain_decodings_and_rounds_draft_fewer(bundled, drafter):
    ids = bundled.tokenizer("import os\n\n\ndef main(argv):\n    ")["input_ids"]
    plain = bundled.generate(ids, max_new_tokens=48, speculative=False, ignore_eos=True)
    always = bundled.generate(ids, max_new_tokens=48, drafter=drafter, num_draft_tokens=6, ignore_eos=True)
    confident = bundled.generate(ids, max_new_tokens=48, drafter=drafter, num_draft_tokens=6, ignore_eos=True,
                                 draft_confidence=0.5)
    assert confident.token_ids == always.token_ids == plain.token_ids
    drafted = [r.num_drafted for r in confident.rounds[:-1] if not r.copied]  # the last: what the budget left
    most = max(r.num_drafted for r in always.rounds if not r.copied)  # K, or fewer heads (Medusa's)
    assert max(drafted) <= most and min(drafted) >= 1 and any(n < most for n in drafted)
    assert sum(drafted) < sum(r.num_drafted for r in always.rounds[:-1] if not r.copied)
    tree = bundled.generate(ids, max_new_tokens=24, drafter=drafter if drafter in ("model", "eagle", "medusa") else
                            "model", num_draft_tokens=3, tree_width=2, draft_confidence=0.5, ignore_eos=True)
    assert tree.token_ids == plain.token_ids[:24]  # a static tree keeps its shape


@pytest.fixture(scope="module")
def models():
    target = chi_square_target()
    draft = make_model("llama", vocab_size=5, layers=1, hidden=32, seed=11, init_range=0.15)
    return target, draft


def stops(engine, prompt, **settings) -> bool:
    """Whether some first round of these settings drafted fewer than K (the stop is exercised)."""
    return any(engine.generate(prompt, max_new_tokens=3, seed=seed, **settings).rounds[0].num_drafted
               < settings["num_draft_tokens"] for seed in range(40))


@pytest.mark.slow
@pytest.mark.parametrize("name", list(SETTINGS))
def test_the_draft_models_sampling_stays_exact(models, name):
    target, draft = models
    engine = SpeculativeEngine(target, draft)
    settings = dict(num_draft_tokens=3, draft_confidence=0.35, **SETTINGS[name])
    assert stops(engine, [1, 2], **settings)
    counts = observed_first_two(engine, [1, 2], **settings)
    assert p_value(counts, exact_first_two(target, [1, 2], Sampling(**SETTINGS[name]))) > 1e-3


@pytest.mark.slow
def test_eagles_sampling_stays_exact():
    target = chi_square_target()
    engine = SpeculativeEngine(target, heads={"eagle": eagle.build(target, token_ids=torch.arange(5))})
    settings = dict(num_draft_tokens=3, draft_confidence=0.25, drafter="eagle", temperature=1.0)
    assert stops(engine, [1, 2, 4], **settings)
    counts = observed_first_two(engine, [1, 2, 4], **settings)
    assert p_value(counts, exact_first_two(target, [1, 2, 4], Sampling(temperature=1.0))) > 1e-3


class Picky(ModelDrafter):
    """A broken "confidence" drafter: it draws its first token again (up to 8 times) while that token's q is under
    0.4, so its drafts favour likely tokens, yet it reports the q they were drawn from."""

    def propose(self, context, k):
        draft = super().propose(context, k)
        for _ in range(8):
            if draft.probs is None or float(draft.probs[0, int(draft.tokens[0])]) >= 0.4:
                break
            draft = super().propose(context, k)  # the draft model's cache is trimmed back at each proposal
        return Draft(draft.tokens, draft.probs)


@pytest.mark.slow
def test_a_drafter_that_keeps_only_likely_drafts_is_caught(models):
    target, draft = models
    counts = torch.zeros(5, 5)
    engine = SpeculativeEngine(target, draft)
    for seed in range(2000):
        t1, t2 = engine.generate([1, 2], max_new_tokens=3, seed=seed, num_draft_tokens=2, temperature=1.0,
                                 drafter=Picky(draft)).token_ids[:2]
        counts[t1, t2] += 1
    assert p_value(counts, exact_first_two(target, [1, 2], Sampling(temperature=1.0))) < 1e-6
