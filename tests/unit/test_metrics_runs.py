"""The figures of real runs at their edges (tiny models, CPU, greedy): a draft identical to the target, whose every
draft is accepted, has α 1 whatever the token budget left its last round (K 4 and 7 tokens: a round of 4 drafts, then
a round asked 1, 2 tokens left); a run of one token asks no draft and has no α, no acceptance rate and no theory, and
its one forward gave one token; an eos inside an accepted block ends the run there without lowering α."""

from __future__ import annotations

import copy

import pytest

from specui import metrics, runstats
from specui.engine import SpeculativeEngine
from tests.helpers import make_model

PROMPT = [5, 6, 7, 8, 5, 6, 7, 9, 5, 6]


@pytest.fixture(scope="module")
def same():
    target = make_model("llama", layers=2, seed=0)
    return SpeculativeEngine(target, copy.deepcopy(target))


def test_a_draft_the_target_always_accepts_has_alpha_one_whatever_the_budget_left(same):
    result = same.generate(PROMPT, max_new_tokens=7, num_draft_tokens=4, temperature=0.0)
    assert [r.num_draft_tokens for r in result.rounds] == [4, 1]  # the budget's last round asked 1
    assert [len(r.token_ids) for r in result.rounds] == [5, 2] and result.acceptance_rate == 1.0
    assert result.mean_accepted_length == 3.5  # this run's tokens per target forward
    stats = runstats.run_stats(result, k=4)
    assert stats.theory.alpha == 1.0 and stats.theory.tokens_per_round == 5.0  # a full round of K 4


def test_a_run_of_one_token(same):
    result = same.generate(PROMPT, max_new_tokens=1, num_draft_tokens=4, temperature=0.0)
    (only,) = result.rounds
    assert only.num_draft_tokens == 0 and only.num_drafted == 0 and len(only.token_ids) == 1
    assert result.acceptance_rate is None and result.mean_accepted_length == 1.0
    assert metrics.fitted_alpha(result.rounds, 4) is None and runstats.run_stats(result, k=4).theory is None


def test_an_eos_inside_an_accepted_block_leaves_alpha_at_one(same):
    """The eos is the run's third token, inside the first round's block of 4 accepted drafts: the round emits 3
    tokens (its verification accepted 4), the run ends, and α is still 1."""
    plain = same.generate(PROMPT, max_new_tokens=8, speculative=False, temperature=0.0).token_ids
    eos = plain[2]
    assert eos not in plain[:2]
    result = same.generate(PROMPT, max_new_tokens=8, num_draft_tokens=4, temperature=0.0, eos_token_id=eos)
    (only,) = result.rounds
    assert result.stop_reason == "eos" and result.token_ids == plain[:3]
    assert only.num_accepted == 4 and len(only.token_ids) == 3
    assert metrics.fitted_alpha(result.rounds, 4) == 1.0


def test_a_run_stopped_before_its_first_round_has_no_mean_accepted_length():
    """No round, no target forward: tokens per target forward does not exist, and reads '–' (the API: null), where it
    read 0.00, a figure below plain decoding's 1.0 that no run can have."""
    from specui.events import GenerationResult
    from specui.terminal_view import Reply, stats_line

    stopped = GenerationResult(prefill_s=0.2)  # what a stream left before its first round holds
    assert stopped.mean_accepted_length is None
    stats = runstats.run_stats(stopped, k=4)
    assert stats.mean_accepted_length is None and stats.mean_k is None
    assert stats.as_dict()["mean_accepted_length"] is None
    line = stats_line(Reply(result=stopped), drafter="model", k=4, confidence=0.0, sampled=False)
    assert "– tokens per target forward" in line and "0.00 tokens per target forward" not in line
