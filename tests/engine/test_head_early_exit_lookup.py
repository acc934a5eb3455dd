"""Early exit + lookup: copies where the context repeats, the early-exit head elsewhere, exactly.

Greedy output equals transformers' greedy `generate` with both kinds of round and every verify outcome of
each; the target's cache (all layers and the first E) is in step at the start of every round, copied or
drafted; the first two sampled tokens follow the target's law (chi-square, with temperature, top-k and
top-p) on prompts that open with a copy and with the head, and a broken variant (copies that report a
spread-out q) is caught; the engine lists the drafter beside its head and refuses trees for it.
"""

import pytest
import torch

from specui import SpeculativeEngine
from specui.drafters import Draft
from specui.heads import early_exit
from specui.sampling import Sampling
from tests.engine.head_helpers import perturb
from tests.engine.test_engine_greedy import hf_greedy
from tests.engine.test_engine_sampling import SETTINGS, VOCAB, exact_first_two, p_value
from tests.engine.test_model_lookup import PROMPTS as MODEL_PROMPTS
from tests.engine.test_model_lookup import observed, outcomes, repetitive_prompts
from tests.helpers import chi_square_target, make_model

NEW_TOKENS = 30
PROMPTS = {"opens with a copy": MODEL_PROMPTS["opens with a copy"],
           "opens with the head": MODEL_PROMPTS["opens with the model"]}


class InStep(early_exit.EarlyExitLookupDrafter):
    """Checks at every round's start that the target's cache holds the context but cur, in every layer."""

    def propose(self, context, k):
        assert self.target.length == self.target.early_length == len(context) - 1, (context, self.copied)
        return super().propose(context, k)


@pytest.mark.parametrize("exit_layer", [1, 2])
def test_greedy_equals_transformers_with_both_kinds_of_round(exit_layer):
    target = make_model("llama", layers=3, seed=0, vocab_size=8)  # few tokens: copies are right at times too
    head = perturb(early_exit.build(target, exit_layer=exit_layer), scale=0.02, seed=exit_layer)
    engine = SpeculativeEngine(target, heads={"early_exit": head})
    rounds = []
    for prompt in repetitive_prompts(5, vocab_size=8, seed=3):
        expected = hf_greedy(target, prompt, NEW_TOKENS)
        for k in (1, 2, 4):
            for drafter in ("early_exit_lookup", InStep(head)):
                result = engine.generate(prompt, max_new_tokens=NEW_TOKENS, num_draft_tokens=k, drafter=drafter)
                assert result.token_ids == expected, (exit_layer, prompt, k)
                limit = max(k, early_exit.LOOKUP_TOKENS)
                assert all(r.num_drafted <= (limit if r.copied else k) for r in result.rounds)
                rounds += result.rounds
    seen = outcomes(rounds)
    assert all(seen.get((False, o)) for o in ("rejected", "partly", "all")), seen
    assert all(seen.get((True, o)) for o in ("rejected", "partly", "all")), seen


@pytest.fixture(scope="module")
def small():
    """A 5-token target (the exactness tests' own) and an exit after its first layer, over 4 of its ids."""
    target = chi_square_target(VOCAB)
    head = perturb(early_exit.build(target, token_ids=torch.tensor([0, 1, 3, 4]), exit_layer=1), scale=0.2, seed=2)
    return target, head


@pytest.mark.slow
@pytest.mark.parametrize("prompt", list(PROMPTS))
@pytest.mark.parametrize("name", list(SETTINGS))
def test_sampling_is_exact(small, prompt, name):
    target, head = small
    engine = SpeculativeEngine(target, heads={"early_exit": head})
    counts, kinds = observed(engine, PROMPTS[prompt], "early_exit_lookup", **SETTINGS[name])
    assert kinds == ({True, False} if prompt == "opens with a copy" else {False})
    assert p_value(counts, exact_first_two(target, PROMPTS[prompt], Sampling(**SETTINGS[name]))) > 1e-3


class SpreadCopies(early_exit.EarlyExitLookupDrafter):
    """Broken: a copied token reports q spread over the vocabulary, though it was not drawn from it."""

    def propose(self, context, k):
        draft = super().propose(context, k)
        if self.copied:
            return Draft(draft.tokens, torch.full((draft.tokens.shape[0], VOCAB), 1.0 / VOCAB))
        return draft


@pytest.mark.slow
def test_broken_copies_are_caught(small):
    target, head = small
    prompt = PROMPTS["opens with a copy"]
    counts, _ = observed(SpeculativeEngine(target), prompt, SpreadCopies(head), temperature=1.0)
    assert p_value(counts, exact_first_two(target, prompt, Sampling(temperature=1.0))) < 1e-6


def test_listed_beside_its_head_and_refused_for_trees(small):
    target, head = small
    engine = SpeculativeEngine(target, heads={"early_exit": head})
    assert engine.drafters == ("early_exit", "early_exit_lookup", "prompt_lookup")
    assert "early_exit_lookup" not in SpeculativeEngine(target).drafters
    with pytest.raises(ValueError, match="needs a trained early_exit head"):
        SpeculativeEngine(target).generate([1, 2, 3], max_new_tokens=4, drafter="early_exit_lookup")
    with pytest.raises(ValueError, match="tree"):
        engine.generate([1, 2, 3], max_new_tokens=4, drafter="early_exit_lookup", tree_width=2)
    drafter = head.make_drafter(target, copies=True)
    assert isinstance(drafter, early_exit.EarlyExitLookupDrafter) and drafter.name == "early exit + lookup"
    assert drafter.longest(1) == early_exit.LOOKUP_TOKENS and drafter.longest(0) == 0
