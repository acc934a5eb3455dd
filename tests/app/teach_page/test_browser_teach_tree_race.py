"""Decode with a tree in the Teach tab's token-tree stepper, in a real browser over the tiny pair of
test_browser_teaching, its answer held on the server after it moved the step shown (`held_answer`): Decode with a tree
clicked again meanwhile (a wider tree) decodes again after it (gradio's default, "once", dropped the click: the trees
were the first settings'), and steps pressed meanwhile, their answers landing first, are the step the panel ends on
(the Decode's answer, its first step, landed over them while the server held the later step)."""

from __future__ import annotations

import pytest

from specui.ui import teach_keys
from tools.screenshot import set_number
from tests.app.teach_page import PROMPT, teach_page
from tests.app.teach_page.test_browser_teach_decode_again import busy, click_again_while_held
from tests.app.teach_page.test_browser_teach_order import click, held_answer
from tests.gradio_calls import wait_quiet

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # drives Chromium on the served app

STEP = "() => document.querySelector('#tree-step-view .teach-tree-step')?.dataset.step ?? null"
BUSY = busy("#tree-step-status")


@pytest.fixture(scope="module")
def page(app, browser):
    with teach_page(browser, app[1]) as page:
        page.fill("#teach-prompt textarea", PROMPT)
        set_number(page, "teach-k", 4)  # trees four deep
        set_number(page, "teach-max-new-tokens", 16)
        page.locator("#teach-tree").get_by_text("Token trees: a tree round, node by node").click()
        yield page


def status(page) -> str:
    return page.locator("#tree-step-status").inner_text()


def test_decode_with_a_tree_clicked_while_one_is_answered_decodes_again_after_it(page, monkeypatch):
    set_number(page, "tree-step-width", 2)
    held, go = held_answer(monkeypatch, "moving", module=teach_keys)  # the first Decode's answer held
    click_again_while_held(page, held, go, "#tree-step-start", "#tree-step-status", says="width 3",
                           change=lambda: set_number(page, "tree-step-width", 3))
    wait_quiet(page)
    assert page.evaluate(STEP) == "1"


def test_steps_pressed_as_decode_with_a_tree_answers_are_the_step_it_ends_on(page, monkeypatch):
    wait_quiet(page)
    held, go = held_answer(monkeypatch, "moving", module=teach_keys)  # Decode's answer held after its move
    page.click("#tree-step-start")
    try:
        assert held.wait(120), "Decode with a tree never reached its answer"
        click(page, "tree-step-next", "tree-step-next")  # the new tree's steps 2 and 3 on the server
        page.wait_for_function(f"() => ({STEP})() === '3'", timeout=30_000)
    finally:
        go.set()  # Decode's answer, drawn for step 1, lands after the steps'
    page.wait_for_function(f"() => !({BUSY})()", timeout=60_000)
    wait_quiet(page)
    assert page.evaluate(STEP) == "3", status(page)
    click(page, "tree-step-prev")  # the server on step 3 too: Previous shows 2
    page.wait_for_function(f"() => ({STEP})() === '2'", timeout=30_000)
