"""A closed tab's conversation caches leave the app's pool (`PromptCaches.forget`, called by the page's unload
through `Showcase.forget`), its run's cache as that run ends; the API's and other visitors' stay. Real tiny models
and their real caches; the served app in a real browser: tests/app/test_leak_closed_tab.py."""

from __future__ import annotations

import pytest

from specui import SpeculativeEngine
from specui.cache_pool import PromptCaches
from tests.helpers import make_model, noisy_copy

TOKENS = 6


@pytest.fixture(scope="module")
def engine():
    target = make_model("llama", vocab_size=96, layers=3, seed=7)
    return SpeculativeEngine(target, noisy_copy(target, noise=0.3, seed=1))


def turn(engine, pool, ids, owner=None):
    return ids + engine.generate(ids, max_new_tokens=TOKENS, cache=pool.pick(ids, engine.target_model,
                                                                              owner=owner)).token_ids


def test_a_gone_owners_caches_leave_the_pool_and_others_stay(engine):
    pool = PromptCaches()
    turn(engine, pool, [1, 2, 40, 41], owner="gone")
    turn(engine, pool, [3, 4, 50, 51, 52, 53, 54, 55], owner="gone")  # a second conversation of the same tab
    turn(engine, pool, [5, 6, 60, 61], owner="staying")
    turn(engine, pool, [7, 8, 70, 71])  # the API's (no owner)
    assert sorted(map(str, (c.owner for c in pool.caches))) == ["None", "gone", "gone", "staying"]
    gone = [c for c in pool.caches if c.owner == "gone"]
    assert pool.forget("gone") == 2
    assert sorted(map(str, (c.owner for c in pool.caches))) == ["None", "staying"]
    assert all(c.nbytes == 0 for c in gone)  # their memory went with them


def test_the_cache_of_a_run_in_flight_as_its_tab_closes_goes_when_the_run_ends(engine):
    pool = PromptCaches()
    ids = [1, 2, 40, 41]
    held = pool.pick(ids, engine.target_model, owner="gone")
    stream = engine.stream(ids, max_new_tokens=TOKENS, cache=held)
    next(stream)  # the run holds the cache now
    assert pool.forget("gone") == 1 and held not in pool.caches
    for _ in stream:  # the run ends: its cache does not come back
        pass
    assert pool.caches == []
    turn(engine, pool, ids, owner="other")
    assert [c.owner for c in pool.caches] == ["other"]
