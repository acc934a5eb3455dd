"""A conversation's cache kept between generations (`specui.prompt_cache`): a follow-up turn reads only its
new tokens, and its output is what a fresh run of the whole conversation gives, for every drafter, chains
and trees, greedy and sampled; plain and speculative decoding given the same cache stay identical; a
held, stopped or foreign cache is never misused; and a cache that reuses tokens that no longer match (a
broken variant) is caught."""

from __future__ import annotations

import copy

import pytest
import torch

from specui import SpeculativeEngine, lean
from specui.feature_log import FeatureLog
from specui.heads import early_exit, medusa
from specui.cache_pool import PromptCaches
from specui.prompt_cache import PromptCache, common_prefix
from tests.engine.head_helpers import PATHS, path_of, perturb
from tests.engine.test_head_eagle import trained_head
from tests.helpers import make_model, noisy_copy

TURNS = ([5, 17, 3, 88, 41, 9], [12, 7, 30], [64, 2, 2, 19, 51], [8, 8, 40])
EVERY_PATH = ("model", "model_lookup", "eagle", "early_exit")  # the fixture's drafters whose turns take every path


@pytest.fixture(scope="module")
def engine():
    """Drafters that the target accepts often enough that a conversation's rounds take every path (all rejected, a
    rejection inside a block, a whole block and its bonus): a draft model close to the target and an EAGLE head fitted
    to the conversation's greedy turns (with a draft of noise 0.3 and a head fitted to random prompts, one round in 50
    accepted a token)."""
    target = make_model("llama", vocab_size=96, layers=3, seed=7)
    prompts, context = [], []
    for turn in TURNS:  # each greedy turn's prompt, as `converse` builds them
        prompts.append(context + turn)
        context = target.generate(torch.tensor([prompts[-1]]), max_new_tokens=12, do_sample=False)[0].tolist()
    heads = {"eagle": trained_head(target, token_ids=torch.arange(96), steps=40, prompts=prompts),
             "medusa": perturb(medusa.build(target, num_heads=3), scale=0.01, seed=1),
             "early_exit": perturb(early_exit.build(target, exit_layer=2), scale=0.02, seed=2)}
    return SpeculativeEngine(target, noisy_copy(target, noise=0.05, seed=1), heads=heads)


@pytest.fixture
def row_prompts(monkeypatch):
    """Prompt blocks through the few-row kernels too: a fresh run's prompt block then has the bits of the
    decode and verify rows a reused cache holds, so reused and fresh runs agree bit for bit."""
    monkeypatch.setattr(lean, "PROMPT_ROWS", 10**9)


def converse(engine, cache, drafters, *, tokens: int = 12, **settings):
    """A conversation: turn t's prompt is everything before it plus TURNS[t]; each turn run fresh and with
    the cache. Returns [(fresh, cached)] per turn."""
    context, runs = [], []
    for turn, drafter in zip(TURNS, drafters):
        prompt = context + turn
        speculative = drafter != "plain"
        kw = dict(max_new_tokens=tokens, speculative=speculative, drafter=drafter if speculative else None, **settings)
        fresh = engine.generate(prompt, **kw)
        cached = engine.generate(prompt, cache=cache, **kw)
        runs.append((fresh, cached))
        context = prompt + cached.token_ids
    return runs


def same_run(fresh, cached):
    assert cached.token_ids == fresh.token_ids
    assert [r.drafted for r in cached.rounds] == [r.drafted for r in fresh.rounds]
    assert [r.target_probs for r in cached.rounds] == [r.target_probs for r in fresh.rounds]  # the target: exactly
    # an EAGLE head's kept cache was filled round by round, a fresh head's in one block: q to float rounding
    q = [torch.tensor([p for r in run.rounds for p in r.draft_probs]) for run in (cached, fresh)]
    torch.testing.assert_close(q[0], q[1], atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("drafter", [*EVERY_PATH, "medusa", "prompt_lookup", "plain"])
@pytest.mark.parametrize("settings", [{}, {"temperature": 0.8, "seed": 11}], ids=["greedy", "sampled"])
def test_a_follow_up_turn_equals_a_fresh_run(engine, row_prompts, drafter, settings):
    cache = PromptCache()
    runs = converse(engine, cache, [drafter] * len(TURNS), num_draft_tokens=3, **settings)
    context = []
    for (fresh, cached), turn in zip(runs, TURNS):
        same_run(fresh, cached)
        assert fresh.reused_tokens == 0
        assert cached.reused_tokens == max(len(context) - 1, 0)  # all but the last token of the turn before
        context += turn + cached.token_ids
    paths = {path_of(r) for _, cached in runs for r in cached.rounds}
    if drafter in EVERY_PATH:  # a kept cache after rejections inside blocks, after whole blocks and their bonus
        assert set(PATHS) <= paths, paths


@pytest.mark.parametrize("tree", [{"tree_width": 2}, {"tree_width": 3, "tree_nodes": 7}], ids=["static", "dynamic"])
@pytest.mark.parametrize("drafter", ["eagle", "model", "medusa"])
def test_token_trees_on_a_reused_cache(engine, row_prompts, drafter, tree):
    """A tree's accepted path moves in the cache; the head's logged states move with it."""
    runs = converse(engine, PromptCache(), [drafter] * len(TURNS), num_draft_tokens=3, **tree)
    for fresh, cached in runs:
        same_run(fresh, cached)
    assert any(r.num_accepted for _, cached in runs for r in cached.rounds)  # some accepted paths moved


def test_an_eagle_head_keeps_its_cache_of_the_earlier_turns(engine, row_prompts, monkeypatch):
    """The head reads only the target states after the pairs it kept (a plain turn in between keeps them);
    after a drafter without a cache of its own to keep, it reads the whole conversation again."""
    from specui.heads.eagle import EagleDrafter

    fed, original = [], EagleDrafter.propose

    def counting(self, context, k):  # each round first feeds the head the states not yet fed
        if self.pending is not None:
            fed.append(len(self.pending))
        return original(self, context, k)

    monkeypatch.setattr(EagleDrafter, "propose", counting)
    cache, context, kept = PromptCache(), [], 0
    for turn, drafter in zip(TURNS, ["eagle", "plain", "eagle", "model"]):
        fed.clear()
        prompt = context + turn
        result = engine.generate(prompt, max_new_tokens=12, num_draft_tokens=3, speculative=drafter != "plain",
                                 drafter=drafter if drafter != "plain" else None, cache=cache)
        if drafter == "eagle":  # the states after those of the last EAGLE turn, whose last rounds' were never fed:
            assert fed[0] <= len(prompt) - kept + 3 + 2  # a whole block of K = 3 and its bonus, a round without drafts
            kept = len(prompt) + len(result.token_ids)
        context = prompt + result.token_ids
    fed.clear()
    engine.generate(context + [1, 2], max_new_tokens=4, drafter="eagle", cache=cache)
    assert fed[0] == len(context) + 1  # after the draft model's turn: every state of the prompt


@pytest.mark.parametrize("drafter", ["model", "model_lookup"])
def test_a_draft_model_keeps_its_cache_of_the_earlier_turns(engine, row_prompts, monkeypatch, drafter):
    from specui.kv import CachedLM

    read, original = [], CachedLM.extend

    def counting(self, ids, **kw):
        if kw.get("prompt") and self.model is engine.draft_model:
            read.append(len(ids))
        return original(self, ids, **kw)

    monkeypatch.setattr(CachedLM, "extend", counting)
    cache, context = PromptCache(), []
    for turn in TURNS:
        read.clear()
        prompt = context + turn
        result = engine.generate(prompt, max_new_tokens=12, drafter=drafter, cache=cache)
        assert sum(read) <= (len(turn) + 1 if context else len(prompt) - 1)  # the new turn (and the last token)
        context = prompt + result.token_ids


def test_drafters_change_from_turn_to_turn(engine, row_prompts):
    """The cache logs the states every head of the engine reads (layers 1-3), whichever drafter runs; early
    exit at layer 2 runs its drafts' first layers ahead, so the log ends there and the next EAGLE turn reads
    the rest of the conversation again."""
    cache = PromptCache()
    runs = converse(engine, cache, ["eagle", "early_exit", "eagle", "plain"], num_draft_tokens=2)
    for fresh, cached in runs:
        same_run(fresh, cached)
    eagle_after_early_exit = runs[2][1]
    assert 0 < eagle_after_early_exit.reused_tokens < len(TURNS[0]) + len(TURNS[1]) + 2 * 12 - 1
    assert runs[3][1].reused_tokens == sum(map(len, TURNS[:3])) + 3 * 12 - 1
    medusa_turn = converse(engine, PromptCache(), ["plain", "medusa"])[1]  # plain turns log the heads' layers
    same_run(*medusa_turn)
    assert medusa_turn[1].reused_tokens == len(TURNS[0]) + 12 - 1
    bare = SpeculativeEngine(engine.target_model, engine.draft_model, heads={"medusa": engine.heads["medusa"]})
    cache = PromptCache()
    converse(bare, cache, ["model"])  # logs Medusa's layer alone: EAGLE's turn reads the conversation again
    fresh, cached = engine.generate(TURNS[0] + [4], max_new_tokens=6, drafter="eagle"), \
        engine.generate(TURNS[0] + [4], max_new_tokens=6, drafter="eagle", cache=cache)
    same_run(fresh, cached)
    assert cached.reused_tokens == 0


def test_plain_and_speculative_read_the_same_cache(engine):
    """With prompt blocks through MKL (as shipped), a race's two runs share the cached conversation and read
    the new turn alike (`limit`): identical greedy tokens, by construction; and a fresh run agrees."""
    cache, context = PromptCache(), []
    for turn in [list(range(20, 44)), list(range(50, 70)), list(range(3, 21))]:
        prompt = context + turn
        cache.limit = cache.reusable(prompt)
        spec = engine.generate(prompt, max_new_tokens=16, drafter="eagle", cache=cache)
        plain = engine.generate(prompt, max_new_tokens=16, speculative=False, cache=cache)
        cache.limit = None
        assert plain.reused_tokens == spec.reused_tokens == max(len(context) - 1, 0)
        assert spec.token_ids == plain.token_ids == engine.generate(prompt, max_new_tokens=16).token_ids
        context = prompt + spec.token_ids


def test_a_held_cache_is_left_alone(engine, row_prompts):
    cache = PromptCache()
    first = engine.generate(TURNS[0], max_new_tokens=8, cache=cache)
    prompt = TURNS[0] + first.token_ids + TURNS[1]
    holder = engine.stream(prompt, max_new_tokens=8, drafter="eagle", cache=cache)
    next(holder)
    assert cache.busy and cache.reusable(prompt) == 0
    other = engine.generate(prompt, max_new_tokens=8, drafter="eagle", cache=cache)  # runs without it
    assert other.reused_tokens == 0
    rest = list(holder)
    assert not cache.busy
    again = engine.generate(prompt, max_new_tokens=8, drafter="eagle", cache=cache)
    assert again.reused_tokens == len(prompt) - 1
    same_run(other, again)
    assert len(rest) > 0


def test_a_stopped_run_leaves_a_usable_cache(engine, row_prompts):
    cache = PromptCache()
    stream = engine.stream(TURNS[0], max_new_tokens=20, drafter="model", cache=cache)
    emitted = [t for _, r in zip(range(2), stream) for t in r.token_ids]
    stream.close()  # the Stop button
    prompt = TURNS[0] + emitted + TURNS[1]
    fresh = engine.generate(prompt, max_new_tokens=10, drafter="eagle")
    cached = engine.generate(prompt, max_new_tokens=10, drafter="eagle", cache=cache)
    assert cached.reused_tokens == len(TURNS[0]) + len(emitted) - 1
    same_run(fresh, cached)


def test_an_eos_inside_a_block_leaves_the_cache_at_the_eos(engine, row_prompts):
    """The drafts accepted after an EOS are dropped from the output and from the cache; the EOS itself is
    a context token the cache holds."""
    target = engine.target_model
    probe = SpeculativeEngine(target, copy.deepcopy(target)).generate(TURNS[0], max_new_tokens=5, num_draft_tokens=4)
    assert probe.rounds[0].num_accepted == 4 and probe.token_ids[1] != probe.token_ids[0]  # drafts the target accepts
    eos = probe.token_ids[1]
    ending = SpeculativeEngine(target, copy.deepcopy(target), eos_token_id=eos)
    cache = PromptCache()
    first = ending.generate(TURNS[0], max_new_tokens=40, num_draft_tokens=4, cache=cache)
    assert first.stop_reason == "eos" and first.token_ids[-1] == eos
    assert cache.length == len(TURNS[0]) + len(first.token_ids)  # the EOS's keys and values, nothing after
    prompt = TURNS[0] + first.token_ids + TURNS[1]
    fresh = ending.generate(prompt, max_new_tokens=10)
    cached = ending.generate(prompt, max_new_tokens=10, cache=cache)
    assert cached.reused_tokens == len(TURNS[0]) + len(first.token_ids)
    same_run(fresh, cached)


def test_another_targets_cache_is_not_reused(engine, row_prompts):
    cache = PromptCache()
    engine.generate(TURNS[0], max_new_tokens=8, cache=cache)
    other = SpeculativeEngine(make_model("llama", vocab_size=96, layers=2, seed=9))
    result = other.generate(TURNS[0] + TURNS[1], max_new_tokens=8, cache=cache)
    assert result.reused_tokens == 0
    assert result.token_ids == other.generate(TURNS[0] + TURNS[1], max_new_tokens=8).token_ids
    with pytest.raises(ValueError, match="PromptCache"):
        engine.stream(TURNS[0], cache=object())


class StaleCache(PromptCache):
    """Broken on purpose: reuses every cached token, whether or not the new prompt still has it."""

    def _shared(self, ids, model=None):  # what `open` and `reusable` reuse
        return 0 if self.lm is None else min(self.lm.length, len(ids) - 1)


def test_a_cache_that_reuses_tokens_that_changed_is_caught(engine, row_prompts):
    """An edited history (the user changed an earlier message) shares only a short prefix with the cache:
    the real cache reads the rest again and equals a fresh run; the stale one does not."""
    for cache, equal in ((PromptCache(), True), (StaleCache(), False)):
        first = engine.generate(TURNS[0] + TURNS[1], max_new_tokens=12, cache=cache)
        edited = TURNS[0][:2] + [90, 91, 92, 93] + first.token_ids + TURNS[2]
        fresh = engine.generate(edited, max_new_tokens=12)
        cached = engine.generate(edited, max_new_tokens=12, cache=cache)
        assert (cached.token_ids == fresh.token_ids) is equal


def test_the_pool_picks_the_conversation_that_matches(engine):
    pool = PromptCaches(size=2)
    a, b = [1, 2, 3, 4, 5], [9, 8, 7, 6]
    first = pool.pick(a)
    engine.generate(a, max_new_tokens=4, cache=first)
    second = pool.pick(b)
    assert second is not first
    engine.generate(b, max_new_tokens=4, cache=second)
    assert pool.pick(a + [0, 11]) is first  # a's conversation goes on
    assert pool.pick([40, 41]) is second  # a new one takes the least recently picked
    engine.generate([40, 41], max_new_tokens=4, cache=second)
    assert pool.pick([40, 99, 98, 97, 96]) is first  # shares only an opening with [40, 41]: that chat keeps its cache
    with pytest.raises(ValueError):
        PromptCaches(size=0)
    first.clear()
    assert first.length == 0 and first.drafter_state is None and first.reusable(a + [0, 11]) == 0


def test_the_feature_log_follows_the_cache():
    log = FeatureLog((1, 3))
    states = torch.arange(4 * 3 * 2, dtype=torch.float32).view(4, 6)  # asked (3, 0, 1): columns of 2
    log.record((3, 0, 1), 0, states)
    assert log.valid == 4 and torch.equal(log.states(4, (1, 3)), states[:, [4, 5, 0, 1]])
    assert torch.equal(log.states(2, (3,)), states[:2, :2])
    log.move(1, [2, 3])
    assert log.valid == 3 and torch.equal(log.states(3, (1,))[1:], states[2:, 4:])
    log.record((1,), 3, torch.zeros(2, 2))  # without layer 3: the log ends at 3
    assert log.valid == 3 and log.ask((1,), 3) == (1, 3) and log.ask((1,), 4) == (1,)
    assert log.ask((), 3, early_stop=2) == ()  # an early-exit draft's tokens skip layer 1
    log.trim(1)
    assert log.valid == 1
    with pytest.raises(ValueError):
        log.states(2, (1,))
    assert common_prefix([1, 2, 3], [1, 2, 4, 5]) == 2 and common_prefix([], [1]) == 0
