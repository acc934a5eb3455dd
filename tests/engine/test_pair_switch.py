"""Choosing another preset in the app (`PairCache`, one pair kept): the pair it replaces goes before the new one
loads, so a large pair has the memory to itself as README promises; it went only after the new pair had loaded,
both in memory at once at the switch (two 7B pairs where one fits: out of memory). Real pairs, real loads."""

from __future__ import annotations

import dataclasses
import gc
import weakref

import pytest

from specui.loading import PairCache
from tests.helpers import ui_config

pytestmark = pytest.mark.slow  # loads real pairs


def test_the_pair_a_switch_replaces_is_gone_before_the_new_one_loads():
    first = ui_config().get("bundled")
    second = dataclasses.replace(first, name="bundled-again")  # the same models under another name: another load
    cache = PairCache()
    old = weakref.ref(cache.get(first).target)
    gc.collect()
    alive_during_load = []
    cache.get(second, progress=lambda line: alive_during_load.append(old() is not None))
    assert alive_during_load and not any(alive_during_load), "the replaced pair was still held while the new loaded"
    assert cache.get(second) is cache.get(second)  # kept: no second load


def test_a_pair_kept_is_not_let_go_by_asking_for_it_again():
    preset = ui_config().get("bundled")
    cache = PairCache()
    pair = cache.get(preset)
    assert cache.get(preset) is pair
