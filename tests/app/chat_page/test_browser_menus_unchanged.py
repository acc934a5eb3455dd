"""Dropdowns left unchanged, in a real browser: a Tab through a list calls the server for nothing.

Gradio 6's Dropdown fires `input` whenever the focus leaves it, its value unchanged (and twice for a pick by the
mouse); `select` only for a pick by the mouse, never for the keyboard's (arrows, then Enter). The Teach tab's second
drafter, its tree round and the Chat tab's tree round follow `change`: a pick by the mouse or the keyboard, and a value
the server sets, which their answers take as the no-op it is. A Tab through the second drafter's list ran its
comparison's answer again (with none chosen: its model work, one ZeroGPU call), and one through the tree round's list
put the round's steps back to step 1. On the folder's served app (chat_page's `site`), one page of its own.
"""

from __future__ import annotations

import pytest

from tests.gradio_calls import requests_during, wait_quiet
from tests.helpers import open_page
from tests.waits import click_and_wait
from tools.screenshot import set_number

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # drives Chromium on the served app

PROMPT = "def main(argv):\n    "
TREE_STEP = "#tree-step-view .teach-tree-step"


@pytest.fixture(scope="module")
def page(site):
    """This file's own page on the folder's server (its gradio calls tracked; the folder's `page` has none): its tests
    go on on it in turn (the Teach tab's tree test decodes the prompt the second drafter's test typed)."""
    page = open_page(*site, tracked=True, viewport={"width": 1400, "height": 1000})
    wait_quiet(page)
    yield page
    page.context.close()


def _calls_during(page, act) -> list[str]:
    """The gradio calls the page makes while `act()` runs and until every one has answered (none: nothing sent)."""
    return [request.url for request in requests_during(page, act)]


def _tab_through(page, menu: str):
    def act():
        page.locator(f"#{menu} input").focus()
        page.keyboard.press("Tab")
    return act


def _pick_by_keys(page, menu: str) -> None:
    """The option after the one chosen in #`menu`, picked by the keyboard: ArrowDown, then Enter."""
    page.locator(f"#{menu} input").focus()
    page.keyboard.press("ArrowDown")
    page.keyboard.press("Enter")


def test_the_chat_tabs_tree_round_list_tabbed_through_calls_nothing(page):
    page.locator("#tree-view").get_by_text("Token trees: a tree round, node by node").click()
    page.locator("#tree-round input").wait_for(state="visible")
    assert _calls_during(page, _tab_through(page, "tree-round")) == []


def test_the_second_drafter_tabbed_through_compares_nothing_and_the_keys_pick_one(page, monkeypatch):
    from specui.ui import teach_compare

    compared = []  # every comparison the server computes (with none chosen too: what the view shows then)
    real = teach_compare.run_comparison
    monkeypatch.setattr(teach_compare, "run_comparison", lambda *a: compared.append(a[2]["second"]) or real(*a))
    page.get_by_role("tab", name="Teach").click()
    page.locator("#step-start").wait_for(state="visible")
    page.fill("#teach-prompt textarea", PROMPT)
    set_number(page, "teach-k", 2)
    set_number(page, "teach-max-new-tokens", 8)
    click_and_wait(page, "#step-start", "#step-status")
    page.wait_for_selector("#step-view .teach-step[data-round='1']", timeout=60_000)
    assert page.locator("#teach-second input").input_value() == "none" and compared == ["none"]  # Decode's
    calls = _calls_during(page, _tab_through(page, "teach-second"))
    assert (len(calls), compared) == (0, ["none"]), calls  # the comparison's answer for none ran again
    _pick_by_keys(page, "teach-second")
    page.wait_for_selector("#compare-view .teach-compare[data-round='1']", timeout=60_000)
    wait_quiet(page)
    second = page.locator("#teach-second input").input_value()
    assert second != "none" and compared == ["none", second]  # once: a pick by the mouse sent two inputs
    calls = _calls_during(page, _tab_through(page, "teach-second"))
    assert (len(calls), compared) == (0, ["none", second]), calls


def test_the_teach_tree_round_tabbed_through_keeps_its_step_and_the_keys_pick_another(page):
    page.locator("#teach-tree").get_by_text("Token trees: a tree round, node by node").click()
    set_number(page, "teach-max-new-tokens", 16)  # tree rounds enough to pick another
    click_and_wait(page, "#tree-step-start", "#tree-step-status")
    page.wait_for_selector(f"{TREE_STEP}[data-step='1']", timeout=60_000)
    wait_quiet(page)
    round_shown = page.locator(TREE_STEP).get_attribute("data-round")
    page.click("#tree-step-next")
    page.wait_for_selector(f"{TREE_STEP}[data-step='2']", timeout=30_000)
    calls = _calls_during(page, _tab_through(page, "tree-step-round"))
    assert (len(calls), page.locator(TREE_STEP).get_attribute("data-step")) == (0, "2"), calls  # back to step 1
    picked = page.locator("#tree-step-round input").input_value()
    _pick_by_keys(page, "tree-step-round")
    page.wait_for_function(f"() => document.querySelector('#tree-step-round input').value !== {picked!r}")
    wait_quiet(page)
    now = page.locator("#tree-step-round input").input_value()
    shown = page.locator(TREE_STEP)
    assert now.startswith(f"round {shown.get_attribute('data-round')} ·") and shown.get_attribute("data-round") != \
        round_shown and shown.get_attribute("data-step") == "1", (now, round_shown)


def test_the_teach_preset_picked_by_the_keys_brings_its_k(page):
    """Teach's preset menu followed `select` (123c8c8: its `input` put the drafter back as the focus left it), which
    gradio 6 fires for a pick by the mouse alone: picked with ArrowDown and Enter, the preset's K never came. It
    follows `input` again, the list left as it came taken as no pick (teach_keys.on_pick)."""
    page.get_by_role("tab", name="Teach").click()
    page.locator("#teach-preset input").wait_for(state="visible")
    assert page.locator("#teach-preset input").input_value() == "bundled"
    _pick_by_keys(page, "teach-preset")  # the next one: smollm2-1.7b-cpu, at K 4
    page.wait_for_function("() => document.querySelector('#teach-preset input').value === 'smollm2-1.7b-cpu'")
    wait_quiet(page)
    assert page.locator("#teach-k input[type=number]").input_value() == "4"
