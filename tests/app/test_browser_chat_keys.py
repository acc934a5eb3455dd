"""A real browser on the served app, on the Chat tab with the keyboard: after a click on Send the focus is back in the
prompt box, so the next message is typed at once (it stayed on the button), and Escape in the box stops the reply being
written, as Stop does."""

from __future__ import annotations

import pytest

from tests.helpers import require_browser, served_app, ui_config
from tools.screenshot import FINISHED, launch_chromium, open_page, set_number

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # drives Chromium on the served app

FOCUSED_BOX = "() => document.activeElement === document.querySelector('#prompt textarea')"


@pytest.fixture(scope="module")
def page():
    require_browser()
    from playwright.sync_api import sync_playwright

    with served_app(ui_config()) as url, sync_playwright() as p:
        browser = launch_chromium(p)
        yield open_page(browser, url)
        browser.close()


def test_after_a_click_on_send_the_focus_is_back_in_the_prompt_box(page):
    set_number(page, "max-new-tokens", 8)
    page.fill("#prompt textarea", "import os")
    page.click("#send")
    page.wait_for_function(FOCUSED_BOX, timeout=5_000)
    page.wait_for_function(FINISHED, timeout=120_000)
    page.keyboard.type("import re")  # typed straight into the box
    assert page.input_value("#prompt textarea").endswith("import re")


def test_escape_in_the_prompt_box_stops_the_reply(page):
    set_number(page, "max-new-tokens", 512)
    set_number(page, "num-draft-tokens", 1)
    page.click("#compare input")  # a speculative run and then a plain one: a long run to stop
    page.fill("#prompt textarea", "class Stack:")
    page.press("#prompt textarea", "Shift+Enter")
    # Escape, pressed in the box, from inside the page as soon as the reply streams (the run may be done a second later)
    page.wait_for_function("""() => { if (!document.querySelector('#chat .specui-caret')) return false;
        document.querySelector('#prompt textarea').dispatchEvent(
            new KeyboardEvent('keydown', {key: 'Escape', bubbles: true, cancelable: true}));
        return true; }""", timeout=120_000)
    try:
        page.wait_for_function("() => document.querySelector('#stats').innerText.includes('Stopped')", timeout=30_000)
    except Exception as e:
        raise AssertionError(f"Escape did not stop the run: stats {page.locator('#stats').inner_text()!r}") from e
    assert "stopped" in page.locator("#chat .specui-out").last.inner_text()
    page.click("#compare input")
    page.wait_for_function(FINISHED, timeout=120_000)  # the stopped run's event answered: the page free for what next
