"""Loads take turns in a process (`specui.loading._LOADS`): a Ctrl-C just after a load took its turn gives the turn
back (it kept it for good: every later load, the app's preset switches included, waited forever); and a preset
switch through `PairCache` checks the preset once (`check_before_loading`, which may ask the Hub), not twice."""

from __future__ import annotations

import sys
import threading
import time

import pytest

from specui import loading
from specui.loading import PairCache
from tests.engine.test_loading import hub  # noqa: F401 (the fixture: local folders of tiny models)


def test_a_preset_switch_checks_the_preset_once(hub, monkeypatch):  # noqa: F811
    checked = []
    check = loading.check_before_loading
    monkeypatch.setattr(loading, "check_before_loading", lambda preset: checked.append(preset.name) or check(preset))
    cache = PairCache(capacity=1)
    cache.get(hub.get("llama"))
    assert checked == ["llama"]
    cache.get(hub.get("gpt2"))  # a switch: the loaded pair goes first, once the new preset passed its check
    assert checked == ["llama", "gpt2"]


def test_a_ctrl_c_just_after_a_load_took_its_turn_gives_the_turn_back(hub):  # noqa: F811
    """The interrupt is raised by a trace function at the first line `load_pair` runs while holding the turn, as a
    signal handler raises it between two statements."""

    def press(frame, event, arg):
        if frame.f_code is not loading.load_pair.__code__:
            return None

        def line(frame, event, arg):
            if event == "line" and loading._LOADS.locked():
                raise KeyboardInterrupt("just after the load took its turn")
            return line
        return line

    sys.settrace(press)
    try:
        with pytest.raises(KeyboardInterrupt):
            loading.load_pair(hub.get("llama"))
    finally:
        sys.settrace(None)
        kept = loading._LOADS.locked()
        if kept:
            loading._LOADS.release()  # for the tests after this one
    assert not kept, "the Ctrl-C kept the process's load turn: every later load waits forever"
    assert loading.load_pair(hub.get("llama")).target is not None


def test_a_load_waiting_behind_another_through_the_pair_cache_says_so(hub):  # noqa: F811
    """The app loads through one `PairCache` (a visitor's preset, the startup preload), whose own lock makes a second
    load wait before `load_pair`: that wait said nothing (the progress box stayed empty until the first load ended)."""
    cache = PairCache(capacity=2)
    paused, go = threading.Event(), threading.Event()

    def first_progress(line):  # the first load pauses at its first line, holding its turn
        paused.set()
        go.wait(30)

    first = threading.Thread(target=cache.get, args=(hub.get("llama"),), kwargs={"progress": first_progress})
    first.start()
    lines: list[str] = []
    second = threading.Thread(target=cache.get, args=(hub.get("qwen2"),), kwargs={"progress": lines.append})
    try:
        assert paused.wait(30)
        second.start()
        deadline = time.monotonic() + 5
        while not lines and time.monotonic() < deadline:
            time.sleep(0.05)
        waiting = list(lines)
    finally:
        go.set()
        first.join(60)
        if second.ident:
            second.join(60)
    assert waiting == ["Waiting for another model's load to finish"], waiting
    assert lines[-1] == "Ready"  # then it loaded
