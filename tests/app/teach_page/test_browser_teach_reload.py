"""A refreshed Teach tab in a real browser (the app itself, over the tiny pair of test_browser_teaching): a page
refreshed mid-lesson on the Teach tab (F5, a laptop that slept, a projector reconnected) decodes the remembered run
again and shows the round the class had reached, with the same numbers, and the keys step on from it. Another
visitor (another browser's storage) opens on an empty step view."""

from __future__ import annotations

import pytest

from tests.app.teach_page import PROMPT, shown_rows, wait_round
from tests.gradio_calls import wait_quiet
from tests.helpers import open_page
from tools.screenshot import set_number

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # drives Chromium on the served app


@pytest.fixture(scope="module")
def site(site, browser):
    """The package's Chromium and its whole app's address (conftest.py's `site`), opening on the Teach tab."""
    return browser, site[1] + "?tab=teach"


def _open(browser, url: str):
    return open_page(browser, url, ready="#step-start", tracked=True, viewport={"width": 1280, "height": 720})


def _refreshed_at_round_1(page, **numbers) -> list[dict]:
    """PROMPT decoded with `numbers` (element id -> value) to round 1, then the page refreshed until it says the
    lesson is back: round 1's rows."""
    page.fill("#teach-prompt textarea", PROMPT)
    for elem_id, value in numbers.items():
        set_number(page, elem_id, value)
    page.click("#step-start")
    wait_round(page, 1, timeout_ms=120_000)
    rows = shown_rows(page)
    page.reload()
    page.wait_for_selector("#step-start", timeout=60_000)
    page.wait_for_function("() => document.querySelector('#step-status').innerText.includes('are back')",
                           timeout=30_000)
    return rows


def test_a_refresh_mid_lesson_comes_back_to_the_same_round(site):
    browser, url = site
    page = _open(browser, url)
    page.fill("#teach-prompt textarea", PROMPT)
    set_number(page, "teach-k", 2)
    set_number(page, "teach-temperature", 0.8)  # sampled: the same draws again, not only the same argmax
    set_number(page, "teach-max-new-tokens", 24)
    page.click("#step-start")
    wait_round(page, 1, timeout_ms=120_000)
    page.locator("#step-status").click()  # the focus off the prompt box
    for n in range(2, 6):
        page.keyboard.press("PageDown")
        wait_round(page, n)
    rows = shown_rows(page)
    page.reload()
    page.wait_for_selector("#step-start", timeout=60_000)
    wait_round(page, 5, timeout_ms=120_000)
    assert "Back at round 5" in page.locator("#step-status").inner_text()
    # in view (keys.js): below the controls, off a projector's 720 lines, the class did not see it. A pixel's
    # fraction above the top is in view: scrolled to its start, the page scrolls by whole pixels and the status line
    # may start between two (-0.44 px since the Drafter radio has a line of info under it)
    page.wait_for_function("""() => { const box = document.querySelector('#step-status').getBoundingClientRect();
        return box.top > -1 && box.bottom <= window.innerHeight; }""", timeout=10_000)
    assert shown_rows(page) == rows
    page.locator("#step-status").click()
    page.keyboard.press("PageDown")  # the keys step on from it, and a second refresh comes back there
    wait_round(page, 6)
    page.reload()
    page.wait_for_selector("#step-start", timeout=60_000)
    wait_round(page, 6, timeout_ms=120_000)
    assert page.locator("#teach-prompt textarea").input_value() == PROMPT

    other = _open(browser, url)  # another visitor: their own storage, nothing decoded
    wait_quiet(other)  # its load's events answered, and a decode they started (a run remembered) too
    assert other.locator("#step-view .teach-step[data-round]").count() == 0
    assert other.locator("#teach-prompt textarea").input_value() != PROMPT
    other.context.close()
    page.context.close()


def test_a_refresh_at_round_1_decodes_nothing_and_next_brings_the_same_round_1(site):
    """A run never stepped past round 1 is not decoded again on a refresh (0442d56): the page says its prompt and
    settings are back (and that the prompt changed while another is typed), and Next decodes it at round 1: the same
    run (the same seed, the same draws), not the box's defaults."""
    browser, url = site
    page = _open(browser, url)
    rows = _refreshed_at_round_1(page, **{"teach-k": 3, "teach-temperature": 0.9, "teach-max-new-tokens": 20,
                                          "teach-seed": 7})
    wait_quiet(page)  # the refreshed page's load events answered, and a decode they started too
    # asked about the refreshed page's session alone: the one before the refresh can keep an event pending for good,
    # gone with its page, and wait_quiet timed out on it (seen under load)
    assert len(page.calls["sessions"]) == 1, page.calls["sessions"]
    assert page.locator("#step-view .teach-step[data-round]").count() == 0  # nothing decoded
    page.locator("#teach-prompt textarea").press_sequentially("x")  # typed: the lesson's prompt is no longer there
    page.wait_for_function("() => document.querySelector('#step-status').innerText.includes('prompt changed')",
                           timeout=30_000)
    page.fill("#teach-prompt textarea", PROMPT[:-1])
    page.locator("#teach-prompt textarea").press_sequentially(PROMPT[-1])  # the lesson's prompt again
    page.wait_for_function("() => document.querySelector('#step-status').innerText.includes('are back')",
                           timeout=30_000)
    page.click("#step-next")
    wait_round(page, 1, timeout_ms=120_000)
    assert shown_rows(page) == rows
    assert "(seed 7)" in page.locator("#step-status").inner_text()
    page.context.close()



def test_a_clickers_first_page_down_after_a_refresh_at_round_1_brings_round_1(site):
    """A page refreshed at round 1 decodes nothing, the rounds' view is empty below the controls (a projector's 720
    lines), and the status line asks for Next: a clicker's first PageDown scrolled the page instead (keys.js stepped
    only rounds already decoded), the later ones stepped. The first press is Next now, and brings the rounds into
    view."""
    browser, url = site
    page = _open(browser, url)
    rows = _refreshed_at_round_1(page, **{"teach-max-new-tokens": 24})
    assert page.evaluate("() => document.querySelector('#step-view').getBoundingClientRect().top") >= 720
    assert page.evaluate("() => window.scrollY") == 0
    page.keyboard.press("PageDown")
    wait_round(page, 1, timeout_ms=120_000)
    assert shown_rows(page) == rows
    assert page.evaluate("() => document.querySelector('#step-view').getBoundingClientRect().top") < 720
    page.keyboard.press("PageDown")
    wait_round(page, 2)
    page.context.close()
