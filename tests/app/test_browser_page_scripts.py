"""The page's scripts on a page of their own in Chromium, no server: keys.js brings a refreshed lesson's status line
into view only on a page nobody has touched yet (not after a wheel turned, nor a screen reader's click, which comes
with no key or pointer press), and charts.js gives a chart's tool bar the focus back only for the redraw that took
it (not after the visitor went on from the page, its chart gone meanwhile)."""

from __future__ import annotations

import contextlib

import pytest

from tests.helpers import page_timers_run, press_heard, static_browser, static_content

pytestmark = [pytest.mark.browser]  # Chromium on pages of its own: no app, no model

LESSON = ("<button id=decode>Decode</button><div style='height:2000px'>controls</div>"
          "<div id=step-status>Back at round 5</div><div id=step-view></div><div style='height:2000px'></div>")
ROUND = "() => { document.querySelector('#step-view').innerHTML = \"<div class=teach-step data-round=4>r</div>\"; }"
BAR = ("<div class='js-plotly-plot'><div class=modebar role=toolbar>"
       "<a href=# class=modebar-btn data-title='Download plot as a png'>d</a>"
       "<a href=# class=modebar-btn data-title='Zoom in'>z</a></div></div>")
FOCUSED = "() => document.activeElement.dataset.title || null"


@contextlib.contextmanager
def pages(scripts: tuple[str, ...]):
    """`open_page(body)`: a new Chromium page of `body` under style.css, watch.js and `scripts` run (as blocks.JS)."""
    with static_browser() as browser:
        yield lambda body: static_content(browser.new_page(viewport={"width": 800, "height": 600}), body,
                                          scripts=("watch.js", *scripts))


def test_a_round_shown_scrolls_to_the_status_line_only_on_a_page_nobody_touched():
    with pages(("keys.js",)) as open_page:
        page = open_page(LESSON)  # refreshed, the lesson decoded again: the status line comes into view
        page.evaluate(ROUND)
        page.wait_for_function("() => document.querySelector('#step-status').getBoundingClientRect().top < 5")
        page = open_page(LESSON)  # the reader turned the wheel while the round decoded: left where they went
        page.mouse.move(400, 300)
        page.mouse.wheel(0, 300)
        page.wait_for_function("() => window.scrollY === 300")
        page.evaluate(ROUND)
        page.evaluate("() => new Promise((done) => requestAnimationFrame(() => setTimeout(done, 0)))")  # one frame
        assert page.evaluate("() => window.scrollY") == 300
        page = open_page(LESSON)  # a screen reader's Decode: a click, with no key or pointer press on the page
        page.evaluate("""() => { for (const kind of ['pointerdown', 'mousedown', 'keydown', 'wheel'])
            window.addEventListener(kind, (event) => event.stopImmediatePropagation(), true); }""")
        page.click("#decode")
        page.evaluate(ROUND)
        page.evaluate("() => new Promise((done) => requestAnimationFrame(() => setTimeout(done, 0)))")
        assert page.evaluate("() => window.scrollY") == 0


def test_a_tool_bar_takes_the_focus_back_only_from_the_redraw_that_took_it():
    with pages(("charts.js",)) as open_page:
        page = open_page(f"<div id=one>{BAR}</div><div id=two>{BAR}</div>")
        redraw = "([id, bar]) => { document.getElementById(id).innerHTML = bar; }"
        page.locator("#two .modebar-btn").nth(1).focus()
        page.evaluate(redraw, ["two", BAR])  # a redraw: the same button of the bar drawn in its place
        page.wait_for_function("() => document.activeElement.closest('#two .modebar') !== null")
        assert page.evaluate(FOCUSED) == "Zoom in"
        for press in (lambda: page.mouse.click(700, 500), lambda: page.keyboard.press("ArrowRight")):
            page.locator("#one .modebar-btn").nth(1).focus()
            page.evaluate("() => { document.getElementById('one').innerHTML = ''; }")  # the chart taken away
            assert page.evaluate("() => document.activeElement === document.body")
            press()  # the visitor goes on from the page
            page.evaluate(redraw, ["one", BAR])  # drawn again later: the focus stays where the visitor has it
            page.evaluate("() => new Promise((done) => setTimeout(done, 0))")
            assert page.evaluate("() => document.activeElement === document.body")


def test_press_heard_returns_the_next_a_key_clicked_and_page_timers_run_waits_for_the_pages_timers():
    """tests/helpers' waits for the browser tests' keys and timers: `press_heard` returns once keys.js has had the key,
    with the Next it clicked (none from a text box); `page_timers_run` returns once a timer the page set is run."""
    with pages(("keys.js",)) as open_page:
        page = open_page("<textarea></textarea><div id=step-view><div class=teach-step data-round=2>r</div></div>"
                         "<button id=step-prev>Previous</button><button id=step-next>Next</button>")
        page.locator("#step-view").click()
        assert press_heard(page, "ArrowRight") == ["step-next"]
        assert press_heard(page, "PageUp") == ["step-prev"]
        page.locator("textarea").focus()
        assert press_heard(page, "ArrowRight") == []  # the caret's
        page.evaluate("() => { window.ran = false; setTimeout(() => { window.ran = true; }, 100); }")
        page_timers_run(page, 150)
        assert page.evaluate("() => window.ran")
