"""The Teach tab's second drafter (#compare-view) always beside the round the step view shows, in a real browser over
the tiny pair of test_browser_teaching, whatever order the answers land in: a drafter chosen while the rounds step
(Next, Previous, the keys) or auto-play, another one chosen after it. The comparison takes a moment to compute; a
step made meanwhile used to be overwritten by the comparison's answer, drawn for the round shown when it started
(the step view on round 3, the compare view back on round 1), or drew its round without the comparison."""

from __future__ import annotations

import pytest

from tests.app.teach_page import decode_lesson, wait_round
from tests.gradio_calls import track_calls, wait_quiet
from tests.helpers import open_page
from tools.screenshot import set_number

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # drives Chromium on the served app

PROMPT = "".join(f"def add{i}(a, b):\n    return a + b\n\n" for i in range(6)) + "def add(a, b):\n"


@pytest.fixture(scope="module")
def page(site, browser):
    page = open_page(browser, site[1] + "?tab=teach", ready="#step-start")
    track_calls(page)  # wait_quiet: every answer on its way landed
    decode_lesson(page, PROMPT, new_tokens=128)  # ~90 rounds: a comparison takes a while
    yield page
    page.context.close()


def step_round(page) -> int:
    return int(page.locator("#step-view .teach-step").get_attribute("data-round"))


def choose(page, drafter: str, *, then: str = "") -> None:
    """Pick `drafter` in the second drafter's list, and click the buttons `then` names ("next", "prev") at once after,
    as a presenter would, while its comparison is computed."""
    page.click("#teach-second input")
    page.locator("[role=option]", has_text=drafter).first.click()
    page.evaluate("(names) => names.forEach(n => document.querySelector(`#step-${n}`).click())", then.split())


def settled_beside(page, n: int, drafter: str) -> None:
    """The step view on round `n`, the compare view beside it on that round with `drafter`, and still so once every
    answer on its way has landed."""
    wait_round(page, n)
    beside = (f"() => {{ const c = document.querySelector('#compare-view .teach-compare[data-round]');"
              f" return c && c.dataset.round === '{n}' && c.textContent.includes({drafter!r}); }}")
    try:
        page.wait_for_function(beside, timeout=30_000)
        wait_quiet(page)  # every answer on its way (a late one, drawn for an older round, too) has landed
        assert page.evaluate(beside)
    except Exception as e:
        raise AssertionError(f"step view on round {step_round(page)}, compare view: "
                             f"{page.locator('#compare-view').inner_text()[:300]!r}") from e


def test_a_drafter_chosen_as_the_rounds_step_goes_beside_the_round_they_reach(page):
    at = step_round(page)
    choose(page, "prompt lookup", then="next next")
    settled_beside(page, at + 2, "prompt lookup")


def test_another_drafter_chosen_then_previous(page):
    at = step_round(page)
    choose(page, "none")
    page.wait_for_selector("#compare-view .teach-compare.teach-empty", timeout=30_000)
    choose(page, "prompt lookup", then="prev")
    settled_beside(page, at - 1, "prompt lookup")


def test_the_keys_step_with_the_compare_view_following(page):
    at = step_round(page)
    choose(page, "prompt lookup")  # the same drafter again: the dropdown answers once more
    page.evaluate("() => document.activeElement.blur()")
    page.keyboard.press("PageDown")
    page.keyboard.press("ArrowRight")
    settled_beside(page, at + 2, "prompt lookup")


def test_a_drafter_chosen_during_the_auto_play(page):
    set_number(page, "step-speed", 0.3)
    choose(page, "none")
    page.wait_for_selector("#compare-view .teach-compare.teach-empty", timeout=30_000)
    at = step_round(page)
    page.click("#step-prev")
    wait_round(page, at - 1)
    page.click("#step-play")
    page.wait_for_function(f"() => +document.querySelector('#step-view .teach-step').dataset.round >= {at}",
                           timeout=30_000)  # the auto-play steps
    choose(page, "prompt lookup")
    page.wait_for_timeout(200)  # a presenter's moment (pacing, nothing awaited: the answers may land in any order)
    page.click("#step-play")  # Pause, with the comparison's answer (and perhaps a tick) on its way
    page.wait_for_function("() => document.querySelector('#step-play').innerText.includes('Play')", timeout=30_000)
    wait_quiet(page)  # the ticks and the comparison answered: the round it stopped on
    settled_beside(page, step_round(page), "prompt lookup")
