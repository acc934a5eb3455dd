"""The app's pool of conversation caches (`specui.cache_pool.PromptCaches`) is bounded by bytes, not by a count:
many visitors taking turns keep their caches while the budget holds them, the least recently used go first, a
cache a run holds never goes, one conversation larger than the whole budget keeps its own, and a turn whose cache
went reads its whole conversation again and gives a fresh run's tokens. Real tiny models and their real caches."""

from __future__ import annotations

import sys
import threading

import pytest
import torch

from specui import SpeculativeEngine, lean
from specui.loading import LoadError, _prompt_caches
from specui.cache_pool import PromptCaches, bytes_per_token, default_budget, parse_bytes
from specui.prompt_cache import PromptCache, held_bytes
from tests.helpers import make_model, noisy_copy

TOKENS = 6  # each turn's answer


@pytest.fixture(scope="module")
def engine():
    target = make_model("llama", vocab_size=96, layers=3, seed=7)
    return SpeculativeEngine(target, noisy_copy(target, noise=0.3, seed=1))


@pytest.fixture
def row_prompts(monkeypatch):
    """Prompt blocks through the few-row kernels: a fresh run and a reused cache then agree bit for bit."""
    monkeypatch.setattr(lean, "PROMPT_ROWS", 10**9)


def opening(visitor: int) -> list[int]:
    """A visitor's first prompt: no prefix shared with another visitor's."""
    return [1 + visitor % 90, 2 + visitor // 90, 40, 41, 42]


def turn(engine, pool, ids, owner=None, **kw):
    """One turn through the pool, as the app runs it: (the conversation after it, prompt tokens read)."""
    result = engine.generate(ids, max_new_tokens=TOKENS, cache=pool.pick(ids, engine.target_model, owner=owner), **kw)
    return ids + result.token_ids, len(ids) - result.reused_tokens


def one_conversation(engine) -> int:
    """The bytes a visitor's cache holds after its first turn (a real cache: whole buffers)."""
    pool = PromptCaches()
    turn(engine, pool, opening(0))
    return pool.nbytes


def test_bytes_per_token_and_what_a_cache_holds(engine):
    model = engine.target_model
    assert bytes_per_token(model) == 2 * 3 * 2 * 16 * 4  # keys and values x layers x kv heads x head width x float32
    pool = PromptCaches()
    ids, _ = turn(engine, pool, opening(0))
    cache = pool.caches[0]
    assert cache.nbytes >= cache.length * bytes_per_token(model) > 0
    assert held_bytes(cache.lm) == held_bytes(cache.lm.cache)  # a plain CachedLM: its keys and values, no weights
    assert held_bytes(cache.lm, cache.lm) == held_bytes(cache.lm)  # each storage once
    assert held_bytes(model) == 0 and held_bytes(None, 3, "x") == 0
    assert pool.nbytes == cache.nbytes


def test_what_a_transformers_cache_holds():
    """A model the lean forward does not take (GPT-2) keeps a transformers DynamicCache: its keys and values count."""
    model = make_model("gpt2", vocab_size=96, layers=2)
    assert bytes_per_token(model) == 2 * 2 * 4 * 16 * 4  # keys and values x layers x heads x head width x float32
    pool = PromptCaches()
    turn(SpeculativeEngine(model), pool, opening(0), speculative=False)
    cache = pool.caches[0]
    assert cache.nbytes == cache.length * bytes_per_token(model) > 0


def test_many_visitors_taking_turns_keep_their_caches(engine, monkeypatch):
    """The app's pool kept four caches: a fifth visitor chatting in turn with four others made every turn evict
    another's cache and read its whole conversation again. Bounded by bytes, twelve short chats keep theirs."""
    monkeypatch.delenv("SPECUI_CONVERSATION_MEMORY", raising=False)
    pool = _prompt_caches()
    chats = [opening(v) for v in range(12)]
    for _ in range(3):  # three rounds of every visitor's turn
        for v, ids in enumerate(chats):
            chats[v], read = turn(engine, pool, ids + [50, 51])
            assert read <= 3 or len(ids) == 5  # a follow-up reads its new tokens (and the answer's last) only
    assert pool.budget == default_budget(engine.target_model) and len(pool.caches) == 12


def test_the_least_recently_used_go_first_within_the_budget(engine):
    per = one_conversation(engine)
    pool = PromptCaches(budget=3 * per)  # room for three visitors' caches
    chats = [turn(engine, pool, opening(v))[0] for v in range(5)]
    assert len(pool.caches) == 3 and pool.nbytes <= pool.budget
    reads = [turn(engine, pool, chats[v] + [50])[1] for v in (4, 3, 2)]  # the three most recent kept theirs
    assert reads == [2, 2, 2]
    assert turn(engine, pool, chats[0] + [50])[1] == len(chats[0]) + 1  # visitor 0's went: all of it read again
    with pytest.raises(ValueError, match="budget"):
        PromptCaches(budget=-1)


def test_a_turn_whose_cache_went_gives_a_fresh_runs_tokens(engine, row_prompts):
    """Evicted or kept, a turn's tokens are a fresh run's; speculative and plain greedy agree either way."""
    per = one_conversation(engine)
    for budget in (10 * per, 0):  # every cache kept; only the last one used
        pool = PromptCaches(budget=budget)
        chats = [turn(engine, pool, opening(v))[0] for v in range(3)]
        for v, ids in enumerate(chats):
            ids = ids + [60, 61, 62]
            fresh = engine.generate(ids, max_new_tokens=TOKENS)
            plain = engine.generate(ids, max_new_tokens=TOKENS, speculative=False, cache=pool.pick(ids))
            spec = engine.generate(ids, max_new_tokens=TOKENS, cache=pool.pick(ids))
            assert spec.token_ids == plain.token_ids == fresh.token_ids
            assert plain.reused_tokens == (len(chats[v]) - 1 if budget else 0)


def test_a_conversation_larger_than_the_budget_keeps_its_cache_alone(engine):
    pool = PromptCaches(budget=one_conversation(engine) // 2)
    ids, _ = turn(engine, pool, opening(0))
    for _ in range(3):  # its own turns go on reading only what is new
        ids, read = turn(engine, pool, ids + [70])
        assert read == 2 and len(pool.caches) == 1
    other, _ = turn(engine, pool, opening(1))  # another visitor: the one cache kept is the newest
    assert len(pool.caches) == 1 and pool.caches[0].tokens == other
    assert turn(engine, pool, ids + [70])[1] == len(ids) + 1


def test_a_cache_a_run_holds_is_never_let_go(engine):
    pool = PromptCaches(budget=0)
    ids = opening(0)
    held = pool.pick(ids, engine.target_model)
    stream = engine.stream(ids, max_new_tokens=TOKENS, cache=held)
    next(stream)  # the run holds the cache now
    assert held.busy
    for v in range(1, 4):  # other visitors' turns meanwhile, with no room for anyone
        turn(engine, pool, opening(v))
        assert held in pool.caches and held.nbytes > 0
    for _ in stream:  # the run ends: its cache is the newest, and the others go
        pass
    assert pool.caches == [held] and not held.busy
    assert turn(engine, pool, held.tokens + [70])[1] == 2


def test_a_cache_let_go_between_its_pick_and_its_run_comes_back(engine):
    """Another visitor's pick may let a picked cache go before its run opens it: the run still reuses it, and
    the pool takes it back when the run ends, so the conversation's next turn finds it."""
    pool = PromptCaches(budget=0)
    ids = turn(engine, pool, opening(0))[0] + [70]
    mine = pool.pick(ids, engine.target_model)
    turn(engine, pool, opening(1))  # lets `mine` go: the budget holds one cache
    assert mine not in pool.caches
    result = engine.generate(ids, max_new_tokens=TOKENS, cache=mine)
    assert result.reused_tokens == len(ids) - 2 and pool.caches == [mine]
    assert turn(engine, pool, ids + result.token_ids + [71])[1] == 2


def test_concurrent_turns_in_threads(engine, row_prompts):
    """Eight visitors, each on its own thread, four turns each, with room for three caches: every turn gives
    the tokens of the same conversation run alone without a cache, and the pool ends within its budget."""
    per = one_conversation(engine)
    turns = 4
    expected = []
    for v in range(8):
        ids, answers = opening(v), []
        for t in range(turns):
            ids = ids + [50 + t]
            answers.append(engine.generate(ids, max_new_tokens=TOKENS).token_ids)
            ids = ids + answers[-1]
        expected.append(answers)
    pool, got, failures = PromptCaches(budget=3 * per), [[] for _ in range(8)], []

    def visitor(v):
        try:
            ids = opening(v)
            for t in range(turns):
                ids = ids + [50 + t]
                result = engine.generate(ids, max_new_tokens=TOKENS, cache=pool.pick(ids, engine.target_model))
                got[v].append(result.token_ids)
                ids = ids + result.token_ids
        except Exception as e:  # noqa: BLE001 - reported below, on the test's thread
            failures.append(e)

    threads = [threading.Thread(target=visitor, args=(v,)) for v in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures and got == expected
    assert pool.nbytes <= pool.budget and not any(c.busy for c in pool.caches)


def test_the_budget_can_be_set_and_a_bad_one_is_refused(monkeypatch):
    assert [parse_bytes(s) for s in ("2GB", "512 mb", "1.5GiB", "3000", "0")] == [2 * 10**9, 512 * 10**6,
                                                                                 3 * 2**29, 3000, 0]
    monkeypatch.setenv("SPECUI_CONVERSATION_MEMORY", "2GB")
    assert _prompt_caches().budget == 2 * 10**9
    for bad in ("lots", "2 parsecs", "-1GB"):
        monkeypatch.setenv("SPECUI_CONVERSATION_MEMORY", bad)
        with pytest.raises(LoadError, match=r"^SPECUI_CONVERSATION_MEMORY: .* is not a size \(e\.g\. 2GB"):
            _prompt_caches()



def test_a_bad_budget_is_refused_before_the_models_load(monkeypatch):
    """The pool is made once the pair has loaded: a mistyped size was said only after a minute's load."""
    from specui.loading import check_before_loading
    from tests.helpers import ui_config

    monkeypatch.setenv("SPECUI_CONVERSATION_MEMORY", "2 parsecs")
    with pytest.raises(LoadError, match=r"^SPECUI_CONVERSATION_MEMORY: '2 parsecs' is not a size"):
        check_before_loading(ui_config().get("bundled"))


def test_the_default_budget_is_a_quarter_of_the_memory_raised_towards_one_whole_context(monkeypatch):
    from specui import cache_pool

    model = make_model("llama", vocab_size=96, layers=3, seed=7)
    whole = bytes_per_token(model) * 512  # one conversation of the model's whole context
    assert cache_pool.memory_of(torch.device("cpu")) > whole  # this machine's memory
    for memory, budget in ((10**10, 10**10 // 4), (3 * whole, whole), (whole, whole // 2)):
        monkeypatch.setattr(cache_pool, "memory_of", lambda device, m=memory: m)
        assert default_budget(model) == budget


def test_a_run_closed_by_the_garbage_collector_inside_a_pick_does_not_deadlock(engine, monkeypatch):
    """A stream dropped unfinished is closed when it is collected, on whatever thread that happens, even inside
    `pick` (the collector runs at any allocation): its cache's close tells the pool, whose lock that thread holds."""
    from specui.prompt_cache import PromptCache

    pool = PromptCaches(budget=10**12)
    turn(engine, pool, opening(0))  # a free cache, which the pick below looks at
    ids = opening(1)
    stream = engine.stream(ids, max_new_tokens=TOKENS, cache=pool.pick(ids, engine.target_model))
    next(stream)
    original, dropped = PromptCache.reusable, [stream]

    def collected_meanwhile(self, *args):
        if dropped:
            dropped.pop().close()  # what the collector does to an unreachable suspended generator
        return original(self, *args)

    monkeypatch.setattr(PromptCache, "reusable", collected_meanwhile)
    del stream
    picked = []
    thread = threading.Thread(target=lambda: picked.append(pool.pick(opening(2), engine.target_model)), daemon=True)
    thread.start()
    thread.join(timeout=20)
    assert picked, "pick deadlocked"
    assert not dropped and len(pool.caches) == 3 and not any(c.busy for c in pool.caches)


def test_a_pool_on_a_gpu_keeps_at_most_a_few_caches_and_elsewhere_as_many_as_the_budget_holds():
    """On a CUDA GPU each live cache carries its own captured graphs, whose memory a budget of bytes does not see:
    the default pool keeps at most GPU_CACHES there (the count the app kept before its budget)."""
    from specui.cache_pool import GPU_CACHES, default_size

    assert default_size(torch.device("cuda", 0)) == GPU_CACHES == 4
    assert default_size(torch.device("cpu")) is None
    pool = PromptCaches()
    pool.pick([1, 2, 3], make_model("llama", vocab_size=96, layers=1))
    assert pool.size is None and pool.budget > 0  # a CPU model: no count cap



def test_a_budget_of_ones_own_keeps_the_devices_count_cap(monkeypatch):
    """SPECUI_CONVERSATION_MEMORY set the budget, and with it the GPU's cap of four caches went (each with graphs
    the budget does not see); the cap follows the device whatever sets the budget. (No CUDA here: the device's
    answer is stood in for.)"""
    from specui import cache_pool

    monkeypatch.setattr(cache_pool, "default_size", lambda device: 2)
    model = make_model("llama", vocab_size=96, layers=1)
    for pool in (PromptCaches(budget=10**9), PromptCaches()):
        pool.pick([1, 2, 3], model)
        assert pool.size == 2
    assert PromptCaches(5, budget=10**9).size == 5  # a count given is kept


def test_a_visitors_new_chat_does_not_take_another_visitors_conversation(engine):
    """Every chat opens with the template's tokens: a visitor's first, short message shared more than half its prompt
    with another visitor's conversation, took that cache, and the other's next turn read its whole conversation
    again, though the budget had room for both."""
    template = [60, 61, 62, 63, 64, 65]  # a chat template's opening, the same in every conversation
    pool = PromptCaches()
    alice, _ = turn(engine, pool, template + [10, 11, 12, 13], owner="alice")
    alice, _ = turn(engine, pool, alice + [14, 15], owner="alice")
    bob, _ = turn(engine, pool, template + [20, 21], owner="bob")  # shares the template with alice's: 6 of 8
    assert len(pool.caches) == 2
    assert turn(engine, pool, alice + [16], owner="alice")[1] == 2  # alice's follow-up reads only its new tokens
    bob, read = turn(engine, pool, bob + [22], owner="bob")
    assert read == 2
    # one's own cache is taken for a shared prefix (a prompt edited and sent again), and anyone's whose whole
    # conversation the prompt goes on from (the same chat in another tab)
    assert turn(engine, pool, template + [10, 11, 90], owner="alice")[1] < len(template) + 3
    carol, read = turn(engine, pool, bob + [30], owner="carol")
    assert read <= 3 and len(pool.caches) == 2


def test_a_drafters_state_handed_to_a_run_still_counts_against_the_budget(engine):
    """A conversation's next turn hands the draft's kept cache to its run (`PromptCache.resume`): the pool stopped
    counting it while the run went on, though it still took memory, and a pick meanwhile kept other caches beyond the
    budget by that much."""
    pool = PromptCaches(budget=10**12)
    alice, _ = turn(engine, pool, opening(0))
    turn(engine, pool, opening(1))
    cache = pool.caches[1]
    handed, before = held_bytes(cache.drafter_state), cache.nbytes
    assert handed > 0 and cache.tokens[:5] == opening(0)
    pool.budget = pool.nbytes  # both conversations, the drafters' caches included, and no byte more
    ids = alice + [50]
    stream = engine.stream(ids, max_new_tokens=TOKENS, cache=pool.pick(ids, engine.target_model))
    next(stream)  # the run has alice's cache and its draft's
    assert cache.busy and cache.drafter_state is None and cache.nbytes >= before
    newcomer = opening(2)
    pool.pick(newcomer, engine.target_model)  # makes room for a third conversation while alice's turn runs
    held = sum(held_bytes(c.lm, c.drafter_state) for c in pool.caches) + handed  # what the memory really holds
    assert held + len(newcomer) * bytes_per_token(engine.target_model) <= pool.budget, "over the budget"
    list(stream)
    assert cache.nbytes == held_bytes(cache.lm, cache.drafter_state) > 0  # kept again, counted once


def nbytes_at_each_instruction(cache, method, run) -> list[int]:
    """`cache.nbytes` read before each instruction of `method` (a PromptCache method) that `run()` runs, as a pool's
    budget check on another thread may read it between any two of them (in free-threaded Python)."""
    seen = []

    def trace(frame, event, arg):
        if frame.f_code is not method.__code__:
            return None
        frame.f_trace_opcodes = True

        def step(frame, event, arg):
            if event == "opcode":
                seen.append(cache.nbytes)
            return step
        return step

    sys.settrace(trace)
    try:
        run()
    finally:
        sys.settrace(None)
    return seen


def test_a_drafters_state_is_counted_once_at_every_instruction_as_it_is_handed_over_and_back(engine):
    """`resume` hands the kept drafter state to the run (from `drafter_state` to `lent`), and `close` keeps one back:
    `drafter_state` was emptied one store before `lent` was set, and kept again one store before `lent` went to 0, so
    a reader between the two found the state's bytes counted nowhere (a pool then kept other caches beyond its budget
    by that much), or twice."""
    pool = PromptCaches(budget=10**12)
    alice, _ = turn(engine, pool, opening(0))
    cache = pool.caches[0]
    handed = held_bytes(cache.drafter_state)
    ids = alice + [50]
    stream = engine.stream(ids, max_new_tokens=TOKENS, cache=pool.pick(ids, engine.target_model))
    seen = nbytes_at_each_instruction(cache, PromptCache.resume, lambda: next(stream))
    assert handed > 0 and cache.lent == handed and cache.drafter_state is None  # handed over
    assert len(seen) > 5 and set(seen) == {seen[0]}, f"the bytes as resume runs: {seen}"
    rest = nbytes_at_each_instruction(cache, PromptCache.close, lambda: list(stream))
    assert cache.lent == 0 and cache.drafter_state is not None  # kept back
    assert len(rest) > 5 and set(rest) <= {rest[0], cache.nbytes}, f"the bytes as close runs: {rest}"
