"""The Chat tab's "Step through this message in the Teach tab" in real Chromium, after a lesson: the Teach tab opens
clean on the handed message (no round, comparison, measured point or export of the last lesson, the auto-play off),
scrolled so its prompt, Decode and status line are on screen, and Next decodes the message at round 1. It opened on
the last lesson's "Round 3 of 4" beside the new prompt, scrolled to the charts where the chat's button had been."""

from __future__ import annotations

import pytest

from tests.helpers import click_and_wait, open_page, wait_at_rest
from tools.screenshot import run_prompt, set_number

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # drives Chromium on the served app

LESSON = "def add(a, b):\n    return a + b\n\ndef add(a, b):\n"
MESSAGE = "class Point:\n    def __init__(self, x, y):\n"
ROUND = "() => document.querySelector('#step-view .teach-step')?.dataset.round ?? null"
# whether an element is wholly on screen
ON_SCREEN = """sel => { const r = document.querySelector(sel).getBoundingClientRect();
                       return r.height > 0 && r.top >= 0 && r.bottom <= window.innerHeight; }"""


@pytest.fixture(scope="module")
def page(site, browser):
    page = open_page(browser, site[1], viewport={"width": 1400, "height": 1000})
    yield page
    page.context.close()


def lesson_on_round_1(page) -> None:
    """A lesson in the Teach tab, decoded, on round 1."""
    page.get_by_role("tab", name="Teach").click()
    page.fill("#teach-prompt textarea", LESSON)
    set_number(page, "teach-max-new-tokens", 24)
    set_number(page, "teach-k", 2)
    click_and_wait(page, "#step-start", "#step-status")
    page.wait_for_function(f"() => ({ROUND})() === '1'", timeout=60_000)


def lesson_on_round_3(page) -> None:
    """A lesson in the Teach tab: decoded, a second drafter beside it, on round 3, auto-playing."""
    lesson_on_round_1(page)
    page.click("#teach-second input")
    page.locator("[role=option]", has_text="prompt lookup").first.click()
    page.wait_for_selector("#compare-view .teach-compare[data-round='1']", timeout=60_000)
    page.click("#step-next")
    page.click("#step-next")
    page.wait_for_function(f"() => ({ROUND})() === '3'", timeout=30_000)
    set_number(page, "step-speed", 5)  # a tick every 5 s: the hand-off turns it off before the next
    page.click("#step-play")
    page.wait_for_function("() => document.querySelector('#step-play').textContent.includes('Pause')", timeout=30_000)
    assert "No run yet" not in page.locator("#teach-measured").inner_text()


def test_a_message_handed_over_after_a_lesson_opens_a_clean_teach_tab_at_its_prompt(page):
    lesson_on_round_3(page)
    page.get_by_role("tab", name="Chat").click()
    set_number(page, "max-new-tokens", 12)
    run_prompt(page, MESSAGE)
    page.click("#to-teach")  # scrolled to it, under the chat
    page.wait_for_function("p => document.querySelector('#teach-prompt textarea')?.value === p", arg=MESSAGE,
                           timeout=30_000)
    wait_at_rest(page)
    shown = {"round": page.evaluate(ROUND), "view": page.locator("#step-view").inner_text(),
             "compare": page.locator("#compare-view").inner_text(),
             "measured": page.locator("#teach-measured").inner_text(),
             "export": page.locator("#teach-export").inner_text(), "play": page.locator("#step-play").inner_text(),
             "status": page.locator("#step-status").inner_text()}
    assert shown["round"] is None and "Press Decode" in shown["view"], shown
    assert "prompt lookup is chosen: press Decode" in shown["compare"], shown
    assert "No run yet" in shown["measured"] and "specui-run" not in shown["export"], shown
    assert "Play" in shown["play"] and "press Decode" in shown["status"], shown
    unseen = [sel for sel in ("#teach-prompt", "#step-start", "#step-status") if not page.evaluate(ON_SCREEN, sel)]
    assert not unseen, f"off screen: {unseen} (scrolled to {page.evaluate('window.scrollY')})"
    assert page.evaluate("() => document.activeElement?.id") == "step-start"
    # a screen reader hears, with Decode, what came over and what changed of it: the status line describes it
    described = page.evaluate("() => document.getElementById("
                              "document.activeElement.getAttribute('aria-describedby') || 'none')?.innerText")
    assert described and "press Decode" in described, described
    # Next decodes the message, at round 1: not the last lesson's round 4
    click_and_wait(page, "#step-next", "#step-status")
    page.wait_for_function(f"() => ({ROUND})() === '1'", timeout=60_000)
    assert "P o i n t" in page.locator("#step-view").inner_text()  # the tiny pair's tokens are characters
    assert page.locator("#step-status").inner_text().startswith("Decoded")


def test_an_auto_play_tick_answered_just_before_a_hand_off_leaves_the_handed_message_clean(page, monkeypatch):
    """A tick moved the lesson on to round 2 as the message was handed over, its answer (held on the server here)
    landing after the hand-off's: the page showed the last lesson's round 2 beside the handed message, and the
    browser's memory kept it (a refresh decoded the lesson left to show it). The redraw after the hand-off draws the
    clean view again, after that answer; a refresh then only puts the lesson's prompt back."""
    from specui.ui import teach_keys
    from tests.app.teach_page.test_browser_teach_order import held_answer, rounds_seen, watch_rounds

    page.get_by_role("tab", name="Chat").click()
    set_number(page, "max-new-tokens", 12)
    run_prompt(page, MESSAGE)
    lesson_on_round_1(page)
    wait_at_rest(page)
    set_number(page, "step-speed", 1)
    held, go = held_answer(monkeypatch, "moving", module=teach_keys)  # the first tick's answer held after its step
    page.click("#step-play")
    try:
        assert held.wait(60), "no tick reached the server"
        page.get_by_role("tab", name="Chat").click()
        page.click("#to-teach")
        page.wait_for_function("p => document.querySelector('#teach-prompt textarea')?.value === p", arg=MESSAGE,
                               timeout=30_000)
        page.wait_for_function("() => document.querySelector('#step-play').textContent.includes('Play')",
                               timeout=30_000)
        assert page.evaluate(ROUND) is None  # the hand-off's answer is on the page, the tick's still held
        watch_rounds(page)  # every round drawn from now: the tick's may be drawn over within one frame
    finally:
        go.set()
    try:  # the tick's answer (the lesson's round 2), then drawn over by the hand-off's redraw
        page.wait_for_function(f"() => window.roundsSeen.some(([step]) => step === 2) && ({ROUND})() === null",
                               timeout=30_000)
    except Exception as e:
        raise AssertionError(f"rounds drawn since the tick was let go: {rounds_seen(page)}") from e
    wait_at_rest(page)
    assert page.evaluate(ROUND) is None and "Press Decode" in page.locator("#step-view").inner_text()
    page.goto(page.url.split("?")[0] + "?tab=teach")  # a refresh on the Teach tab
    page.wait_for_selector("#step-start", timeout=60_000)
    page.wait_for_function("() => / (is|are) back/.test(document.querySelector('#step-status').innerText)",
                           timeout=30_000)
    assert "prompt and settings are back" in page.locator("#step-status").inner_text()
