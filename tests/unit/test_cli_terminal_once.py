"""`python -m specui` does each piece of work once: the preset is checked before its models load
(`check_before_loading`: folders, a GPU, the Hub asked for each Hub model) by `check_preset` alone, not again inside
`load_engine`, as the benchmark's preflight and `load_pair(checked=True)` do since the last session."""

from __future__ import annotations

import pytest

from tests.helpers import BUNDLED_TARGET


class Loading(Exception):
    """Raised where the load would read its first model: the test stops there, once every check has run."""


def count_checks(monkeypatch) -> list[str]:
    """The presets `check_before_loading` is asked about from now on, wrapped where each caller finds it (the real
    check still runs); the load stops at its first model (`Loading`)."""
    from specui import load_checks, loading

    checked, real = [], load_checks.check_before_loading
    for module in (load_checks, loading):  # check_preset's (it imports it as it runs), and load_pair's
        monkeypatch.setattr(module, "check_before_loading", lambda preset: checked.append(preset.name) or real(preset))

    def reading(ref, say):
        raise Loading

    monkeypatch.setattr(loading, "_folder", reading)
    return checked


@pytest.mark.skipif(not BUNDLED_TARGET.exists(), reason="the bundled pair is not in assets/")
def test_the_terminal_checks_the_preset_once_before_its_models_load(monkeypatch):
    from specui.terminal import load, parse_args

    checked = count_checks(monkeypatch)
    with pytest.raises(Loading):
        load(parse_args(["--preset", "bundled", "x"]))
    assert checked == ["bundled"]


@pytest.mark.skipif(not BUNDLED_TARGET.exists(), reason="the bundled pair is not in assets/")
def test_load_engine_still_checks_by_itself_and_again_when_moved(monkeypatch):
    """A script's `load_engine` checks the preset as before (checked=False); checked=True with device= checks again,
    since the device it moves to is what the check reads (a GPU asked for)."""
    from specui.loading import load_engine

    checked = count_checks(monkeypatch)
    with pytest.raises(Loading):
        load_engine("bundled")
    with pytest.raises(Loading):
        load_engine("bundled", checked=True)
    with pytest.raises(Loading):
        load_engine("bundled", checked=True, device="cpu")
    assert checked == ["bundled", "bundled"]


@pytest.mark.parametrize("checked", ["no", 0, None])
def test_load_engine_takes_checked_as_true_or_false_only(checked, monkeypatch):
    """checked="no" (or 0, None) is refused before anything loads, as warm_up's is: a truthy string skipped the
    checks it asked to keep."""
    from specui.loading import load_engine

    checks = count_checks(monkeypatch)
    with pytest.raises(TypeError, match=rf"^checked must be True or False, got {checked!r}$"):
        load_engine("bundled", checked=checked)
    assert checks == []
