"""Sampling exactness: the engine's first two tokens follow the target's exact distribution.

With a 5-token vocabulary the exact joint distribution of the first two tokens is enumerated from
the target alone (full forwards, no cache, no engine). Thousands of seeded engine runs are compared
with it by a chi-square test. The same test applied to deliberately broken verification rules must
fail, which shows it has the power to catch a wrong engine. Seeds are fixed: the outcome is
deterministic, not flaky.
"""

import itertools

import pytest
import torch
from scipy.stats import chisquare

from specui import SpeculativeEngine
from specui.sampling import Sampling, logits_to_probs, sample
from specui.verify_rule import BONUS, RESAMPLED, Verdict
from tests.helpers import five_token_pair

VOCAB = 5
RUNS = 2000


@pytest.fixture(scope="module")
def models():
    return five_token_pair()


def exact_first_two(target, prompt, sampling):
    """P(t1, t2) by enumeration with plain full forwards of the target."""
    with torch.no_grad():
        p1 = logits_to_probs(target(torch.tensor([prompt])).logits[0, -1], sampling)
        joint = torch.zeros(VOCAB, VOCAB)
        for t1 in range(VOCAB):
            p2 = logits_to_probs(target(torch.tensor([prompt + [t1]])).logits[0, -1], sampling)
            joint[t1] = p1[t1] * p2
    return joint


def observed_first_two(engine, prompt, **settings):
    counts = torch.zeros(VOCAB, VOCAB)
    for seed in range(RUNS):
        t1, t2 = engine.generate(prompt, max_new_tokens=3, seed=seed, **settings).token_ids[:2]
        counts[t1, t2] += 1
    return counts


def p_value(counts, joint):
    """Chi-square over cells with expected count >= 5; the rest pooled. Impossible cells must be empty."""
    joint = joint.double() / joint.double().sum()
    observed = counts.flatten().double()
    expected = joint.flatten() * observed.sum()
    impossible = joint.flatten() == 0
    assert observed[impossible].sum() == 0, "a token outside the target's support was emitted"
    big = (expected >= 5) & ~impossible
    obs = observed[big].tolist() + [observed[~big].sum().item()]
    exp = expected[big].tolist() + [expected[~big].sum().item()]
    if exp[-1] == 0:
        obs, exp = obs[:-1], exp[:-1]
    return chisquare(obs, exp).pvalue


SETTINGS = {
    "t1": dict(temperature=1.0),
    "t0.7-topk3-topp0.8": dict(temperature=0.7, top_k=3, top_p=0.8),
    "t1.5-topp0.9": dict(temperature=1.5, top_p=0.9),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(SETTINGS))
def test_draft_model_sampling_is_exact(models, name):
    target, draft = models
    prompt = [1, 2]
    counts = observed_first_two(SpeculativeEngine(target, draft), prompt, num_draft_tokens=2, **SETTINGS[name])
    assert p_value(counts, exact_first_two(target, prompt, Sampling(**SETTINGS[name]))) > 1e-3


@pytest.mark.slow
def test_prompt_lookup_sampling_is_exact(models):
    target, _ = models
    prompt = [1, 2, 3, 1, 2]  # the suffix [1, 2] recurs: lookup proposes [3, 1]
    engine = SpeculativeEngine(target, None)
    counts = observed_first_two(engine, prompt, num_draft_tokens=2, temperature=1.0)
    assert engine.generate(prompt, max_new_tokens=3, seed=0, temperature=1.0).rounds[0].drafted == [3, 1]
    assert p_value(counts, exact_first_two(target, prompt, Sampling(temperature=1.0))) > 1e-3


def always_accept(*, target_probs, draft_tokens, draft_probs, generator, target_argmax):
    k = draft_tokens.shape[0]
    return Verdict(k, int(sample(target_probs[k], generator)), BONUS, [1.0] * k, [], None)


def resample_from_target(*, target_probs, draft_tokens, draft_probs, generator, target_argmax):
    """A subtle bug: at a rejection, draw from p instead of norm(max(0, p - q)) (q one-hot for deterministic drafts,
    draft_probs None: p with the rejected token left in)."""
    k = draft_tokens.shape[0]
    for i, x in enumerate(draft_tokens.tolist()):
        r = float(torch.rand(1, generator=generator))
        if not r * (1.0 if draft_probs is None else float(draft_probs[i, x])) < float(target_probs[i, x]):
            return Verdict(i, int(sample(target_probs[i], generator)), RESAMPLED, [], [], None)
    return Verdict(k, int(sample(target_probs[k], generator)), BONUS, [], [], None)


@pytest.mark.slow
@pytest.mark.parametrize("rule", [always_accept, resample_from_target])
@pytest.mark.parametrize("drafter", ["model", "prompt_lookup"])
def test_broken_rules_are_caught(models, rule, drafter):
    """With the draft model, and with prompt lookup's one-hot q (whose exactness test had no broken counterpart)."""
    class Broken(SpeculativeEngine):
        verify = staticmethod(rule)

    target, draft = models
    prompt = [1, 2] if drafter == "model" else [1, 2, 3, 1, 2]  # as the exactness tests above
    counts = observed_first_two(Broken(target, draft), prompt, num_draft_tokens=2, temperature=1.0, drafter=drafter)
    assert p_value(counts, exact_first_two(target, prompt, Sampling(temperature=1.0))) < 1e-6


def test_seed_reproduces_and_differs(models):
    engine = SpeculativeEngine(*models)
    a = engine.generate([1, 2], max_new_tokens=30, temperature=1.0, seed=5, num_draft_tokens=3)
    b = engine.generate([1, 2], max_new_tokens=30, temperature=1.0, seed=5, num_draft_tokens=3)
    c = engine.generate([1, 2], max_new_tokens=30, temperature=1.0, seed=6, num_draft_tokens=3)
    assert a.token_ids == b.token_ids and a.kinds == b.kinds
    assert a.token_ids != c.token_ids
    assert a.seed == 5 and engine.generate([1], max_new_tokens=2, temperature=1.0).seed is not None


def test_distribution_is_not_degenerate(models):
    """The test above only has power if the draft disagrees with the target and both spread out."""
    target, draft = models
    s = Sampling(temperature=1.0)
    with torch.no_grad():
        p = logits_to_probs(target(torch.tensor([[1, 2]])).logits[0, -1], s)
        q = logits_to_probs(draft(torch.tensor([[1, 2]])).logits[0, -1], s)
    assert p.max() < 0.8 and (p - q).abs().sum() > 0.2
    assert len(list(itertools.product(range(VOCAB), repeat=2))) == VOCAB * VOCAB
