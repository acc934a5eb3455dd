"""The Teach tab on a lecture hall's projector in a real browser: 1280 × 720 at 150% zoom, 853 × 480 CSS px at a
device scale of 1.5, over the tiny pair of test_browser_teaching, with a presenter's clicker (PageDown, PageUp) and
the keyboard. The second drafter's view (#compare-view) on screen, the step view scrolled above it, the keys step
the rounds, as its help says, and still leave a list and a scrolling table their arrows; the Compare drafters
table scrolls within its column instead of spilling under the controls beside it, a Tab stop whose arrows scroll
it; the context box opens at its end (the text the drafts continue), not at the prompt's first lines."""

from __future__ import annotations

import pytest

from tests.app.teach_page import decode_lesson, wait_round
from tests.gradio_calls import track_calls, wait_quiet
from tests.helpers import open_page, page_timers_run, press_heard

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # drives Chromium on the served app

PROJECTOR = dict(viewport={"width": 853, "height": 480}, device_scale_factor=1.5)
# a prompt of many lines: the context box (180 px high) overflows, its end below its foot unless scrolled there
PROMPT = "".join(f"def add{i}(a, b):\n    return a + b\n\n" for i in range(13)) + "def add(a, b):\n"
ON_SCREEN = """(selector) => { const box = document.querySelector(selector).getBoundingClientRect();
    return box.bottom > 0 && box.top < window.innerHeight; }"""


@pytest.fixture(scope="module")
def page(site, browser):
    page = open_page(browser, site[1] + "?tab=teach", ready="#step-start", **PROJECTOR)
    track_calls(page)  # wait_quiet: every answer on its way landed
    decode_lesson(page, PROMPT, new_tokens=24)
    yield page
    page.context.close()


def compared_round(page) -> int:
    return int(page.locator("#compare-view .teach-compare").get_attribute("data-round"))


def test_the_context_box_shows_its_end_the_text_the_drafts_continue(page):
    box = "#step-view .teach-context"
    ends = f"""() => {{ const b = document.querySelector('{box}');
        return [b.scrollHeight - b.clientHeight, b.scrollTop]; }}"""
    for n in (1, 2):
        if n > 1:
            page.click("#step-next")
            wait_round(page, n)
        try:
            page.wait_for_function(f"() => {{ const [over, top] = ({ends})(); return over > 40 && top >= over - 1; }}",
                                   timeout=15_000)
        except Exception as e:
            raise AssertionError(f"round {n}: [overflow, scrollTop] = {page.evaluate(ends)}") from e
    # the reader scrolls up: it stays, the page changed since (the watcher's look at once, keys.js's tidy 100 ms on)
    page.evaluate(f"""() => {{ document.querySelector('{box}').scrollTop = 0;
        const mark = document.createElement('i'); document.body.append(mark); mark.remove(); }}""")
    page_timers_run(page, 300)
    assert page.evaluate(ends)[1] == 0


def test_the_keys_step_the_rounds_with_the_compare_view_on_screen(page):
    page.click("#teach-second input")
    page.locator("[role=option]", has_text="prompt lookup").first.click()
    page.wait_for_selector("#compare-view .teach-compare[data-round]", timeout=120_000)
    at = compared_round(page)
    page.evaluate("() => document.querySelector('#compare-view').scrollIntoView({block: 'start'})")
    page.locator("#teach-second input").focus()
    assert press_heard(page, "ArrowRight") == []  # the focus in the list: its arrows are the list's
    page.keyboard.press("Escape")
    wait_quiet(page)  # the list's events answered
    assert compared_round(page) == at
    page.evaluate("() => document.activeElement.blur()")
    # the list's focus may have scrolled the page to it: the compare view at the top again, the step view above
    page.evaluate("() => document.querySelector('#compare-view').scrollIntoView({block: 'start'})")
    assert not page.evaluate(ON_SCREEN, "#step-view") and page.evaluate(ON_SCREEN, "#compare-view")
    # the keys step the rounds (the step view above the screen moves), and the compare view follows the round it
    # shows (the list's answer to its blur, drawn for the round it started on, used to land after the step)
    page.keyboard.press("PageDown")
    page.wait_for_selector(f"#compare-view .teach-compare[data-round='{at + 1}']", timeout=30_000)
    wait_round(page, at + 1)
    page.keyboard.press("ArrowLeft")
    page.wait_for_selector(f"#compare-view .teach-compare[data-round='{at}']", timeout=30_000)
    wait_quiet(page)  # every answer on its way (one drawn for another round, too) has landed
    assert compared_round(page) == at
    assert page.evaluate(ON_SCREEN, "#compare-view")  # stepped where it was, not scrolled away


def test_the_compare_drafters_table_scrolls_within_its_column(page):
    page.locator("#drafters-run").scroll_into_view_if_needed()
    page.click("#drafters-run")
    table = "#drafters-table .teach-table"
    page.wait_for_function(f"() => document.querySelectorAll('{table} tbody tr').length >= 2", timeout=120_000)
    boxes = page.evaluate(f"""() => {{ const r = e => e.getBoundingClientRect();
        const t = document.querySelector('{table}');
        return {{table: r(t).right, column: r(t.closest('.column')).right,
                 slider: r(document.querySelector('#drafters-noise')).left,
                 button: r(document.querySelector('#drafters-run')).left,
                 wide: t.scrollWidth - t.clientWidth}}; }}""")
    assert boxes["table"] <= min(boxes["column"], boxes["slider"], boxes["button"]) + 1, boxes
    assert boxes["wide"] > 1, f"the table fits its column at 853 px: nothing to check {boxes}"
    # wider than its box: a Tab stop (keys.js), whose arrows scroll it and step nothing
    page.wait_for_selector(f"{table}[data-specui-scroll][tabindex='0']", timeout=15_000)
    at = int(page.locator("#step-view .teach-step").get_attribute("data-round"))
    page.locator("#drafters-run").focus()
    page.keyboard.press("Shift+Tab")  # the Tab order from the button back: the help's links, the table
    for _ in range(5):
        if page.evaluate(f"() => document.activeElement === document.querySelector('{table}')"):
            break
        page.keyboard.press("Shift+Tab")
    assert page.evaluate(f"() => document.activeElement === document.querySelector('{table}')")
    assert press_heard(page, "ArrowRight") == []  # no Next clicked
    page.wait_for_function(f"() => document.querySelector('{table}').scrollLeft > 0", timeout=10_000)
    assert int(page.locator("#step-view .teach-step").get_attribute("data-round")) == at
