"""A lesson on a projector (1280 × 720) in a real browser: the Teach tab as a teacher uses it between the rounds.
A prompt typed mid-lesson does not silently step the old rounds as if they were its own: the status line says
that Next still steps the rounds decoded and that Decode steps the new one (and takes it back when the prompt is
the decoded one again); a clicker pressed at a presenter's pace steps every press. Uses the Teach tab and tiny pair
of test_browser_teaching. Decode clicked at the top of the tab brings its progress into view."""

from __future__ import annotations

import pytest

from tools.screenshot import set_number
from tests.app.teach_page import PROMPT, teach_page, wait_round
from tests.helpers import click_and_wait, wait_answered, watch_busy

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # drives Chromium on the Teach tab


@pytest.fixture(scope="module")
def page(app, browser):
    with teach_page(browser, app[1], width=1280, height=720) as page:
        yield page


def shown_round(page) -> int:
    return int(page.locator("#step-view .teach-step").get_attribute("data-round"))


def test_a_prompt_typed_mid_lesson_is_said_not_to_be_the_rounds_shown(page):
    page.fill("#teach-prompt textarea", PROMPT)
    set_number(page, "teach-max-new-tokens", 32)
    page.click("#step-start")
    wait_round(page, 1, timeout_ms=120_000)
    page.click("#step-next")
    wait_round(page, 2)
    page.fill("#teach-prompt textarea", "")
    page.locator("#teach-prompt textarea").press_sequentially("import os\n")  # typed, as a teacher does
    page.wait_for_function("() => document.querySelector('#step-status').innerText.includes('prompt changed')",
                           timeout=30_000)
    assert "press Decode" in page.locator("#step-status").inner_text().replace("Press", "press")
    page.fill("#teach-prompt textarea", PROMPT[:-1])
    page.locator("#teach-prompt textarea").press_sequentially(PROMPT[-1])  # back to the prompt decoded
    page.wait_for_function("() => document.querySelector('#step-status').innerText.includes('Decoded 32 tokens')",
                           timeout=30_000)


def test_a_clicker_at_a_presenters_pace_steps_every_press(page):
    start = shown_round(page)
    page.locator("#step-status").click()  # the focus off the prompt box
    for n in range(1, 5):  # a presenter presses once the last press's round shows
        page.keyboard.press("PageDown")
        wait_round(page, start + n)
    for n in (3, 2):
        page.keyboard.press("PageUp")
        wait_round(page, start + n)


def test_decode_clicked_at_the_top_brings_its_progress_into_view(page):
    """At 1280 × 720 the controls fill the screen: Decode's progress (and round 1) showed below it, out of sight."""
    page.evaluate("() => window.scrollTo(0, 0)")
    watch_busy(page, "#step-status")
    page.click("#step-start")
    page.wait_for_function("""() => { const box = document.querySelector('#step-status').getBoundingClientRect();
        return box.bottom > 0 && box.top < window.innerHeight; }""", timeout=10_000)
    wait_answered(page, "#step-status")  # 'Decoded' alone was the last test's text: the next test's click was dropped
    assert "Decoded" in page.locator("#step-status").inner_text()


def test_new_tokens_off_the_eights_decode_as_many_and_the_slider_shows_them(page):
    """The New tokens slider moved in steps of 8: 20 typed in its box decoded 20 tokens while its thumb sat at 24."""
    set_number(page, "teach-max-new-tokens", 20)
    page.locator("#step-status").click()  # the box left
    assert page.locator("#teach-max-new-tokens input[type=range]").input_value() == "20"
    click_and_wait(page, "#step-start", "#step-status")
    assert "Decoded 20 tokens" in page.locator("#step-status").inner_text()
    assert page.locator("#teach-max-new-tokens input[type=number]").input_value() == "20"
