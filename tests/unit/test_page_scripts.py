"""The page's scripts (specui/ui/*.js, run in order by blocks.JS) share one watcher of the page, watch.js: each of
keys.js, charts.js, frames.js and address.js had a MutationObserver of its own, each called on every change."""

from __future__ import annotations

from pathlib import Path

from specui.ui.blocks import JS

SCRIPTS = sorted(Path(__file__).parents[2].joinpath("specui", "ui").glob("*.js"))


def test_only_watch_js_observes_the_page_and_runs_first():
    observers = [script.name for script in SCRIPTS if "new MutationObserver" in script.read_text(encoding="utf-8")]
    assert observers == ["watch.js"], observers
    watch = next(script for script in SCRIPTS if script.name == "watch.js").read_text(encoding="utf-8").strip()
    assert JS.index(watch) <= JS.index("specuiWatch("), "a script asks for the watcher before watch.js has made it"
