"""Decode clicked again while a decode runs, in a real browser over the tiny pair of test_browser_teaching: a teacher
who changes New tokens mid-run and clicks Decode again gets a run with the new settings once the first ends. Gradio's
default for a click ("once") dropped that click while the first run was pending, and the rounds shown were the
first run's, with no word."""

from __future__ import annotations

import json

import pytest

from tests.app.teach_page.test_browser_teach_order import held_first
from tests.helpers import open_page
from tools.screenshot import set_number

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # drives Chromium on the served app

PROMPT = "".join(f"def add{i}(a, b):\n    return a + b\n\n" for i in range(6)) + "def add(a, b):\n"


@pytest.fixture(scope="module")
def page(site, browser):
    page = open_page(browser, site[1] + "?tab=teach", ready="#step-start")
    yield page
    page.context.close()


def busy(status: str) -> str:
    """Whether the output `status` shows gradio's progress (its event not answered yet), as a page's function."""
    return f"() => !!document.querySelector({json.dumps(status)}).querySelector('.pending, .progress-text')"


def click_again_while_held(page, held, go, button: str, status: str, *, change, says: str) -> None:
    """Click `button`, then (`change()` made first) again while the first click's answer is held on the server (`held`,
    `go`: test_browser_teach_order's held_first or held_answer); then wait until `status` says `says`, done."""
    page.click(button)
    try:
        assert held.wait(120), f"the first click of {button} never reached its answer"
        change()
        pending = page.evaluate(f"() => {{ const busy = ({busy(status)})(); document.querySelector('{button}').click();"
                                " return busy; }")
    finally:
        go.set()  # the first click answers now, the second made while it was held
    assert pending, "the page showed the first click answered while its answer was held: nothing checked"
    try:
        page.wait_for_function(f"() => document.querySelector({json.dumps(status)}).innerText.includes("
                               f"{json.dumps(says)}) && !({busy(status)})()", timeout=90_000)
    except Exception as e:
        raise AssertionError(f"status: {page.locator(status).inner_text()!r}") from e


def test_decode_clicked_while_one_runs_decodes_the_new_settings_after_it(page, monkeypatch):
    held, go = held_first(monkeypatch, "exported")  # Decode's last step: the first run's answer held
    page.fill("#teach-prompt textarea", PROMPT)
    set_number(page, "teach-k", 1)
    set_number(page, "teach-temperature", 0)
    set_number(page, "teach-max-new-tokens", 128)
    click_again_while_held(page, held, go, "#step-start", "#step-status", says="Decoded 16 tokens",
                           change=lambda: set_number(page, "teach-max-new-tokens", 16))
    assert page.locator("#step-view .teach-step").get_attribute("data-round") == "1"
