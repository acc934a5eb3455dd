"""What the Teach tab's pickers and Next send the server, in a real browser over the tiny pair of test_browser_teaching:
a tree round picked while the last pick is answered (its answer held on the server here until the second pick is
made) is answered after it, the tree and its steps ending on the round the list names (the pick was dropped: the
list named one round, the steps showed another); Next with a run on show only steps it (it also queued a no-op
decode in the engine's queue, behind every visitor's runs, and a redraw after it)."""

from __future__ import annotations

import pytest

from specui.ui import teach_tree
from tools.screenshot import set_number
from tests.app.teach_page import PROMPT, decode_lesson, teach_page, wait_round
from tests.app.teach_page.test_browser_teach_order import held_first
from tests.gradio_calls import wait_quiet
from tests.helpers import click_and_wait

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # drives Chromium on the served app

TREE_STEP = "#tree-step-view .teach-tree-step"


@pytest.fixture(scope="module")
def page(app, browser):
    with teach_page(browser, app[1]) as page:
        yield page


def pick_round(page, label: str) -> None:
    """Pick the option `label` in the tree panel's Round list, the focus off it after (a click on the list with the
    focus in it does not open it)."""
    page.click("#tree-step-round input")
    page.locator("[role=option]", has_text=label).first.click()
    page.locator("#tree-step-status").click()


def test_a_round_picked_while_the_last_pick_is_answered_is_the_round_shown(page, monkeypatch):
    page.fill("#teach-prompt textarea", PROMPT)
    set_number(page, "teach-k", 4)  # trees four deep
    set_number(page, "teach-max-new-tokens", 32)
    page.locator("#teach-tree").get_by_text("Token trees: a tree round, node by node").click()
    click_and_wait(page, "#tree-step-start", "#tree-step-status")
    page.wait_for_selector(f"{TREE_STEP}[data-step='1']", timeout=30_000)
    page.click("#tree-step-round input")
    labels = page.locator("[role=option]").all_inner_texts()
    page.locator("#tree-step-status").click()
    assert len(labels) >= 3, labels
    wait_quiet(page)
    first, last = labels[1], labels[-1]
    held, go = held_first(monkeypatch, "render_tree_step", module=teach_tree)  # the first pick's answer held
    pick_round(page, first)
    try:
        assert held.wait(60), "the pick never reached the server"
        pick_round(page, last)  # while the first pick is answered
    finally:
        go.set()
    wait_quiet(page)
    picked = page.locator("#tree-step-round input").input_value()
    assert picked == last
    shown = page.locator(TREE_STEP).get_attribute("data-round")
    assert last.startswith(f"round {shown} ·"), (shown, picked)



def test_next_with_a_run_on_show_only_steps_it(page):
    decode_lesson(page, PROMPT, new_tokens=16)
    page.locator("#step-status").click()  # the focus off the prompt box
    wait_quiet(page)
    joins = []
    page.on("request", lambda r: joins.append(r.url) if "/queue/join" in r.url or "/run/predict" in r.url else None)
    page.click("#step-next")
    wait_round(page, 2)
    wait_quiet(page)
    assert len(joins) == 1, joins  # the stepping event, not a decode's no-op in the engine's queue and a redraw
