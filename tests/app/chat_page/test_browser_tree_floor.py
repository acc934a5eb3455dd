"""The Chat tab's confidence stop at Tree width 2 or more, in Chromium: the slider's ↺ (and Escape on it) put back
the chain's floor (the chat preset's EAGLE 0.6) where a tree takes none (keys.js reads the width, preset_view
.tell_resets gives a tree's values), and Tree width's own ↺, which gradio answers with a change and no input, left
the slider at a tree's 0 on a chain (preset_view.follow_chat: the width's change moves it, not its input)."""

from __future__ import annotations

import pytest

from tests.app.test_browser_tab_order import _choose, _reset, _slider
from tools.screenshot import set_number

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # drives Chromium on the served app


def test_the_confidence_stops_reset_gives_a_trees_floor_and_the_widths_reset_a_chains(fresh_page):
    page = fresh_page
    page.wait_for_function("() => window.specuiPresetValues", timeout=30_000)  # tell_resets' values are there
    _choose(page, "preset", "smollm2-chat", then={"draft-confidence": 0.6})  # EAGLE's floor on a chain
    set_number(page, "tree-width", 3)
    page.wait_for_function(f"() => ({_slider('draft-confidence')})() === '0 0'", timeout=30_000)  # a tree's: none
    _reset(page, "draft-confidence", moved=0.3, back="0", how="click")  # was 0.6, the chain's
    page.click("#tree-width .reset-button")  # back to 1: a chain again
    page.wait_for_function(f"() => ({_slider('tree-width')})() === '1 1'", timeout=10_000)
    try:
        page.wait_for_function(f"() => ({_slider('draft-confidence')})() === '0.6 0.6'", timeout=30_000)
    except Exception as e:  # playwright's timeout: say what it shows
        raise AssertionError(f"the width's ↺ left {page.evaluate(_slider('draft-confidence'))!r}, not 0.6") from e
