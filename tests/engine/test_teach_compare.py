"""Two drafters on the same rounds (`specui.lesson_compare`), on tiny models: the primary's rounds are the
engine's own for the seed; the second drafter's round at each context is the engine's first round there,
drawing the primary's very uniforms; in greedy mode what it adds is the same text; heads (EAGLE reading
the target's features, early exit sharing the target's cache) join through the engine's machinery."""

from __future__ import annotations

import contextlib
from dataclasses import replace
from types import SimpleNamespace

import pytest
import torch

from specui import SpeculativeEngine, lesson
from specui.events import GenerationResult
from specui.heads import early_exit
from specui.lesson_compare import check, compare
from specui.sampling import Generators
from specui.settings import DecodeSettings
from tests.engine.head_helpers import perturb, sticky_target
from tests.engine.test_head_eagle import copycat_head
from tests.helpers import char_tokenizer, make_model, noisy_copy

PROMPT = "def add(a, b):\n    return a + b\n\ndef add(a, b):\n"
SETTINGS = {"num_draft_tokens": 4, "max_new_tokens": 24, "seed": 3}


@pytest.fixture(scope="module")
def setup():
    target = make_model("llama", layers=2, seed=0)
    tokenizer = char_tokenizer()
    return SimpleNamespace(engine=SpeculativeEngine(target, noisy_copy(target, noise=0.1, seed=1)),
                           tokenizer=tokenizer, ids=tokenizer(PROMPT)["input_ids"])


@pytest.fixture(scope="module")
def heads():
    """A sticky target with a noisy draft model, a copycat EAGLE head and an early exit after layer 1."""
    target = sticky_target(seed=3, vocab_size=96, layers=3)
    exit_head = perturb(early_exit.build(target, exit_layer=1), scale=0.02, seed=1)
    engine = SpeculativeEngine(target, noisy_copy(target, noise=0.3, seed=1),
                               heads={"eagle": copycat_head(target), "early_exit": exit_head})
    tokenizer = char_tokenizer()
    return SimpleNamespace(engine=engine, tokenizer=tokenizer, ids=tokenizer(PROMPT)["input_ids"])


def _untimed(step):
    return replace(step, draft_s=0.0, verify_s=0.0)


def _first_round(engine, context, **settings):
    result = GenerationResult()
    with contextlib.closing(engine.stream(context, DecodeSettings(**settings), into=result)) as stream:
        next(stream)
    return result.rounds[0]


@pytest.mark.parametrize("temperature", [0.0, 0.8])
def test_the_primary_is_the_teaching_run(setup, temperature):
    """The walk's primary rounds are the engine's own for the seed: the same steps the Teach tab shows."""
    c = compare(setup.engine, setup.tokenizer, setup.ids, temperature=temperature, primary="model",
                second="prompt_lookup", **SETTINGS)
    run = lesson.teaching_run(setup.engine, setup.tokenizer, setup.ids, compare=False, temperature=temperature,
                              drafter="model", **SETTINGS)
    assert c.result.token_ids == run.spec.token_ids and c.seed == run.spec.seed == 3
    assert [_untimed(r.primary) for r in c.rounds] == [_untimed(s) for s in run.steps]
    assert [r.index for r in c.rounds] == list(range(len(run.steps)))
    assert [r.context_tokens for r in c.rounds] == [len(setup.ids) + sum(len(s.emitted) for s in run.steps[:i])
                                                   for i in range(len(run.steps))]
    assert [r.second.context for r in c.rounds] == [s.context for s in run.steps]


def test_greedy_the_second_round_is_the_engines_and_adds_the_same_text(heads):
    """Greedy: at each context the second drafter's round is the engine's first round there, and what it
    emits is the primary's own continuation (the target's output does not depend on the drafter)."""
    for second in ("eagle", "early_exit", "prompt_lookup"):
        c = compare(heads.engine, heads.tokenizer, heads.ids, temperature=0.0, primary="model", second=second,
                    num_draft_tokens=3, max_new_tokens=30, seed=5)
        out = c.result.token_ids
        for r in c.rounds:
            start = r.context_tokens - len(heads.ids)
            context = heads.ids + out[:start]
            fresh = _first_round(heads.engine, context, drafter=second, num_draft_tokens=3, temperature=0.0,
                                 max_new_tokens=30 - start, seed=5)
            assert [d.token_id for d in r.second.drafts] == fresh.drafted
            assert [d.p for d in r.second.drafts] == fresh.target_probs
            assert r.second.num_accepted == fresh.num_accepted
            emitted = [e.token_id for e in r.second.emitted]
            assert emitted == fresh.token_ids == out[start:start + len(emitted)], (second, r.index)
            assert r.shared_draws == 0  # greedy draws nothing
        assert c.tally("second").accepted > 0, second  # the heads do get drafts accepted on the sticky target


@pytest.mark.parametrize("second", ["eagle", "prompt_lookup"])
def test_sampling_both_drafters_meet_the_same_uniforms(heads, second):
    c = compare(heads.engine, heads.tokenizer, heads.ids, temperature=0.8, primary="model", second=second,
                num_draft_tokens=3, max_new_tokens=30, seed=7)
    assert len(c.rounds) == len(c.result.rounds)
    for r in c.rounds:
        both = min(len(r.primary.drafts), len(r.second.drafts))
        assert r.shared_draws == both
        assert [d.u for d in r.primary.drafts[:both]] == [d.u for d in r.second.drafts[:both]]
        assert all(d.u is not None for d in r.second.drafts)


def test_a_copy_of_the_draws_replays_the_round():
    """What the comparison rests on: a fresh stream at round i's context, drawing from a copy of the run's
    generators taken before round i, decides round i exactly as the run did (a deterministic drafter)."""
    target = make_model("llama", layers=2, seed=0)
    engine = SpeculativeEngine(target)
    prompt = [5, 6, 7, 8, 5, 6, 7, 8, 5, 6]
    settings = DecodeSettings(temperature=1.0, num_draft_tokens=3, max_new_tokens=20, seed=11, drafter="prompt_lookup")
    draws, result = Generators(11, home="cpu"), GenerationResult()
    before = [draws.copy()]
    for _ in engine.stream(prompt, settings, into=result, draws=draws):
        before.append(draws.copy())
    assert result.token_ids == engine.generate(prompt, settings).token_ids  # given draws change nothing
    context = list(prompt)
    for round_, copy in zip(result.rounds, before):
        again = GenerationResult()
        left = settings.max_new_tokens - (len(context) - len(prompt))
        with contextlib.closing(engine.stream(context, settings.but(max_new_tokens=left), into=again,
                                              draws=copy)) as stream:
            next(stream)
        mine = again.rounds[0]
        assert (mine.drafted, mine.uniforms, mine.token_ids) == (round_.drafted, round_.uniforms, round_.token_ids)
        context.extend(round_.token_ids)


def test_generators_copy_draws_what_the_original_draws():
    draws = Generators(4, home="cpu")
    torch.rand(3, generator=draws.on("cpu"))
    twin = draws.copy()
    assert torch.equal(torch.rand(5, generator=twin.on("cpu")), torch.rand(5, generator=draws.on("cpu")))
    assert twin.seed == 4 and torch.equal(torch.rand(2, generator=Generators(4, home="cpu").copy().on("cpu")),
                                          torch.rand(2, generator=Generators(4, home="cpu").on("cpu")))


def test_tallies_add_up_the_rounds(setup):
    c = compare(setup.engine, setup.tokenizer, setup.ids, temperature=0.0, primary="model", second="prompt_lookup",
                **SETTINGS)
    whole = c.tally("primary")
    assert whole.tokens == len(c.result.token_ids) and whole.rounds == len(c.rounds)
    assert whole.accepted == c.result.num_accepted and whole.drafted == c.result.num_drafted
    two = c.tally("second", upto=2)
    assert two.rounds == 2 and two.label == "prompt lookup"
    assert two.accepted == sum(r.second.num_accepted for r in c.rounds[:2])


def test_what_cannot_be_compared_is_refused(setup):
    plain = DecodeSettings()
    with pytest.raises(ValueError, match="different second drafter"):
        check(setup.engine, plain, primary="model", second="model")
    with pytest.raises(ValueError, match="'eagle' is not one of this engine's drafters"):
        check(setup.engine, plain, primary="model", second="eagle")
    with pytest.raises(ValueError, match="fixed K"):
        check(setup.engine, plain.but(adaptive=True), primary="model", second="prompt_lookup")


@pytest.mark.parametrize("second", ["eagle", "early_exit"])
def test_a_second_rounds_verdicts_follow_from_the_numbers_it_shows(heads, second):
    """The second drafter's features (EAGLE) or cache (early exit) come from a prefill of the context, not the
    verify forwards of a run of its own, so its q may differ from such a run's by float rounding (~1e-7); what is
    shown is its round's own q, p and u, and every verdict shown follows from them (module docstring)."""
    c = compare(heads.engine, heads.tokenizer, heads.ids, temperature=0.8, primary="model", second=second,
                num_draft_tokens=3, max_new_tokens=30, seed=7)
    judged = 0
    for r in c.rounds:
        for d in r.second.drafts:
            if d.verdict == "discarded":
                assert all(e.verdict == "discarded" for e in r.second.drafts[d.position - 1:])
                break
            judged += 1
            assert d.accept_prob == pytest.approx(min(1.0, d.p / d.q), rel=1e-6, abs=1e-9)
            assert (d.verdict == "accepted") == (d.u < d.accept_prob), (r.index, d)
    assert judged > 0
