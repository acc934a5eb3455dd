"""A real browser on the served app: the address names the tab (`?tab=teach` opens the Teach tab, for a lecture's
bookmark), choosing a tab writes it there, and a refreshed page comes back to the tab it showed, with the Teach tab's
last decoded prompt and settings."""

from __future__ import annotations

import pytest

from tests.gradio_calls import track_calls, wait_quiet
from tools.screenshot import set_number

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # drives Chromium on the served app


def _selected(page) -> str:
    return page.locator("button[role=tab][aria-selected=true]").inner_text().strip()


def _on_tab(page, name: str) -> None:
    """Wait until the page shows the tab `name` and its scripts have run (blocks.JS runs after gradio draws the page:
    a tab chosen before address.js was there was never written in the address)."""
    page.wait_for_function("(name) => window.specuiTakePresses && document.querySelector("
                           "'button[role=tab][aria-selected=true]')?.textContent.trim() === name", arg=name,
                           timeout=20_000)


@pytest.fixture
def opened(site):
    """`opened(query)`: a new page at the folder's served app (conftest.py) with `query` (e.g. "?tab=teach"), its gradio
    calls tracked from before it loads (`wait_quiet` waits for its load's events too); each closed after the test."""
    browser, url = site
    pages = []

    def open_at(query: str):
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        pages.append(page)
        track_calls(page)
        page.goto(url + query)
        page.wait_for_selector("button[role=tab][aria-selected=true]", timeout=60_000)
        return page

    yield open_at
    for page in pages:
        page.close()


def _choose(page, name: str) -> None:
    """Click a tab and wait for the address to name it."""
    page.get_by_role("tab", name=name).click()
    page.wait_for_function("(name) => new URL(location.href).searchParams.get('tab') === name", arg=name.lower(),
                           timeout=10_000)


def test_the_address_opens_the_teach_tab_and_a_refresh_keeps_the_tab(opened):
    page = opened("?tab=teach")
    _on_tab(page, "Teach")
    assert page.locator("#step-start").is_visible()
    _choose(page, "Chat")
    page.reload()
    _on_tab(page, "Chat")
    _choose(page, "Teach")
    page.reload()
    _on_tab(page, "Teach")
    other = opened("?tab=nonsense")  # a name it does not know: the Chat tab
    wait_quiet(other)  # the load's answer (the tab its address names) is on the page
    assert _selected(other) == "Chat"


def test_a_refreshed_teach_tab_keeps_the_last_decoded_prompt_and_settings(opened):
    page = opened("?tab=teach")
    _on_tab(page, "Teach")
    page.fill("#teach-prompt textarea", "def remembered(x):\n")
    set_number(page, "teach-seed", 42)
    set_number(page, "teach-temperature", 0.3)
    set_number(page, "teach-max-new-tokens", 16)
    page.click("#step-start")
    page.wait_for_function("() => /Decoded/.test(document.querySelector('#step-status')?.textContent)",
                           timeout=120_000)
    page.fill("#teach-prompt textarea", "typed after the run, never decoded")
    page.reload()
    _on_tab(page, "Teach")
    remembered = "() => document.querySelector('#teach-prompt textarea')?.value === 'def remembered(x):\\n'"
    page.wait_for_function(remembered, timeout=20_000)
    assert page.locator("#teach-seed input").input_value() == "42"
    assert float(page.locator("#teach-temperature input[type=number]").input_value()) == 0.3
    assert page.locator("#teach-max-new-tokens input[type=number]").input_value() == "16"
    _choose(page, "Chat")  # a page refreshed on the Chat tab: the Teach tab's settings come back too
    page.reload()
    page.wait_for_selector("#prompt textarea", timeout=60_000)
    page.get_by_role("tab", name="Teach").click()
    page.wait_for_function(remembered, timeout=20_000)
