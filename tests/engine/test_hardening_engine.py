"""Hardening at the engine's edges (issue #12): bad input is refused before any work with a clear
ValueError, and inputs that are fine in another spelling (numpy integers, a [1, n] tensor) work."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from specui import DecodeSettings, GenerationResult, SpeculativeEngine
from specui.drafters import Draft
from specui.sampling import Sampling
from specui.settings import SettingsError
from tests.helpers import make_model, noisy_copy

PROMPT = [4, 8, 15, 16, 23, 42]


@pytest.fixture(scope="module")
def engine():
    target = make_model("llama", layers=2, seed=3)
    return SpeculativeEngine(target, noisy_copy(target, noise=0.3, seed=4))


@pytest.fixture(scope="module")
def plain(engine):
    return engine.generate(PROMPT, max_new_tokens=12, speculative=False).token_ids


# -- the prompt ---------------------------------------------------------------------------------------

def test_a_batch_of_two_prompts_is_refused(engine):
    with pytest.raises(ValueError, match="one prompt at a time"):
        engine.stream(torch.tensor([PROMPT, PROMPT]), max_new_tokens=4)
    with pytest.raises(ValueError, match="one prompt at a time"):
        engine.stream(np.array([PROMPT, PROMPT]), max_new_tokens=4)
    with pytest.raises(ValueError, match="one prompt at a time"):
        engine.stream(torch.tensor([[PROMPT]]), max_new_tokens=4)


def test_one_prompt_in_any_spelling(engine, plain):
    for ids in (torch.tensor([PROMPT]), torch.tensor(PROMPT), np.array(PROMPT), np.array([PROMPT]),
                [np.int64(t) for t in PROMPT], [np.int32(t) for t in PROMPT]):
        assert engine.generate(ids, max_new_tokens=12, speculative=False).token_ids == plain


def test_a_tokenizers_output_is_taken_and_text_is_refused_with_what_to_do(engine, plain):
    assert engine.generate({"input_ids": PROMPT, "attention_mask": [1] * 6}, max_new_tokens=12,
                           speculative=False).token_ids == plain
    encoded = {"input_ids": torch.tensor([PROMPT])}  # as tokenizer(..., return_tensors="pt") gives it
    assert engine.generate(encoded, max_new_tokens=12, speculative=False).token_ids == plain
    for text in ("def f(x):", b"def f(x):"):
        with pytest.raises(ValueError, match=r"tokenize it first, e.g. tokenizer\(text\)\['input_ids'\].* "
                                             r"\(tokenizer = transformers\.AutoTokenizer\.from_pretrained"):
            engine.stream(text, max_new_tokens=2)


def test_non_integer_ids_are_still_refused(engine):
    for bad in ([True, 3], [1.0, 2], [np.bool_(True)], [-1], [96]):
        with pytest.raises(ValueError, match="not an integer"):
            engine.stream(bad, max_new_tokens=2)


# -- settings -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("temperature", [1e-39, 1e-30, 1e-6])
def test_a_vanishing_temperature_is_refused_up_front(engine, temperature):
    with pytest.raises(SettingsError, match="temperature must be 0"):
        engine.stream(PROMPT, max_new_tokens=4, temperature=temperature)


def test_the_smallest_temperature_allowed_samples(engine):
    from specui.settings import MIN_TEMPERATURE

    result = engine.generate(PROMPT, max_new_tokens=6, temperature=MIN_TEMPERATURE, seed=1)
    assert len(result.token_ids) == 6


@pytest.mark.parametrize("field", ["num_draft_tokens", "temperature", "top_p", "top_k", "max_new_tokens", "seed"])
def test_true_is_not_a_number(field):
    with pytest.raises(SettingsError, match=field):
        DecodeSettings(**{field: True})


def test_sampling_refuses_bools_too():
    with pytest.raises(ValueError):
        Sampling(temperature=True)
    with pytest.raises(ValueError):
        Sampling(top_p=True)


def test_numpy_numbers_are_settings_too():
    s = DecodeSettings(num_draft_tokens=np.int64(3), temperature=np.float32(0.5), top_k=np.int32(4),
                       max_new_tokens=np.int64(5), seed=np.uint64(7))
    assert (s.num_draft_tokens, s.temperature, s.top_k, s.max_new_tokens, s.seed) == (3, 0.5, 4, 5, 7)
    assert all(type(v) in (int, float) for v in (s.num_draft_tokens, s.temperature, s.top_k, s.max_new_tokens, s.seed))


@pytest.mark.parametrize("seed", [2**64, -1])
def test_a_seed_torch_cannot_take_is_refused_at_the_call(engine, seed):
    with pytest.raises(SettingsError, match="seed"):
        engine.stream(PROMPT, max_new_tokens=4, seed=seed)


def test_the_largest_seed_works(engine):
    assert engine.generate(PROMPT, max_new_tokens=4, temperature=1.0, seed=2**64 - 1).seed == 2**64 - 1


def test_a_drafter_that_is_not_one_is_refused_at_the_call(engine):
    with pytest.raises(SettingsError, match="Drafter methods"):
        engine.stream(PROMPT, max_new_tokens=4, drafter=42)
    with pytest.raises(SettingsError, match="lacks observe"):
        engine.stream(PROMPT, max_new_tokens=4, drafter=type("Half", (), {"start": len, "propose": len})())


# -- a custom drafter that misbehaves ----------------------------------------------------------------

class Overeager:
    """Proposes `extra` more tokens than asked, from a fixed list, or ids the target does not have."""

    name = "overeager"

    def __init__(self, *, extra=0, bad_id=None, probs=False, vocab=96):
        self.extra, self.bad_id, self.probs, self.vocab = extra, bad_id, probs, vocab

    def start(self, prompt, *, sampling, seed):
        pass

    def propose(self, context, k):
        tokens = [(context[-1] + i) % self.vocab for i in range(k + self.extra)]
        if self.bad_id is not None and tokens:
            tokens[0] = self.bad_id
        q = torch.full((len(tokens), self.vocab), 1.0 / self.vocab) if self.probs else None
        return Draft(torch.tensor(tokens, dtype=torch.long), q)

    def observe(self, num_accepted):
        pass


@pytest.mark.parametrize("probs", [False, True])
@pytest.mark.parametrize("max_new", [1, 2, 5, 12])
def test_a_drafter_proposing_too_many_never_overshoots(engine, plain, max_new, probs):
    result = engine.generate(PROMPT, max_new_tokens=max_new, num_draft_tokens=3, drafter=Overeager(extra=5, probs=probs))
    assert len(result.token_ids) == max_new and result.token_ids == plain[:max_new]
    assert all(r.num_drafted <= r.num_draft_tokens for r in result.rounds)


@pytest.mark.parametrize("bad_id", [96, 10_000, -3])
def test_out_of_vocabulary_drafts_are_refused_with_the_drafters_name(engine, bad_id):
    with pytest.raises(ValueError, match=r"drafter 'overeager' proposed token ids .* outside the target's vocabulary"):
        engine.generate(PROMPT, max_new_tokens=8, num_draft_tokens=3, drafter=Overeager(bad_id=bad_id))


def test_a_q_wider_than_the_target_is_refused(engine):
    with pytest.raises(ValueError, match="q of shape"):
        engine.generate(PROMPT, max_new_tokens=8, num_draft_tokens=3, temperature=1.0,
                        drafter=Overeager(probs=True, vocab=200))


class Scribbler(Overeager):
    """Proposes as Overeager, with a q `spoil` makes malformed (or a list instead of a Draft)."""

    name = "scribbler"

    def __init__(self, spoil):
        super().__init__(probs=True)
        self.spoil = spoil

    def propose(self, context, k):
        draft = super().propose(context, k)
        return self.spoil(draft)


def _shifted(d):  # each row the distribution of the next position: its own token gets q = 0
    q = torch.zeros_like(d.probs)
    q[torch.arange(len(d.tokens)), (d.tokens + 1) % q.shape[-1]] = 1.0
    return Draft(d.tokens, q)


@pytest.mark.parametrize("spoil, message", [
    (lambda d: Draft(d.tokens, torch.full_like(d.probs, 5.0)), "not distributions"),  # scores, not probabilities
    (lambda d: Draft(d.tokens, torch.full_like(d.probs, float("nan"))), "not distributions"),
    (lambda d: Draft(d.tokens, d.probs + torch.tensor([-0.5, 0.5] + [0.0] * 94)), "not distributions"),  # q < 0
    (_shifted, "with q = 0 there"),
    (lambda d: d.tokens.tolist(), "must return a specui.Draft"),
])
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_a_custom_drafters_malformed_q_is_refused_with_its_name(engine, spoil, message, temperature):
    with pytest.raises(ValueError, match=f"drafter 'scribbler'.*{message}"):
        engine.generate(PROMPT, max_new_tokens=8, num_draft_tokens=3, temperature=temperature,
                        drafter=Scribbler(spoil))


def test_a_q_narrower_than_the_target_that_gives_its_tokens_a_chance_is_taken(engine):
    def narrow(d):  # q over the first 80 ids, the tokens inside them
        tokens = d.tokens % 80
        return Draft(tokens, torch.full((len(tokens), 80), 1.0 / 80))

    assert engine.generate(PROMPT, max_new_tokens=8, num_draft_tokens=3, temperature=1.0, seed=1,
                           drafter=Scribbler(narrow)).token_ids


# -- into= ---------------------------------------------------------------------------------------------

def test_reusing_a_result_is_refused(engine):
    result = GenerationResult()
    rounds = list(engine.stream(PROMPT, max_new_tokens=4, into=result))
    assert rounds and len(result.token_ids) == 4
    with pytest.raises(ValueError, match="already holds a run"):
        engine.stream(PROMPT, max_new_tokens=4, into=result)
    assert len(engine.generate(PROMPT, max_new_tokens=4).token_ids) == 4  # generate makes a fresh one each time


# -- the call's other arguments ------------------------------------------------------------------------------

@pytest.mark.parametrize("bad, message", [
    (None, r"input_ids is None \(NoneType\)"), (5, r"input_ids is 5 \(int\)"), ([PROMPT, PROMPT], "holds 2 prompts"),
])
def test_what_is_no_prompt_is_refused_in_words(engine, bad, message):
    with pytest.raises(ValueError, match=message):
        engine.stream(bad, max_new_tokens=4)


def test_a_list_holding_one_prompt_is_that_prompt(engine, plain):
    assert engine.generate([PROMPT], max_new_tokens=12, speculative=False).token_ids == plain


def test_unknown_settings_and_settings_of_another_type_are_refused_in_words(engine):
    with pytest.raises(SettingsError, match="no setting named .max_tokens.; the settings are .*max_new_tokens"):
        engine.stream(PROMPT, max_tokens=5)
    with pytest.raises(SettingsError, match="no setting named 'max_tokens'"):
        engine.stream(PROMPT, DecodeSettings(), max_tokens=5)
    with pytest.raises(SettingsError, match=r"settings \(the argument after the prompt\) must be a DecodeSettings, got "
                       r"\{'max_new_tokens': 3\} \(dict\); give them as keywords"):
        engine.stream(PROMPT, {"max_new_tokens": 3})


def test_generate_fills_the_result_it_is_given(engine, plain):
    result = GenerationResult()
    assert engine.generate(PROMPT, max_new_tokens=12, speculative=False, into=result) is result
    assert result.token_ids == plain


def test_an_engine_without_a_model_is_refused_in_words(engine):
    with pytest.raises(ValueError, match="target_model must be a transformers causal LM .* not a NoneType"):
        SpeculativeEngine(None)
    with pytest.raises(ValueError, match="draft_model must be a transformers causal LM .* not a str"):
        SpeculativeEngine(engine.target_model, "draft")


def test_a_default_drafter_the_engine_cannot_draft_with_is_refused_when_it_is_made(engine):
    with pytest.raises(ValueError, match="drafter='eagle' cannot be this engine's default: it has no eagle head"):
        SpeculativeEngine(engine.target_model, engine.draft_model, drafter="eagle")
    with pytest.raises(ValueError, match="drafter='model' cannot be this engine's default: it has no draft model"):
        SpeculativeEngine(engine.target_model, drafter="model")
    assert SpeculativeEngine(engine.target_model, drafter="prompt_lookup").default_drafter == "prompt_lookup"
