"""A real browser on the served app, checking the layout on a wide and on a phone-sized page: the chat's corner buttons
(Clear, Copy conversation) sit in a row above the messages, so that no message scrolls under them (Gradio lays them
over the messages, where they hid a message's first line); the run charts stand two a row, or one on a phone; the
Teach tab's tables scroll sideways on a phone.

A new visitor's first screens: the Chat tab's prompt box and Send show without scrolling at 1280 × 800, the prompt box
on a phone (the empty chat, 460 px high, had pushed them below the screen's edge), and the chat takes its full height
once it has a message; the Teach tab shows no empty export box before a run (Gradio's empty file frame, about 200 px
of dashed border around an icon), and shows the export once a run has given one; the Teach tree's Round list shows
its picked round's whole label.

One served app (the UI tests' bundled pair, a few tokens a run) and one browser for the module, a page of its own
browser context each."""

from __future__ import annotations

import contextlib

import pytest

from tests.helpers import open_page, served_browser, ui_config, wait_at_rest
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


@pytest.fixture(scope="module")
def served():
    with served_browser(ui_config()) as (browser, url):
        yield browser, url


@contextlib.contextmanager
def wide(served, width: int, height: int = 1000, *, path: str = "", ready: str = "#prompt textarea", **context):
    """A page of the served app (the UI tests' config) `width` px wide at `path`, once `ready` shows (`context`:
    playwright's further options); closed after."""
    browser, url = served
    page = open_page(browser, url + path, ready=ready, viewport={"width": width, "height": height}, **context)
    try:
        yield page
    finally:
        page.context.close()


@pytest.mark.parametrize("width", [1400, 420])
def test_the_chats_corner_buttons_never_cover_a_message(served, width):
    with wide(served, width) as page:
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


def test_the_teach_tabs_draft_table_scrolls_sideways_on_a_phone_instead_of_losing_its_verdicts(served):
    """The draft table (#, token, q, p, min(1, p/q), u, verdict) is wider than a 420 px page: it scrolls within the
    page instead of running past its edge, where the verdict column was cut off."""
    with wide(served, 420, 900) as page:
        page.get_by_role("tab", name="Teach").click()
        page.click("#step-start")
        page.wait_for_selector("#step-view table.teach-drafts", timeout=120_000)
        g = page.evaluate("""() => { const t = document.querySelector('#step-view table.teach-drafts');
            const r = t.getBoundingClientRect(); return {right: r.right, page: window.innerWidth,
            scroll: t.scrollWidth, client: t.clientWidth}; }""")
        assert g["right"] <= g["page"], g  # within the page
        assert g["scroll"] > g["client"], g  # and its further columns a sideways scroll away


def test_the_arena_chart_keeps_its_five_panels_legible_on_a_phone(served):
    """The arena's chart (five panels side by side) keeps 700 px on a 420 px page and scrolls sideways inside it,
    instead of squeezing each panel's title into its neighbour's."""
    with wide(served, 420, 900) as page:
        set_number(page, "max-new-tokens", 16)
        page.click("#arena input")
        run_prompt(page, "import os\n", timeout_ms=300_000)
        g = page.evaluate("""() => { const e = document.getElementById('chart-arena');
            const plot = e.querySelector('.js-plotly-plot').getBoundingClientRect();
            return {right: e.getBoundingClientRect().right, plot: plot.width, scroll: e.scrollWidth,
                    client: e.clientWidth}; }""")
        assert g["right"] <= 420 and g["plot"] >= 700 and g["scroll"] > g["client"], g


BOX = "s => { const r = document.querySelector(s).getBoundingClientRect(); return {top: r.top, bottom: r.bottom}; }"


# a laptop, a phone, and a laptop's 1280 × 800 at 150 % zoom (a projector's setting: 853 × 533 CSS px)
@pytest.mark.parametrize("viewport", [(1280, 800, 1), (390, 844, 1), (853, 533, 1.5)],
                         ids=["laptop", "phone", "zoom150"])
def test_the_first_screen_shows_the_prompt_box_and_send(served, viewport):
    width, height, scale = viewport
    with wide(served, width, height, device_scale_factor=scale) as page:
        wait_at_rest(page)
        send, prompt = page.evaluate(BOX, "#send"), page.evaluate(BOX, "#prompt textarea")
        assert 0 <= prompt["top"] and prompt["top"] + 60 <= height, prompt  # where to type, without scrolling
        if width > 1000:  # and Send beside it; then a message: the chat takes its full height
            assert send["bottom"] <= height, send
            set_number(page, "max-new-tokens", 8)
            run_prompt(page, "import os\n")
            chat = page.evaluate(BOX, "#chat")
            assert chat["bottom"] - chat["top"] >= 400, chat


TEACH = {"path": "?tab=teach", "ready": "#teach-prompt textarea"}


def test_the_teach_tab_shows_its_export_only_once_a_run_gives_one(served):
    with wide(served, 1280, 800, **TEACH) as page:
        wait_at_rest(page)
        assert page.locator("#teach-export").is_hidden()  # no empty file box under "No run yet."
        set_number(page, "teach-max-new-tokens", 8)
        page.click("#step-start")
        page.wait_for_selector("#teach-export a", timeout=120_000)
        assert page.locator("#teach-export").is_visible() and ".json" in page.locator("#teach-export").inner_text()


# where the picked round's label ends (its text measured in the box's font) and where the list's arrow begins: Gradio
# lays the arrow over the box's right end, so a label under it was cut short with no overflow the box could tell
TEXT_END = """() => { const e = document.querySelector('#tree-step-round input'); const cs = getComputedStyle(e);
    const c = document.createElement('canvas').getContext('2d'); c.font = cs.font;
    return e.getBoundingClientRect().left + parseFloat(cs.paddingLeft) + c.measureText(e.value).width; }"""
ARROW = "() => document.querySelector('#tree-step-round .icon-wrap').getBoundingClientRect().left"


def test_the_teach_trees_round_list_shows_its_whole_label(served):
    """The Teach tab's token-tree section: the picked round's label ("round 1 · 9 nodes · 2 accepted + bonus") fits
    its list, where the list, half of a row shared with Decode with a tree, cut it short under its arrow."""
    with wide(served, 1280, 800, **TEACH) as page:
        set_number(page, "teach-max-new-tokens", 8)
        page.locator("#teach-tree button").first.click()  # the section opens
        set_number(page, "tree-step-nodes", 9)
        page.click("#tree-step-start")
        page.wait_for_function("() => /^round 1 /.test(document.querySelector('#tree-step-round input').value)",
                               timeout=120_000)
        assert page.evaluate(TEXT_END) <= page.evaluate(ARROW), page.locator("#tree-step-round input").input_value()
