"""The Teach tab on a phone (390 × 844, a touch screen) in a real browser, over the tiny pair of
test_browser_teaching: every chart's title, subtitle and note fits its chart's box (plotly draws a line of SVG text
as long as it is: the theory charts' titles ran 130 px past the page's right edge, and the experiments' "Run the
experiment to fill this" notes were cut off on both sides), a title of several lines stays above its plot and under
the phone's tool bar. Boxes, not pixels."""

from __future__ import annotations

import pytest

from tests.app.teach_page import PROMPT, wait_round
from tests.helpers import open_page
from tools.screenshot import set_number

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # drives Chromium on the served app

PHONE = dict(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)

# each chart shown in the Teach tab: its box and those of its title, its notes, its plot and its tool bar
BOXES = """() => [...document.querySelectorAll('#teach-tab .js-plotly-plot')].filter(e => e.checkVisibility())
  .map(e => { const box = x => { if (!x) return null; const r = x.getBoundingClientRect();
                                 return {top: r.top, bottom: r.bottom, left: r.left, right: r.right}; };
    return {id: e.parentElement.closest('[id]').id, chart: box(e), title: box(e.querySelector('.gtitle')),
            notes: [...e.querySelectorAll('.annotation-text')].map(box), plot: box(e.querySelector('.nsewdrag')),
            bar: box(e.querySelector('.modebar'))}; })"""


@pytest.fixture(scope="module")
def phone(site, browser):
    page = open_page(browser, site[1] + "?tab=teach", ready="#step-start", **PHONE)  # a phone's context of its own
    yield page
    page.context.close()


def _fits(charts: list[dict]) -> list:
    wrong = []
    for g in charts:
        c = g["chart"]
        for name, b in [("title", g["title"]), *(("note", n) for n in g["notes"])]:
            if b is not None and (b["left"] < c["left"] - 0.5 or b["right"] > c["right"] + 0.5):
                wrong.append((g["id"], name, "past the chart's side", b, c))
        t, plot, bar = g["title"], g["plot"], g["bar"]
        if t is not None and plot is not None and plot["bottom"] - plot["top"] > 1 and t["bottom"] > plot["top"]:
            wrong.append((g["id"], "title", "over the plot", t, plot))
        if t is not None and bar is not None and bar["bottom"] - bar["top"] > 1 and bar["bottom"] > t["top"]:
            wrong.append((g["id"], "title", "under the tool bar", t, bar))
    return wrong


def test_every_teach_charts_titles_and_notes_fit_a_phone(phone):
    page = phone
    page.wait_for_selector("#teach-theory-speedup .gtitle")
    assert _fits(page.evaluate(BOXES)) == []  # before a run: the theory's placeholder, the experiments' notes
    page.fill("#teach-prompt textarea", PROMPT)
    set_number(page, "teach-max-new-tokens", 16)
    page.click("#step-start")
    wait_round(page, 1, timeout_ms=120_000)
    page.wait_for_function("() => document.querySelector('#teach-theory-tokens .gtitle').textContent"
                           ".includes('measured')", timeout=10_000)
    charts = page.evaluate(BOXES)
    assert len(charts) >= 8 and _fits(charts) == []  # the run's subtitles too
    assert page.evaluate("() => document.documentElement.scrollWidth") <= 390
