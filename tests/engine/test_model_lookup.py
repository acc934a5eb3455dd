"""The draft model + lookup drafter: copies where the context repeats, the draft model elsewhere, exactly.

Greedy output equals plain decoding and transformers' greedy `generate` with both kinds of round and every
verify outcome exercised; the first two sampled tokens follow the target's exact distribution (chi-square,
with temperature, top-k and top-p) on prompts that open with a copied round and with a model round, and a
deliberately broken variant (copies that report a spread-out q instead of one-hot) is caught; the model's
proposals after copied rounds equal a fresh draft model's on the same context (its cache catches up
correctly); copies never run past the token budget; the theory steps aside for mixed runs.
"""

import random

import pytest
import torch

from specui import SpeculativeEngine, metrics, runstats
from specui.drafters import Draft, ModelDrafter, ModelLookupDrafter
from specui.sampling import Sampling
from tests.engine.test_engine_greedy import hf_greedy
from tests.engine.test_engine_sampling import RUNS, SETTINGS, VOCAB, exact_first_two, p_value
from tests.helpers import ROOT, chi_square_target, make_model, noisy_copy

NEW_TOKENS = 40


def repetitive_prompts(n: int, *, vocab_size: int, seed: int) -> list[list[int]]:
    """Prompts whose tail repeats an earlier stretch, so the drafter copies in some rounds."""
    rng = random.Random(seed)
    prompts = []
    for _ in range(n):
        seg = [rng.randrange(vocab_size) for _ in range(rng.randrange(6, 14))]
        prompts.append(seg + [rng.randrange(vocab_size)] + seg[: rng.randrange(2, 5)])
    return prompts


def outcomes(rounds) -> dict:
    """(copied, verify outcome) -> how many drafting rounds ended that way."""
    seen = {}
    for r in rounds:
        if r.num_drafted:
            outcome = "rejected" if r.num_accepted == 0 else "all" if r.num_accepted == r.num_drafted else "partly"
            seen[(r.copied, outcome)] = seen.get((r.copied, outcome), 0) + 1
    return seen


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_greedy_equals_plain_and_transformers_with_both_kinds_of_round(arch):
    target = make_model(arch, layers=3, seed=0)
    engine = SpeculativeEngine(target, noisy_copy(target, noise=0.35, seed=1))
    rounds = []
    for prompt in repetitive_prompts(5, vocab_size=96, seed=3):
        plain = engine.generate(prompt, max_new_tokens=NEW_TOKENS, speculative=False)
        assert plain.token_ids == hf_greedy(target, prompt, NEW_TOKENS)
        for k in (1, 2, 4):
            spec = engine.generate(prompt, max_new_tokens=NEW_TOKENS, num_draft_tokens=k, drafter="model_lookup")
            assert spec.token_ids == plain.token_ids, (arch, prompt, k)
            assert all(r.num_drafted <= (6 if r.copied else k) for r in spec.rounds)
            rounds += spec.rounds
    seen = outcomes(rounds)
    assert all(seen.get((False, o)) for o in ("rejected", "partly", "all")) and seen.get((True, "rejected")), seen


def test_greedy_on_the_stdlib_pair_takes_every_path_of_a_copy():
    """Real code repeats itself, so copies are accepted whole, in part, or not at all."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = ROOT / "assets"
    tokenizer = AutoTokenizer.from_pretrained(folder / "specui-target")
    target = AutoModelForCausalLM.from_pretrained(folder / "specui-target", dtype=torch.float32).eval()
    draft = AutoModelForCausalLM.from_pretrained(folder / "specui-draft", dtype=torch.float32).eval()
    engine = SpeculativeEngine(target, draft)
    code = ("def parse_header(line):\n    name, _, value = line.partition(':')\n    return name.strip(), value.strip()"
            "\n\n\ndef parse_headers(lines):\n    headers = {}\n    for line in lines:\n        name, value = parse_")
    prompt = tokenizer(code)["input_ids"]
    settings = {"max_new_tokens": 64, "ignore_eos": True}
    plain = engine.generate(prompt, speculative=False, **settings)
    assert plain.token_ids == hf_greedy(target, prompt, 64)
    rounds = []
    for k in (1, 2, 4):
        spec = engine.generate(prompt, num_draft_tokens=k, drafter="model_lookup", **settings)
        assert spec.token_ids == plain.token_ids
        rounds += spec.rounds
    seen = outcomes(rounds)
    assert all(seen.get((True, o)) for o in ("rejected", "partly", "all")), seen


def test_adaptive_k_follows_the_model_rounds_only(llama_pair):
    target, draft = llama_pair
    engine = SpeculativeEngine(target, draft)
    prompt = repetitive_prompts(1, vocab_size=96, seed=5)[0]
    spec = engine.generate(prompt, max_new_tokens=60, num_draft_tokens=3, adaptive=True, drafter="model_lookup")
    assert spec.token_ids == engine.generate(prompt, max_new_tokens=60, speculative=False).token_ids
    model_rounds = [r for r in spec.rounds if not r.copied]
    assert any(r.copied for r in spec.rounds) and len({r.num_draft_tokens for r in model_rounds}) > 1
    k = 3  # replay the schedule on the model rounds alone: it gives every round's K
    for r in spec.rounds:
        assert r.num_draft_tokens == min(k, 60 - sum(len(x.token_ids) for x in spec.rounds[: r.index]) - 1)
        if not r.copied and r.num_drafted:
            k = min(k + 1, 8) if r.num_accepted == r.num_drafted else max(k - 1, 1)


def test_copies_respect_the_token_budget(llama_pair):
    target, draft = llama_pair
    engine = SpeculativeEngine(target, draft)
    prompt = [5, 6, 7, 8, 9, 10, 11, 5, 6]  # [5, 6] recurs: round 1 copies [7, 8, ...]
    for n in (1, 2, 3, 5, 9):
        spec = engine.generate(prompt, max_new_tokens=n, num_draft_tokens=2, drafter="model_lookup")
        assert len(spec.token_ids) == n
        assert spec.rounds[0].copied == (n > 1)  # one token left: the round is the target's token alone
        assert all(r.num_drafted <= n - 1 for r in spec.rounds)
        assert spec.token_ids == engine.generate(prompt, max_new_tokens=n, speculative=False).token_ids


class Recording(ModelLookupDrafter):
    """Records the context and the proposal of every model round."""

    def start(self, prompt, **kw):
        super().start(prompt, **kw)
        self.model_rounds = []

    def propose(self, context, k):
        draft = super().propose(context, k)
        if not self.copied and k:
            self.model_rounds.append((list(context), k, draft))
        return draft


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_model_rounds_after_copies_match_a_fresh_draft_model(llama_pair, temperature):
    target, draft = llama_pair
    engine = SpeculativeEngine(target, draft)
    drafter = Recording(draft)
    prompt = repetitive_prompts(1, vocab_size=96, seed=11)[0]
    result = engine.generate(prompt, max_new_tokens=60, num_draft_tokens=3, drafter=drafter, temperature=temperature,
                             seed=4)
    assert any(r.copied for r in result.rounds) and drafter.model_rounds
    fresh = ModelDrafter(draft)
    sampling = Sampling(temperature=temperature)
    for context, k, proposal in drafter.model_rounds:
        fresh.start(context, sampling=sampling, seed=0)
        again = fresh.propose(context, k)
        assert torch.allclose(again.probs[0], proposal.probs[0], atol=1e-5)  # q after the context
        if temperature == 0:  # greedy: the same chain, so the same q at every drafted position
            assert again.tokens.tolist() == proposal.tokens.tolist()
            assert torch.allclose(again.probs, proposal.probs, atol=1e-5)


def test_theory_steps_aside_for_mixed_runs_and_c_is_the_models(llama_pair):
    target, draft = llama_pair
    engine = SpeculativeEngine(target, draft)
    prompt = [5, 6, 7, 8, 9, 10, 11, 12, 5, 6]
    plain = engine.generate(prompt, max_new_tokens=40, speculative=False)
    mixed = engine.generate(prompt, max_new_tokens=40, num_draft_tokens=2, drafter="model_lookup")
    assert {r.copied for r in mixed.rounds if r.num_drafted} == {True, False}
    assert metrics.fitted_alpha(mixed.rounds) is None and metrics.theory(mixed.rounds, c=0.1) is None
    model_rounds = [r for r in mixed.rounds if r.num_drafted and not r.copied]
    expected = metrics.draft_cost_ratio(metrics.median(r.draft_s / r.num_drafted for r in model_rounds),
                                        metrics.median(r.verify_s for r in plain.rounds))
    assert runstats.cost_ratio(mixed, plain) == pytest.approx(expected)
    model_only = engine.generate(prompt, max_new_tokens=40, num_draft_tokens=2, drafter="model")
    assert metrics.theory(model_only.rounds, c=0.1) is not None


def test_engine_lists_and_refuses_it(llama_pair):
    target, draft = llama_pair
    assert "model_lookup" in SpeculativeEngine(target, draft).drafters
    without = SpeculativeEngine(target, None)
    assert "model_lookup" not in without.drafters
    with pytest.raises(ValueError, match="needs a draft model"):
        without.generate([1, 2, 3], max_new_tokens=4, drafter="model_lookup")
    with pytest.raises(ValueError, match="cannot draft trees"):
        SpeculativeEngine(target, draft).generate([1, 2, 3], max_new_tokens=4, drafter="model_lookup", tree_width=2)


# -- sampling: the chi-square test of the first two tokens ------------------------------------------------


@pytest.fixture(scope="module")
def models():
    target = chi_square_target(VOCAB)
    draft = make_model("llama", vocab_size=VOCAB, layers=1, hidden=32, seed=11, init_range=0.15)
    return target, draft


def observed(engine, prompt, drafter, **settings):
    counts = torch.zeros(VOCAB, VOCAB)
    kinds = set()
    for seed in range(RUNS):
        result = engine.generate(prompt, max_new_tokens=3, seed=seed, num_draft_tokens=2, drafter=drafter, **settings)
        t1, t2 = result.token_ids[:2]
        counts[t1, t2] += 1
        kinds.update(r.copied for r in result.rounds if r.num_drafted)
    return counts, kinds


PROMPTS = {"opens with a copy": [1, 2, 3, 1, 2], "opens with the model": [1, 2, 4]}


@pytest.mark.slow
@pytest.mark.parametrize("prompt", list(PROMPTS))
@pytest.mark.parametrize("name", list(SETTINGS))
def test_sampling_is_exact(models, prompt, name):
    target, draft = models
    engine = SpeculativeEngine(target, draft)
    counts, kinds = observed(engine, PROMPTS[prompt], "model_lookup", **SETTINGS[name])
    # the copy prompt: copies and (after a rejected copy) model rounds decided these two tokens
    assert kinds == ({True, False} if prompt == "opens with a copy" else {False})
    assert p_value(counts, exact_first_two(target, PROMPTS[prompt], Sampling(**SETTINGS[name]))) > 1e-3


class SpreadCopies(ModelLookupDrafter):
    """Broken: a copied token reports q spread over the vocabulary, though it was not drawn from it."""

    def propose(self, context, k):
        draft = super().propose(context, k)
        if self.copied:
            n = draft.tokens.shape[0]
            return Draft(draft.tokens, torch.full((n, VOCAB), 1.0 / VOCAB))
        return draft


@pytest.mark.slow
def test_broken_copies_are_caught(models):
    target, draft = models
    engine = SpeculativeEngine(target, draft)
    prompt = PROMPTS["opens with a copy"]
    counts, _ = observed(engine, prompt, SpreadCopies(draft), temperature=1.0)
    assert p_value(counts, exact_first_two(target, prompt, Sampling(temperature=1.0))) < 1e-6
