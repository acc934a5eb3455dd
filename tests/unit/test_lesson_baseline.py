"""The Teach tab's K sweep and drafter comparison time plain decoding beside each arm (`lesson.timed_beside`): a plain
run before the first arm and after every arm, each arm measured against the faster of the two around it, where one
plain run timed once was every arm's baseline (on a loaded machine a noised draft of α 0.03 read 1.30×). These tests
check which runs are timed against which, on a tiny real pair whose runs are recorded as they go; never a time."""

from __future__ import annotations

import pytest

from specui import SpeculativeEngine, lesson, runstats
from tests.helpers import char_tokenizer, make_model, noisy_copy

PROMPT = "def add(a, b):\n    return a + b\n\ndef add(a, b):\n"


@pytest.fixture(scope="module")
def pair():
    target = make_model("llama", layers=2, seed=0)
    return target, noisy_copy(target, noise=0.1, seed=1), char_tokenizer()(PROMPT)["input_ids"]


def recorded(engine, runs: list) -> SpeculativeEngine:
    """`engine` whose every run is appended to `runs` as (speculative, K, drafter, result), in the order they ran."""
    real = engine.generate

    def generate(ids, settings=None, **keywords):
        result = real(ids, settings, **keywords)
        decode = settings.but(**keywords) if keywords else settings
        runs.append((decode.speculative, decode.num_draft_tokens, decode.drafter, result))
        return result

    engine.generate = generate
    return engine


def _tokens_per_s(result) -> float:
    return runstats.run_stats(result).tokens_per_s


def test_each_k_of_the_sweep_is_timed_against_the_faster_plain_run_around_it(pair):
    target, draft, ids = pair
    runs = []
    engine = recorded(SpeculativeEngine(target, draft), runs)
    points = list(lesson.k_sweep(engine, ids, ks=[1, 3, 2], max_new_tokens=8, seed=1, warm=False))
    assert [(spec, k if spec else None) for spec, k, _, _ in runs] == [
        (False, None), (True, 1), (False, None), (True, 3), (False, None), (True, 2), (False, None)]
    plains = [r for spec, _, _, r in runs if not spec]
    assert all(p.token_ids == plains[0].token_ids for p in plains)  # the same tokens: only their time differs
    for i, point in enumerate(points):
        before, after = plains[i], plains[i + 1]
        assert point.label == f"K={runs[2 * i + 1][1]}"
        assert point.plain_tokens_per_s == max(_tokens_per_s(before), _tokens_per_s(after))
        assert point.speedup == pytest.approx(_tokens_per_s(runs[2 * i + 1][3]) / point.plain_tokens_per_s)


def test_each_drafter_is_timed_against_the_faster_plain_run_around_it(pair):
    target, draft, ids = pair
    runs = []
    engine = recorded(SpeculativeEngine(target, draft), runs)
    noisy = recorded(SpeculativeEngine(target, lesson.weakened_draft(draft, noise=3.0, seed=0)), runs)
    choices = [lesson.DrafterChoice("draft model", engine, "model"), lesson.DrafterChoice("noisy", noisy, "model"),
               lesson.DrafterChoice("prompt lookup", engine, "prompt_lookup")]
    points = list(lesson.drafter_comparison(choices, ids, max_new_tokens=8, temperature=0.0, seed=0, warm=False))
    assert [(spec, drafter if spec else None) for spec, _, drafter, _ in runs] == [
        (False, None), (True, "model"), (False, None), (True, "model"), (False, None), (True, "prompt_lookup"),
        (False, None)]
    plains = [r for spec, _, _, r in runs if not spec]
    assert [p.label for p in points] == ["draft model", "noisy", "prompt lookup"]
    for i, point in enumerate(points):
        assert point.plain_tokens_per_s == max(_tokens_per_s(plains[i]), _tokens_per_s(plains[i + 1]))
