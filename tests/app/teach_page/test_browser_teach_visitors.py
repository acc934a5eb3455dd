"""Two visitors and the auto-play in a real browser (1280 × 720): each page's presses count, in order, while another
page presses at the same moment (a page's moves take turns on its own lock, not every visitor's); presses during Play
never show a round older than one already shown, and when Play is paused the round on screen is the one the server
moves on from (the ticks were an event of their own, whose answers and the presses' reached the page in either
order: rounds 10, 12, 11 seen; now a tick is a press of the one stepping event). Uses the Teach tab and tiny pair of
test_browser_teaching."""

from __future__ import annotations

import contextlib

import pytest

from tools.screenshot import set_number
from tests.app.teach_page import PROMPT, wait_round
from tests.app.teach_page.test_browser_teach_keys import burst, go_to, settled, shown
from tests.gradio_calls import track_calls, wait_quiet

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # drives Chromium on the Teach tab

# every round the step view shows, in order, as the page saw it (the rounds an answer put on screen)
WATCH = """() => { window.rounds = []; const view = document.querySelector('#step-view');
    const note = () => { const step = view.querySelector('.teach-step');
        const n = step && +step.dataset.round; if (n && n !== window.rounds.at(-1)) window.rounds.push(n); };
    new MutationObserver(note).observe(view, {childList: true, subtree: true, attributes: true}); note(); }"""


@contextlib.contextmanager
def decoded_pages(browser, url: str, count: int):
    """`count` pages on the package's Chromium, each its own visitor (own context), each with the prompt decoded
    (greedy, K 1: many rounds) and the focus off the prompt box; their contexts closed after."""
    pages = []
    try:
        for _ in range(count):
            pages.append(browser.new_page(viewport={"width": 1280, "height": 720}))  # a context of its own
        for page in pages:
            track_calls(page)  # `settled` waits for every press's answer
            page.goto(url)
            page.wait_for_selector("#step-start", timeout=60_000)
            page.fill("#teach-prompt textarea", PROMPT)
            set_number(page, "teach-k", 1)
            set_number(page, "teach-temperature", 0)
            set_number(page, "teach-max-new-tokens", 32)
            page.click("#step-start")
        for page in pages:
            wait_round(page, 1, timeout_ms=120_000)
            page.locator("#step-status").click()
        yield pages
    finally:
        for page in pages:
            page.context.close()


def test_two_visitors_pressing_at_once_each_step_their_own_rounds(app, browser):
    with decoded_pages(browser, app[1], 2) as (first, second):
        go_to(first, 2)
        go_to(second, 3)
        for _ in range(4):  # interleaved: both pages' presses reach the server together
            burst(first, ["PageDown"])
            burst(second, ["PageDown", "PageDown"])
        settled(first, 6)
        settled(second, 11)
        burst(second, ["ArrowLeft"] * 3)
        burst(first, ["ArrowLeft"])
        settled(first, 5)
        settled(second, 8)


def test_presses_during_play_never_show_an_older_round_and_pause_where_shown(app, browser):
    with decoded_pages(browser, app[1], 1) as (page,):
        last = shown(page)[1]
        set_number(page, "step-speed", 0.2)  # the fastest auto-play: ticks among the presses
        page.locator("#step-status").click()
        page.evaluate(WATCH)
        page.click("#step-play")
        for _ in range(6):
            seen = len(page.evaluate("window.rounds"))
            burst(page, ["PageDown"])
            page.wait_for_function("([n, last]) => window.rounds.length > n || window.rounds.at(-1) === last",
                                   arg=[seen, last])
        if "Pause" in page.locator("#step-play").inner_text():  # else Play stopped at the last round
            page.click("#step-play")
        page.wait_for_function("() => document.querySelector('#step-play').innerText.includes('Play')")
        wait_quiet(page)  # a tick already sent lands, if any (a fixed 1.5 s was too short on a busy machine)
        rounds = page.evaluate("window.rounds")
        assert rounds == sorted(rounds), f"an older round came back: {rounds}"
        at = shown(page)[0]
        assert at == rounds[-1] and at >= 7
        page.locator("#step-status").click()  # the step view back on screen (the keys step what is shown)
        if at < last:  # the server moves on from the round on screen
            burst(page, ["PageDown"])
            settled(page, at + 1)
        burst(page, ["PageUp"])
        settled(page, min(at + 1, last) - 1)
