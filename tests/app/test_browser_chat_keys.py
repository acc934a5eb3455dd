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


# the page's toast messages as they come and go (gradio shows those of one kind, an error or a warning, in one toast,
# each message 10 s unless closed), and the clicks of Send and of a toast's ×, in order
TOAST_LOG = """() => { window.__toasts = []; window.__clicks = [];
    window.addEventListener('click', (e) => { const hit = e.target.closest('#send, .toast-close');
        if (hit) window.__clicks.push(hit.id || 'close'); }, true);
    new MutationObserver(() => {
        for (const t of document.querySelectorAll('.toast-message-item'))
            if (!window.__toasts.some(s => s.node === t)) window.__toasts.push({node: t, text: t.innerText});
    }).observe(document.body, {childList: true, subtree: true}); }"""
SHOWN = "() => window.__toasts.map(s => s.node.isConnected)"


def test_a_refusals_toast_goes_when_the_next_run_is_asked_for(page):
    """"Type a prompt first." stayed on screen its 10 s while the next message's reply streamed: toasts.js closes the
    toasts shown once a run is asked for again (Send, Shift+Enter), and the same refusal twice is one message on
    screen, not two stacked."""
    set_number(page, "max-new-tokens", 8)
    page.evaluate(TOAST_LOG)
    page.fill("#prompt textarea", "  ")
    page.click("#send")
    page.wait_for_function(f"() => ({SHOWN})().join() === 'true'", timeout=30_000)
    page.press("#prompt textarea", "Shift+Enter")  # refused again: the first message goes, the second shows alone
    page.wait_for_function(f"() => ({SHOWN})().join() === 'false,true'", timeout=30_000)
    page.evaluate("() => { window.__clicks = []; }")
    page.fill("#prompt textarea", "import os")
    page.click("#send")  # the run starts: the refusal's toast goes as Send is clicked (a × clicked within the click)
    clicks = page.wait_for_function("() => window.__clicks.length >= 2 && window.__clicks", timeout=10_000)
    assert clicks.json_value() == ["send", "close"]
    page.wait_for_function(f"() => ({SHOWN})().join() === 'false,false'", timeout=30_000)
    page.wait_for_function(FINISHED, timeout=120_000)
    assert [t.count("Type a prompt first.") for t in page.evaluate("() => window.__toasts.map(s => s.text)")] == [1, 1]
    assert page.locator("#chat .specui-prompt").last.inner_text().strip() == "import os"
