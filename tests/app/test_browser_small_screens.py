"""A real browser on the served app as a phone shows it (390 × 844, a touch screen): every control a finger can hit,
44 px tall (Gradio draws the tabs at 32 px, a slider's number box and its ↺ at 22, a check box's line at 20, a reply's
↻ ↶ at 18), and nothing wider than the page, in the Chat tab after a run and in the Teach tab."""

from __future__ import annotations

import pytest

from tests.helpers import require_browser, served_app, ui_config
from tools.screenshot import launch_chromium, run_prompt, set_number

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # drives Chromium on the served app

PHONE = dict(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)

# every control shown in the app (a check box or a radio button by its label, the whole line a finger touches; not
# plotly's own tool bar, nor Gradio's 1 px copies of the tabs that measure the tab bar) under 40 px tall
SMALL_CONTROLS = """() => [...document.querySelectorAll(
    '.contain :is(button, input, textarea, select, a[href], [role=tab], label:has(> input))')].filter(e => {
  const r = e.getBoundingClientRect();
  return r.height > 1 && r.width > 1 && e.checkVisibility() && !e.closest('.modebar')
    && !e.matches('label > input[type=checkbox], label > input[type=radio]') && r.height < 40;
}).map(e => `${e.tagName} ${e.getAttribute('aria-label') || e.textContent.trim().slice(0, 40)}: \
${Math.round(e.getBoundingClientRect().height)} px`)"""


def test_every_control_is_a_fingers_size_on_a_phone_and_nothing_is_wider_than_the_page():
    require_browser()
    from playwright.sync_api import sync_playwright

    with served_app(ui_config()) as url, sync_playwright() as p:
        browser = launch_chromium(p)
        page = browser.new_context(**PHONE).new_page()
        page.goto(url)
        page.wait_for_selector("#prompt textarea", timeout=60_000)
        try:
            assert page.evaluate("() => matchMedia('(pointer: coarse)').matches")  # a touch screen, as a phone's
            set_number(page, "max-new-tokens", 16)
            run_prompt(page, "import os\n")  # a reply: its Copy reply, ↻ and ↶, the chat's corner buttons
            assert page.locator("#chat .specui-copy").count() >= 1
            assert page.evaluate(SMALL_CONTROLS) == []
            assert page.evaluate("() => document.documentElement.scrollWidth") <= 390
            page.get_by_role("tab", name="Teach").click()
            page.wait_for_selector("#step-start", state="visible")
            assert page.evaluate(SMALL_CONTROLS) == []
            assert page.evaluate("() => document.documentElement.scrollWidth") <= 390
        finally:
            browser.close()
