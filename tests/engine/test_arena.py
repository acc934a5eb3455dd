"""The drafter arena on tiny models: plain decoding then every drafter, one after another, with the same
seed; greedy outputs identical; figures for each contestant; each token's provenance per drafter."""

from __future__ import annotations

import threading

import pytest

from specui import arena
from specui.engine import ContextLengthError, SpeculativeEngine
from specui.events import GenerationResult, Kind
from specui.settings import DecodeSettings
from tests.helpers import make_model, noisy_copy

PROMPT = [5, 6, 7, 8, 5, 6, 7, 9, 5, 6]  # repeats, so prompt lookup finds matches
GREEDY = DecodeSettings(max_new_tokens=24, num_draft_tokens=3, seed=0)


class Watched(SpeculativeEngine):
    """An engine that records each run's start and end, and how many runs were in flight at once."""

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.events, self.active, self.most = [], 0, 0

    def _rounds(self, prompt, sampling, drafter, *args, **kw):
        name = getattr(drafter, "name", None) or ("plain" if drafter is None else type(drafter).__name__)
        self.active += 1
        self.most = max(self.most, self.active)
        self.events.append(("start", name))
        try:
            yield from super()._rounds(prompt, sampling, drafter, *args, **kw)
        finally:
            self.active -= 1
            self.events.append(("end", name))


@pytest.fixture(scope="module")
def engine():
    target = make_model("llama", layers=2, seed=0)
    return Watched(target, noisy_copy(target, noise=0.3, seed=1))


def test_every_drafter_runs_after_plain_and_greedy_outputs_are_identical(engine):
    engine.events.clear()
    outcome = arena.run(engine, PROMPT, GREEDY, warm=False)
    assert outcome.names == ("plain", "model", "model_lookup", "prompt_lookup") == arena.contestants(engine)
    assert [s.name for s in outcome.standings] == list(outcome.names)
    assert outcome.identical is True and all(s.identical for s in outcome.standings)
    plain = outcome.standing("plain")
    assert plain.stats.acceptance_rate is None and plain.stats.mean_accepted_length == 1.0
    assert plain.speedup == pytest.approx(1.0) and plain.label == "plain (target alone)"
    for name in ("model", "model_lookup", "prompt_lookup"):
        s = outcome.standing(name)
        assert s.finished and s.result.token_ids == plain.result.token_ids and len(s.result.token_ids) == 24
        assert s.result.seed == plain.result.seed == 0
        longest = 7 if name == "model_lookup" else 4  # K = 3; a copy may hold 6
        assert 0.0 <= s.stats.acceptance_rate <= 1.0 and 1.0 <= s.stats.mean_accepted_length <= longest
        assert s.stats.tokens_per_s > 0 and s.speedup > 0
        assert s.stats.cost_ratio is not None and s.stats.cost_ratio >= 0
    assert outcome.standing("model").label == "draft model"
    # one run at a time, in order, each ending before the next starts
    assert engine.most == 1
    assert engine.events == [(event, name) for name in ("plain", "draft model", "draft model + lookup", "prompt lookup")
                             for event in ("start", "end")]


def test_each_tokens_provenance_is_its_kind_in_each_drafters_run(engine):
    outcome = arena.run(engine, PROMPT, GREEDY, warm=False)
    plain = outcome.standing("plain").result
    assert [c.token_id for c in outcome.credits] == plain.token_ids
    for name in ("model", "model_lookup", "prompt_lookup"):
        kinds = outcome.standing(name).result.kinds
        assert [c.kinds[name] for c in outcome.credits] == kinds
        assert set(kinds) <= {Kind.ACCEPTED, Kind.RESAMPLED, Kind.BONUS}
    for c in outcome.credits:
        assert c.drafted_by == tuple(n for n in ("model", "model_lookup", "prompt_lookup") if c.kinds[n] == Kind.ACCEPTED)
    assert any(c.drafted_by for c in outcome.credits)  # the noisy draft gets some right


def test_sampled_outputs_are_compared_only_while_they_agree(engine):
    sampled = GREEDY.but(temperature=1.0, seed=3)
    outcome = arena.run(engine, PROMPT, sampled, warm=False)
    assert outcome.identical is None and all(s.identical is None for s in outcome.standings)
    plain = outcome.standing("plain").result.token_ids
    for name in ("model", "model_lookup", "prompt_lookup"):
        mine = outcome.standing(name).result.token_ids
        known = [c.kinds[name] is not None for c in outcome.credits]
        agree = next((i for i, (a, b) in enumerate(zip(mine, plain)) if a != b), min(len(mine), len(plain)))
        assert known == [i < agree for i in range(len(plain))]


def test_a_drawn_seed_is_shared_by_every_contestant(engine):
    outcome = arena.run(engine, PROMPT, GREEDY.but(seed=None, temperature=0.7, max_new_tokens=6), warm=False)
    seeds = {s.result.seed for s in outcome.standings}
    assert len(seeds) == 1 and None not in seeds


def test_stop_ends_the_arena_at_the_next_round(engine):
    engine.events.clear()

    class AfterRounds:
        def __init__(self, n):
            self.n = n

        def is_set(self):
            self.n -= 1
            return self.n < 0

    outcome = arena.run(engine, PROMPT, GREEDY, stop=AfterRounds(2), warm=False)
    assert outcome.names == ("plain",) and len(outcome.standing("plain").result.rounds) == 3
    assert not outcome.standing("plain").finished and outcome.identical is None
    assert engine.active == 0 and [e for e, _ in engine.events] == ["start", "end"]  # the stream was closed


def test_bad_settings_and_long_prompts_fail_before_any_work(engine):
    engine.events.clear()
    with pytest.raises(ContextLengthError):
        arena.streams(engine, PROMPT * 60, GREEDY, into={})
    with pytest.raises(ValueError, match="starts with 'plain'"):
        arena.streams(engine, PROMPT, GREEDY, into={}, names=("model",))
    assert engine.events == []


def test_a_subset_of_contestants_and_the_streams_open_one_at_a_time(engine):
    results: dict = {}
    opened = []
    for name, stream in arena.streams(engine, PROMPT, GREEDY.but(max_new_tokens=5), into=results,
                                      names=("plain", "prompt_lookup")):
        opened.append(name)
        assert list(results) == opened  # the next result exists only once its stream is asked for
        for _ in stream:
            assert engine.active == 1
    outcome = arena.summarise(results, greedy=True)
    assert outcome.names == ("plain", "prompt_lookup") and outcome.identical is True


def test_credits_from_hand_made_results():
    def result(tokens, kinds, stop="length"):
        r = GenerationResult(token_ids=list(tokens), kinds=list(kinds), stop_reason=stop)
        return r

    results = {"plain": result([1, 2, 3, 4], ["plain"] * 4),
               "a": result([1, 2, 3, 4], ["accepted", "resampled", "accepted", "bonus"]),
               "b": result([1, 2, 9], ["accepted", "accepted", "resampled"]),
               "c": result([1], ["bonus"], stop="")}  # stopped after one token
    kinds = [c.kinds for c in arena.credits(results)]
    assert kinds[0] == {"a": "accepted", "b": "accepted", "c": "bonus"}
    assert kinds[1] == {"a": "resampled", "b": "accepted", "c": None}
    assert kinds[2] == {"a": "accepted", "b": None, "c": None}  # b parted from plain here
    assert [c.drafted_by for c in arena.credits(results)] == [("a", "b"), ("b",), ("a",), ()]


def test_warm_up_runs_each_contestant_under_the_lock(engine):
    lock = threading.Lock()
    engine.events.clear()
    arena.warm_up(engine, PROMPT, lock=lock)
    assert [name for event, name in engine.events if event == "start"][0] == "plain"
    assert len(engine.events) == 8 and not lock.locked()  # start and end of plain and 3 drafters


def test_heads_attached_to_the_engine_join_the_arena_in_display_order(engine):
    from specui.drafters import PromptLookupDrafter

    class StandIn:  # a trained head's place: it drafts by prompt lookup
        def make_drafter(self, target_model):
            return PromptLookupDrafter()

    with_heads = SpeculativeEngine(engine.target_model, engine.draft_model,
                                   heads={"medusa": StandIn(), "eagle": StandIn()})
    outcome = arena.run(with_heads, PROMPT, GREEDY.but(max_new_tokens=8), warm=False)
    assert outcome.names == ("plain", "model", "model_lookup", "eagle", "medusa", "prompt_lookup")
    assert outcome.identical is True
    assert [s.label for s in outcome.standings][3:5] == ["EAGLE", "Medusa"]


def test_a_drafter_with_its_own_k_races_at_it(engine):
    """ks (a preset's drafter_tokens) puts a drafter at its own K; the rest keep the settings' K."""
    outcome = arena.run(engine, PROMPT, GREEDY.but(num_draft_tokens=3), warm=False, ks={"prompt_lookup": 1})
    asked = {name: {r.num_draft_tokens for r in outcome.standing(name).result.rounds} for name in ("model", "prompt_lookup")}
    assert asked["prompt_lookup"] <= {0, 1} and 1 in asked["prompt_lookup"] and 3 in asked["model"]
    assert outcome.identical is True
