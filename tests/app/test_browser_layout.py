"""A real browser on the served app, checking the layout on a wide and on a phone-sized page: the chat's corner buttons
(Clear, Copy conversation) sit in a row above the messages, so that no message scrolls under them (Gradio lays them
over the messages, where they hid a message's first line); the run charts stand two a row, or one on a phone; the
Teach tab's tables scroll sideways on a phone."""

from __future__ import annotations

import pytest

from tests.helpers import app_page, ui_config
from tools.screenshot import run_prompt, set_number

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # drives Chromium on the served app

# the corner buttons' box, the scrolling messages' box, and how far the messages scroll
GEOMETRY = """() => {
  const chat = document.querySelector('#chat');
  const box = e => { const r = e.getBoundingClientRect(); return {top: r.top, bottom: r.bottom}; };
  const wrap = chat.querySelector('.bubble-wrap');
  return {panel: box(chat.querySelector('.top-panel')), messages: box(wrap),
          scrolls: wrap.scrollHeight > wrap.clientHeight, chat: box(chat)};
}"""


def wide(width: int, height: int = 1000):
    """The served app (the UI tests' config) in Chromium, a page `width` px wide, once its prompt box shows."""
    return app_page(ui_config(), viewport={"width": width, "height": height})


@pytest.mark.parametrize("width", [1400, 420])
def test_the_chats_corner_buttons_never_cover_a_message(width):
    with wide(width) as page:
        set_number(page, "max-new-tokens", 48)
        for prompt in ("import os\n", "class Stack:\n", "def main(argv):\n"):
            run_prompt(page, prompt)
        g = page.evaluate(GEOMETRY)
        assert g["scrolls"], g  # enough messages that the chat scrolls: what scrolled went under the buttons
        assert g["panel"]["bottom"] <= g["messages"]["top"] + 0.5, g
        assert g["messages"]["bottom"] <= g["chat"]["bottom"] + 0.5, g  # and the messages still fit the chat's box
        charts = page.evaluate("""() => Object.fromEntries(['chart-speed', 'chart-acceptance'].map(id => {
            const r = document.getElementById(id).getBoundingClientRect(); return [id, {top: r.top, bottom: r.bottom,
            left: r.left, right: r.right}]; }))""")
        speed, acceptance = charts["chart-speed"], charts["chart-acceptance"]
        if width >= 1000:  # the run charts two a row on a wide page, one a row on a phone's (else 170 px each)
            assert acceptance["left"] >= speed["right"] - 0.5 and acceptance["top"] == speed["top"], charts
        else:
            assert acceptance["top"] >= speed["bottom"] - 0.5 and speed["right"] <= width, charts


def test_the_teach_tabs_draft_table_scrolls_sideways_on_a_phone_instead_of_losing_its_verdicts():
    """The draft table (#, token, q, p, min(1, p/q), u, verdict) is wider than a 420 px page: it scrolls within the
    page instead of running past its edge, where the verdict column was cut off."""
    with wide(420, 900) as page:
        page.get_by_role("tab", name="Teach").click()
        page.click("#step-start")
        page.wait_for_selector("#step-view table.teach-drafts", timeout=120_000)
        g = page.evaluate("""() => { const t = document.querySelector('#step-view table.teach-drafts');
            const r = t.getBoundingClientRect(); return {right: r.right, page: window.innerWidth,
            scroll: t.scrollWidth, client: t.clientWidth}; }""")
        assert g["right"] <= g["page"], g  # within the page
        assert g["scroll"] > g["client"], g  # and its further columns a sideways scroll away


def test_the_arena_chart_keeps_its_five_panels_legible_on_a_phone():
    """The arena's chart (five panels side by side) keeps 700 px on a 420 px page and scrolls sideways inside it,
    instead of squeezing each panel's title into its neighbour's."""
    with wide(420, 900) as page:
        set_number(page, "max-new-tokens", 16)
        page.click("#arena input")
        run_prompt(page, "import os\n", timeout_ms=300_000)
        g = page.evaluate("""() => { const e = document.getElementById('chart-arena');
            const plot = e.querySelector('.js-plotly-plot').getBoundingClientRect();
            return {right: e.getBoundingClientRect().right, plot: plot.width, scroll: e.scrollWidth,
                    client: e.clientWidth}; }""")
        assert g["right"] <= 420 and g["plot"] >= 700 and g["scroll"] > g["client"], g
