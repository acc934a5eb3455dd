"""The Chat tab's preset menu and Tree width moved at once, in Chromium: the confidence slider ends at the floor the
last preset and width give, whichever answer the server would have sent first. The page's first call for them is held
on its way (playwright's route) while the second control moves, then let go: as separate events, the second's answer
landed first and the held one, computed with the other control's old value, left the slider at a stale floor; as one
event (`preset_view.follow_chat`, always_last) the page sends the second call after the first has landed, with the
values by then. Holding the call makes the crossing certain, not a matter of a loaded machine's timing. Also: a drafter
clicked while the width's call is held is taken (no progress covers the radio), and what the controls followed
outlives the session's State values (the page holds it)."""

from __future__ import annotations

import json

import pytest

from tests.app.test_browser_tab_order import _choose, _slider
from tests.gradio_calls import SERVED, wait_quiet
from tests.helpers import open_page
from tools.screenshot import set_number

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # drives Chromium on the served app


@pytest.fixture
def page(site):
    page = open_page(*site, tracked=True, viewport={"width": 1400, "height": 1000})
    page.wait_for_function("() => window.specuiPresetValues", timeout=30_000)
    wait_quiet(page)
    yield page
    page.context.close()


def _hold_next(page, url: str) -> list:
    """Hold the page's next call of an event that follows the preset menu, the drafter or Tree width (its answer
    waits until the list's route is continued); the page's other calls go."""
    demo = SERVED[url]
    ids = {c._id for c in demo.blocks.values() if getattr(c, "elem_id", None) in ("preset", "drafter", "tree-width")}
    followers = {i for i, f in demo.fns.items() if f.fn and any(t[0] in ids for t in f.targets)}
    held = []

    def route(r):
        try:
            fn = json.loads(r.request.post_data or "{}").get("fn_index")
        except ValueError:
            fn = None
        if not held and fn in followers:
            held.append(r)
        else:
            r.continue_()

    page.route("**/run/predict*", route)
    return held


def _let_go(page, held: list) -> None:
    """Once every other call has answered (a second control's answer, where it was sent), let the held one go."""
    for _ in range(300):  # until the held call is the page's only one open, for half a second
        if len(page.calls["open"]) <= 1 and held:
            page.wait_for_timeout(500)
            if len(page.calls["open"]) <= 1:
                break
        page.wait_for_timeout(100)
    assert held, "no call of the preset's or the width's event was sent"
    held[0].continue_()
    page.unroute("**/run/predict*")
    wait_quiet(page)


def _shows(page, elem_id: str) -> str:
    return page.evaluate(_slider(elem_id))


def test_a_preset_picked_as_the_width_moves_to_a_tree_leaves_a_trees_floor(page, site):
    _choose(page, "preset", "smollm2-chat", then={"draft-confidence": 0.6})  # EAGLE's floor on a chain
    wait_quiet(page)
    held = _hold_next(page, site[1])
    page.click("#preset input")
    page.get_by_role("option", name="smollm2-chat-hub", exact=True).click()  # its answer held: 0.6, at width 1
    set_number(page, "tree-width", 2)  # a tree now: 0
    _let_go(page, held)
    assert (_shows(page, "tree-width"), _shows(page, "draft-confidence")) == ("2 2", "0 0")


def test_a_width_moved_to_a_chain_as_a_preset_is_picked_leaves_the_new_presets_floor(page, site):
    _choose(page, "preset", "smollm2-chat", then={"draft-confidence": 0.6})
    set_number(page, "tree-width", 2)
    page.wait_for_function(f"() => ({_slider('draft-confidence')})() === '0 0'", timeout=30_000)  # a tree's
    wait_quiet(page)
    held = _hold_next(page, site[1])
    set_number(page, "tree-width", 1)  # its answer held: smollm2-chat's chain floor, 0.6
    page.click("#preset input")
    page.get_by_role("option", name="bundled", exact=True).click()  # bundled's: 0
    _let_go(page, held)
    assert (_shows(page, "tree-width"), _shows(page, "draft-confidence")) == ("1 1", "0 0")
    assert page.locator("#drafter input:checked").get_attribute("value") == "draft model"


def test_a_drafter_clicked_while_the_widths_answer_is_on_its_way_is_taken(page, site):
    """The one event's outputs are the drafter radio, K, the slider and the preset's line; with gradio's progress
    shown, a width moved covered them all with a spinner until its answer landed, and a drafter clicked then hit the
    spinner and was lost (it timed out here). The click is taken now, and its call goes after the width's answer."""
    _choose(page, "preset", "smollm2-chat", then={"draft-confidence": 0.6})  # EAGLE, K 6
    wait_quiet(page)
    held = _hold_next(page, site[1])
    set_number(page, "tree-width", 2)  # its answer held
    page.locator("#drafter").get_by_label("draft model", exact=True).check(timeout=10_000)
    _let_go(page, held)
    assert page.locator("#drafter input:checked").get_attribute("value") == "draft model"
    assert (_shows(page, "num-draft-tokens"), _shows(page, "draft-confidence")) == ("6 6", "0 0")  # a tree's none


def test_a_width_moved_after_the_sessions_state_expired_leaves_the_chosen_drafter_and_k(page, site):
    """What the controls last followed was a `gr.State`, which gradio deletes with the session's other State values
    (an hour after the tab was seen closed: a laptop asleep) while the page keeps its controls: a width moved then
    read the page's preset as a new pick and put back its drafter and K (EAGLE, 6) over the user's draft model at K 3.
    The page holds it now, as long as the controls' own values."""
    _choose(page, "preset", "smollm2-chat", then={"draft-confidence": 0.6})
    page.locator("#drafter").get_by_label("draft model", exact=True).check()
    page.wait_for_function(f"() => ({_slider('draft-confidence')})() === '0.5 0.5'", timeout=30_000)  # its own
    set_number(page, "num-draft-tokens", 3)
    wait_quiet(page)
    holder, sessions = SERVED[site[1]].state_holder, page.calls["sessions"]
    assert sessions
    for session in sessions:
        holder.delete_state(session)  # as gradio's expiry of a closed session's State values does
    set_number(page, "tree-width", 2)
    wait_quiet(page)
    assert page.locator("#drafter input:checked").get_attribute("value") == "draft model"
    assert (_shows(page, "num-draft-tokens"), _shows(page, "draft-confidence")) == ("3 3", "0 0")
