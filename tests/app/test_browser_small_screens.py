"""A real browser on the served app as a phone shows it (390 × 844, a touch screen): every control a finger can hit,
44 px tall (Gradio draws the tabs at 32 px, a slider's number box and its ↺ at 22, a check box's line at 20, a reply's
↻ ↶ at 18), and nothing wider than the page, in the Chat tab after a run and in the Teach tab; plotly's tool bar
above a chart's title, not over it; a new visitor's first screen holds the prompt box and Send (390 × 844 and
360 × 640) below the title, the introduction, the tabs, the legend and the empty chat, and once the chat has a reply it
leaves the prompt box and Send room on one screen (portrait and landscape). One served app, one browser."""

from __future__ import annotations

import contextlib

import pytest

from tests.helpers import open_page, served_browser, ui_config
from tools.screenshot import run_prompt, set_number

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


@pytest.fixture(scope="module")
def app():
    """The served app (the UI tests' config) and Chromium, for every test here."""
    with served_browser(ui_config()) as (browser, url):
        yield browser, url


@contextlib.contextmanager
def phone_page(app, *, run: bool = True, **screen):
    """A page of the served app in Chromium as a phone shows it (`screen`: another viewport), after a short run (its
    reply, its charts) unless not `run`, on the Chat tab."""
    browser, url = app
    page = open_page(browser, url, **(PHONE | screen))
    try:
        assert page.evaluate("() => matchMedia('(pointer: coarse)').matches")  # a touch screen, as a phone's
        if run:
            set_number(page, "max-new-tokens", 16)
            run_prompt(page, "import os\n")  # a reply: its Copy reply, ↻ and ↶, the chat's corner buttons
        yield page
    finally:
        page.context.close()


def test_every_control_is_a_fingers_size_on_a_phone_and_nothing_is_wider_than_the_page(app):
    with phone_page(app) as page:
        assert page.locator("#chat .specui-copy").count() >= 1
        assert page.evaluate(SMALL_CONTROLS) == []
        assert page.evaluate("() => document.documentElement.scrollWidth") <= 390
        page.get_by_role("tab", name="Teach").click()
        page.wait_for_selector("#step-start", state="visible")
        assert page.evaluate(SMALL_CONTROLS) == []
        assert page.evaluate("() => document.documentElement.scrollWidth") <= 390


def test_a_charts_tool_bar_leaves_its_title_readable_on_a_phone(app):
    """plotly shows its tool bar (download, zoom, pan...) for good on a touch screen, where it lay over each chart's
    title ("Tokens/s over time" half hidden under its buttons on a phone): it now takes a row above the chart, which
    still fits its box."""
    boxes = """id => { const e = document.getElementById(id); const box = x => { const r = x.getBoundingClientRect();
        return {top: r.top, bottom: r.bottom, left: r.left, right: r.right}; };
        return {chart: box(e), bar: box(e.querySelector('.modebar')), title: box(e.querySelector('.gtitle')),
                plot: box(e.querySelector('.main-svg'))}; }"""
    with phone_page(app) as page:
        for chart in ("chart-speed", "chart-acceptance", "chart-tokens-per-round", "chart-position"):
            page.wait_for_selector(f"#{chart} .gtitle")
            g = page.evaluate(boxes, chart)
            assert g["bar"]["bottom"] <= g["title"]["top"], (chart, g)  # the buttons above the title, not on it
            assert g["chart"]["top"] <= g["bar"]["top"], (chart, g)  # within the chart's box
            assert g["plot"]["bottom"] <= g["chart"]["bottom"] + 0.5 and g["plot"]["right"] <= 390, (chart, g)


# where each part of a new visitor's first screen is (its top and bottom, CSS px), and whether it shows
FIRST_SCREEN = """() => Object.fromEntries(['#intro h1', '#intro p', '[role=tablist]', '#legend .specui-legend',
    '#chat .placeholder-content', '#prompt textarea', '#send', '#stop', '#clear'].map(s => {
        const e = document.querySelector(s), r = e.getBoundingClientRect();
        return [s, {top: Math.round(r.top), bottom: Math.round(r.bottom), shown: e.checkVisibility() && r.height > 0}];
    }))"""


@pytest.mark.parametrize("width, height", [(390, 844), (360, 640)])
def test_a_phones_first_screen_holds_the_prompt_box_and_send(app, width, height):
    """Send began 100 px below a 390 × 844 phone's first screen and 280 px below a 360 × 640 one's (the title, the
    introduction, the legend and the empty chat above it at a desktop's sizes; Send, Stop and Clear one under the
    other): a new visitor scrolled to send. Nothing above it is hidden for that, and nothing is wider than the page."""
    with phone_page(app, run=False, viewport={"width": width, "height": height}) as page:
        parts = page.evaluate(FIRST_SCREEN)
        assert all(part["shown"] for part in parts.values()), parts
        assert parts["#send"]["bottom"] <= height and parts["#prompt textarea"]["bottom"] <= height, parts
        assert parts["#stop"]["top"] == parts["#clear"]["top"] == parts["#send"]["top"], parts  # one line
        order = [part["top"] for part in parts.values()][:6]
        assert order == sorted(order) and order[0] >= 0, parts  # in the page's order, from its top
        assert page.evaluate("() => document.documentElement.scrollWidth") <= width


@pytest.mark.parametrize("width, height", [(390, 844), (360, 640), (844, 390)])
def test_a_chat_with_a_reply_the_prompt_box_and_send_fit_one_phones_screen(app, width, height):
    """After the first message the chat took its full 460 px, so the prompt box (focused after Send) and Send went
    below a 360 × 640 screen's edge, and a landscape 844 × 390 one's, as the reply came: the chat now leaves them room
    on one screen, its reply still a readable box."""
    with phone_page(app, viewport={"width": width, "height": height}) as page:
        page.locator("#send").scroll_into_view_if_needed()
        box = page.evaluate("""() => Object.fromEntries(['#chat', '#prompt textarea', '#send'].map(s => {
            const r = document.querySelector(s).getBoundingClientRect();
            return [s, {top: Math.round(r.top), bottom: Math.round(r.bottom)}]; }))""")
        assert box["#send"]["bottom"] - box["#chat"]["top"] <= height, box  # the three within one screen
        assert box["#chat"]["bottom"] - box["#chat"]["top"] >= 150, box
        assert page.evaluate("() => document.documentElement.scrollWidth") <= width
