"""The repetition penalty: transformers' `RepetitionPenaltyLogitsProcessor` on the target's logits, exact in every
round shape. Greedy output equals plain decoding and transformers' greedy `generate(repetition_penalty=...)` with
chains (draft model, prompt lookup) and token trees; sampled output follows the penalised law (chi-square); a
verify that forgets the drafts before each row (the subtle bug: row i has seen them) is caught both ways; a draft
equal to its target drafts with the penalty, so every draft is accepted."""

import copy

import pytest
import torch
from transformers.generation.logits_process import RepetitionPenaltyLogitsProcessor

import specui.chain_round
import specui.tree_round
from specui import SpeculativeEngine
from specui.drafters.tree import ancestry
from specui.sampling import Sampling, logits_to_probs, path_seen, penalize, penalize_seen, seen_mask
from specui.settings import DecodeSettings, SettingsError
from tests.engine.test_engine_sampling import RUNS, VOCAB, observed_first_two, p_value
from tests.helpers import five_token_pair, make_model, noisy_copy, random_prompts

NEW_TOKENS = 40


def hf_greedy(model, prompt, n, penalty):
    ids = torch.tensor([prompt])
    out = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=n,
                         min_new_tokens=n, pad_token_id=0, repetition_penalty=penalty)
    return out[0, len(prompt):].tolist()


def forgetful(logits, sampling, context, drafts=(), parents=None):
    """The broken variant: every row sees the context only, not the drafts before it."""
    return penalize(logits, sampling, context)


@pytest.fixture(scope="module")
def pair():
    target = make_model("llama", layers=3, seed=0)  # a draft that often misses, and one that seldom does
    return target, noisy_copy(target, noise=0.35, seed=1), noisy_copy(target, noise=0.05, seed=1)


def test_penalize_is_transformers_processor_bit_for_bit():
    torch.manual_seed(0)
    logits = torch.randn(4, 50) * 3
    context = [3, 7, 7, 49, 0]
    extra = [[], [11], [11, 3], [11, 3, 20]]  # each row's drafts before it
    out = penalize(logits, Sampling(repetition_penalty=1.7), context, [11, 3, 20])
    for i in range(4):
        ids = torch.tensor([context + extra[i]])
        expected = RepetitionPenaltyLogitsProcessor(1.7)(ids, logits[i:i + 1].clone())[0]
        assert torch.equal(out[i], expected)
    assert penalize(logits, Sampling(), context, [11, 3, 20]) is logits  # 1: untouched, no copy
    row, seen = logits[0], torch.isin(torch.arange(50), torch.tensor(context))
    below_one = torch.where(seen, torch.where(row < 0, row * 0.5, row / 0.5), row)  # a penalty below 1 favours repeats
    assert torch.equal(penalize(row, Sampling(repetition_penalty=0.5), context), below_one)


def test_a_trees_draft_rows_see_what_the_targets_rows_see():
    """A tree's drafting rows (`path_seen`, `penalize_seen`) are penalised as the verify's rows at the same nodes."""
    torch.manual_seed(1)
    sampling, context = Sampling(repetition_penalty=1.6), [3, 7, 7, 40]
    tokens, parents = [11, 12, 3, 20, 21], [-1, -1, 0, 0, 2]  # two roots' children, then deeper
    logits = torch.randn(1 + len(tokens), 50) * 3
    target_rows = penalize(logits, sampling, context, tokens, parents)
    seen = seen_mask(sampling, context, 50)
    assert torch.equal(penalize_seen(logits[0], sampling, seen), target_rows[0])
    paths = [[tokens[j] for j in (i, *ancestry(i, parents))] for i in range(len(tokens))]
    assert torch.equal(penalize_seen(logits[1:], sampling, path_seen(seen, paths)), target_rows[1:])
    ids = torch.arange(49, -1, -1)  # a drafter's rows in another order: each row's id given
    assert torch.equal(penalize_seen(logits[1:, ids], sampling, path_seen(seen, paths), ids), target_rows[1:, ids])
    assert path_seen(seen_mask(Sampling(), context, 50), paths) is None  # no penalty: nothing to mark


@pytest.mark.parametrize("penalty", [1.3, 2.5])
def test_greedy_equals_plain_and_transformers(pair, penalty):
    target, loose, close = pair
    engines = SpeculativeEngine(target, loose), SpeculativeEngine(target, close)
    paths = set()
    for prompt in random_prompts(3, vocab_size=96, seed=7) + [[5, 6, 7, 5, 6, 7, 5, 6]]:
        plain = engines[0].generate(prompt, max_new_tokens=NEW_TOKENS, speculative=False, repetition_penalty=penalty)
        assert plain.token_ids == hf_greedy(target, prompt, NEW_TOKENS, penalty)
        assert plain.token_ids != hf_greedy(target, prompt, NEW_TOKENS, 1.0)  # the penalty bites
        for k, drafter, width in ((1, "model", 1), (4, "model", 1), (8, "model", 1), (3, "prompt_lookup", 1),
                                  (3, "model", 2), (2, "model", 4)):
            for engine in engines:
                spec = engine.generate(prompt, max_new_tokens=NEW_TOKENS, num_draft_tokens=k, drafter=drafter,
                                       tree_width=width, repetition_penalty=penalty)
                assert spec.token_ids == plain.token_ids, (prompt, k, drafter, width)
                paths |= {"none" if r.num_accepted == 0 else "all" if r.num_accepted == r.num_drafted else "part"
                          for r in spec.rounds if r.num_drafted}
    assert paths == {"none", "part", "all"}


def test_a_verify_that_forgets_the_drafts_is_caught_greedy(pair, monkeypatch):
    target, _, close = pair  # the draft must get past the rows where forgetting changes the argmax
    engine = SpeculativeEngine(target, close)
    prompts = random_prompts(3, vocab_size=96, seed=7) + [[5, 6, 7, 5, 6, 7, 5, 6]]
    expected = [hf_greedy(target, p, NEW_TOKENS, 1.3) for p in prompts]
    monkeypatch.setattr(specui.chain_round, "penalize", forgetful)
    monkeypatch.setattr(specui.tree_round, "penalize", forgetful)
    for width in (1, 2):
        wrong = [engine.generate(p, max_new_tokens=NEW_TOKENS, num_draft_tokens=4, tree_width=width,
                                 repetition_penalty=1.3).token_ids for p in prompts]
        assert wrong != expected, width


@pytest.mark.parametrize("rounds", ["native", "python"])
def test_a_draft_equal_to_its_target_drafts_with_the_penalty_and_is_always_accepted(rounds, monkeypatch):
    """Drafters draft with the penalty too (each step penalising the context and the drafts before it): a draft that
    is the target itself proposes what the penalised target picks, in its native round and in its Python steps."""
    if rounds == "python":
        monkeypatch.setenv("SPECUI_NATIVE_ROUNDS", "0")  # `specui.native_chain.picks`
    target = make_model("llama", vocab_size=512, layers=2, seed=1)
    prompt = [5, 17, 3, 88, 41, 300, 17, 3]
    for penalty, width in ((1.0, 1), (1.5, 1), (1.5, 2)):  # a tree's nodes see the context and their path
        spec = SpeculativeEngine(target, copy.deepcopy(target)).generate(prompt, max_new_tokens=40, num_draft_tokens=4,
                                                                          tree_width=width, repetition_penalty=penalty)
        assert spec.token_ids == hf_greedy(target, prompt, 40, penalty)
        assert all(r.num_accepted == r.num_drafted == 4 for r in spec.rounds), [r.drafted for r in spec.rounds]


@pytest.fixture(scope="module")
def small():
    return five_token_pair()


def penalised_first_two(target, prompt, sampling):
    """P(t1, t2) by enumeration with plain full forwards of the target, each row penalised by what it has seen."""
    with torch.no_grad():
        p1 = logits_to_probs(penalize(target(torch.tensor([prompt])).logits[0, -1], sampling, prompt), sampling)
        joint = torch.zeros(VOCAB, VOCAB)
        for t1 in range(VOCAB):
            seen = prompt + [t1]
            joint[t1] = p1[t1] * logits_to_probs(penalize(target(torch.tensor([seen])).logits[0, -1], sampling, seen),
                                                 sampling)
    return joint


SAMPLED = dict(temperature=1.0, repetition_penalty=2.0)  # strong, for the chi-square's power on tiny logits


@pytest.mark.slow
@pytest.mark.parametrize("width", [1, 3])
def test_sampling_with_the_penalty_is_exact(small, width):
    target, draft = small
    prompt = [1, 2]
    exact = penalised_first_two(target, prompt, Sampling(**SAMPLED))
    assert (exact - penalised_first_two(target, prompt, Sampling(temperature=1.0))).abs().sum() > 0.1
    counts = observed_first_two(SpeculativeEngine(target, draft), prompt, num_draft_tokens=2, tree_width=width,
                                **SAMPLED)
    assert counts.sum() == RUNS
    assert p_value(counts, exact) > 1e-3


@pytest.mark.slow
def test_a_verify_that_forgets_the_drafts_is_caught_sampled(small, monkeypatch):
    target, draft = small
    prompt = [1, 2]
    monkeypatch.setattr(specui.chain_round, "penalize", forgetful)
    counts = observed_first_two(SpeculativeEngine(target, draft), prompt, num_draft_tokens=2, **SAMPLED)
    assert p_value(counts, penalised_first_two(target, prompt, Sampling(**SAMPLED))) < 1e-6


def test_settings_check_the_penalty():
    assert DecodeSettings(repetition_penalty=1).repetition_penalty == 1.0
    for bad in (0, -1.0, float("nan"), float("inf"), 11, True, "1.2"):
        with pytest.raises(SettingsError, match="repetition_penalty"):
            DecodeSettings(repetition_penalty=bad)
    with pytest.raises(ValueError, match="repetition_penalty"):
        Sampling(repetition_penalty=0.0)
