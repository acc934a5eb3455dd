"""axe-core, the standard automated WCAG checker, on the served app in Chromium: every state a visitor reaches.

The Chat tab after a reply compared with plain decoding (coloured tokens, charts, the side-by-side view, its
download), on a light and a dark page and on a phone (390 × 844); a chart's tool bar shown by the keyboard; a
sampled reply with its rejected drafts shown, and a token's box opened by the arrow keys; a refused message; arena
mode; the token trees' panel; the Teach tab after Decode, after Next and with a second drafter compared, light and
dark, and on a phone, and with its panels open. Each fails on any violation axe reports (rule, impact, the element)
but those listed in EXCLUDED: each a rule on one selector inside Gradio's own components, which the app cannot
change, with the reason. The page's colours are the app's own theme (`specui.ui.theme.page_theme`), so contrast is
never excluded. axe.min.js comes with the PyPI package axe-playwright-python (requirements-dev.txt).
"""

from __future__ import annotations

import importlib.util

import pytest

from tests.helpers import IN_CI, page_timers_run, require_browser, served_app, ui_config, wait_at_rest
from tools.screenshot import launch_chromium, run_prompt, set_number

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # drives Chromium on the served app

# (rule id, axe's selector of the element): why it is Gradio's and not ours
EXCLUDED = {
    ("image-redundant-alt", 'img[alt="Settings"]'):
        "Gradio's footer: its Settings button's icon has the alt text 'Settings' beside the word Settings",
    ("nested-interactive", ".toast-header"):
        "Gradio's toast (a refusal's warning): its header is a role=button that holds the toast's Close button",
    ("aria-prohibited-attr", ".empty"):
        "Gradio's empty File and Plot boxes (the Teach tab's export before a run, a chart before its figure comes; "
        "axe names the latter '#chart-speed > .empty.large.unpadded_box'): aria-label on a div with no role",
}


def excluded(rule: str, target: str) -> bool:
    """Whether axe's finding `rule` at `target` is one of EXCLUDED (Gradio's empty boxes by their own class)."""
    last = target.split(" > ")[-1]
    return (rule, ".empty" if last.startswith(".empty") else target) in EXCLUDED
PROMPT = "def main(argv):\n"


@pytest.fixture(scope="module")
def app():
    require_browser()
    if importlib.util.find_spec("axe_playwright_python") is None:
        (pytest.fail if IN_CI else pytest.skip)("the Python package axe-playwright-python is not installed "
                                                "(pip install -r requirements-dev.txt)")
    from playwright.sync_api import sync_playwright

    with served_app(ui_config()) as url, sync_playwright() as p:
        browser = launch_chromium(p)
        yield browser, url
        browser.close()


def _page(app, *, dark: bool = False, tab: str = "", size=(1400, 1000), ready: str = "#prompt textarea"):
    """A new page of the served app (`tab`: e.g. teach, opened from the address), once `ready` shows."""
    browser, url = app
    page = browser.new_page(viewport={"width": size[0], "height": size[1]})
    query = "&".join(part for part in (f"tab={tab}" if tab else "", "__theme=dark" if dark else "") if part)
    page.goto(url + (f"?{query}" if query else ""))
    page.wait_for_selector(ready, timeout=60_000)
    return page


def assert_clean(page) -> None:
    """Fail with every violation axe finds on the page as it stands, one line per element (rule, impact, selector,
    what fails), but the excluded ones."""
    from axe_playwright_python.sync_playwright import Axe

    page.mouse.move(0, 0)  # no control hovered: the colours checked are those a page shows at rest
    wait_at_rest(page)  # no event pending (a pending output is greyed), the hover's fade gone
    found = Axe().run(page).response["violations"]
    lines = [f"{v['id']} ({v['impact']}) {' '.join(node['target'])}: {node['failureSummary'].splitlines()[-1].strip()}"
            for v in found for node in v["nodes"] if not excluded(v["id"], " ".join(node["target"]))]
    assert not lines, f"{len(lines)} violations:\n" + "\n".join(lines)


def _replied(page, **numbers) -> None:
    """Set the Chat tab's sliders (`numbers`: element id → value), then send PROMPT and wait for its reply."""
    for elem_id, value in {"max-new-tokens": 16, **numbers}.items():
        set_number(page, elem_id, value)
    run_prompt(page, PROMPT)


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_the_chat_tab_after_a_compared_reply(app, theme):
    page = _page(app, dark=theme == "dark")
    assert_clean(page)  # before any run: the empty charts, the legend, the controls
    page.check("#compare input")
    _replied(page)
    page.wait_for_selector("#chat .specui-compare")
    assert_clean(page)
    page.close()


def test_a_charts_tool_bar_shown_by_its_download_reached_with_tab(app):
    """A chart keeps one Tab stop of its plotly tool bar, its download (charts.js), which shows the bar as it takes
    the focus; the other buttons stay for the mouse, out of the Tab order."""
    page = _page(app)
    page.wait_for_function("""() => { const stops = [...document.querySelectorAll('#chat-tab .modebar-btn')]
        .filter(b => b.tabIndex >= 0); return stops.length > 0 && stops.every(b => /^Download/.test(b.ariaLabel)); }""",
                           timeout=15_000)
    page.locator("#chat-tab .modebar-btn:not([tabindex='-1'])").first.focus()
    page.wait_for_function("() => getComputedStyle(document.activeElement.closest('.modebar-group')).opacity === '1'")
    assert_clean(page)
    page.close()


def test_a_sampled_reply_with_its_rejected_drafts_shown(app):
    page = _page(app)
    page.check("#show-rejected input")
    _replied(page, temperature=1.0, **{"max-new-tokens": 32})
    assert page.locator("#chat .tok-rejected").count() > 0  # struck through, in red
    assert_clean(page)
    page.close()


def test_a_tokens_box_opened_by_the_arrow_keys(app):
    page = _page(app)
    _replied(page)
    page.locator("#chat .specui-text").first.focus()
    page.keyboard.press("ArrowRight")
    page.wait_for_selector(".specui-tip")
    try:
        assert_clean(page)
    finally:
        page.close()


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_a_refused_message(app, theme):
    """Settings refused at the message's turn (a dynamic tree needs tree width 2): the reply's error and the toast."""
    page = _page(app, dark=theme == "dark")
    _replied(page, **{"tree-nodes": 4})
    page.wait_for_selector("#chat .specui-error")
    page.wait_for_selector("[data-testid=toast-body]")
    assert_clean(page)
    page.close()


def test_arena_mode(app):
    page = _page(app)
    page.check("#arena input")
    _replied(page)
    page.wait_for_selector("#arena-table table", timeout=60_000)
    assert_clean(page)
    page.close()


def test_the_token_trees_panel(app):
    page = _page(app)
    _replied(page, **{"tree-width": 2})
    page.locator("#tree-view").get_by_text("Token trees: a tree round").first.click()
    page.wait_for_selector("#chart-tree .scatterlayer .point", timeout=30_000)
    assert_clean(page)
    page.close()


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_the_teach_tab_after_decode_next_and_a_second_drafter(app, theme):
    page = _page(app, dark=theme == "dark", tab="teach", ready="#step-start")
    set_number(page, "teach-max-new-tokens", 16)
    page.click("#step-start")
    page.wait_for_selector("#step-view .teach-step[data-round='1']", timeout=120_000)
    assert_clean(page)
    page.click("#step-next")
    page.wait_for_selector("#step-view .teach-step[data-round='2']", timeout=60_000)
    assert_clean(page)
    page.click("#teach-second input")
    page.locator("[role=option]", has_text="prompt lookup").first.click()
    page.wait_for_selector("#compare-view .teach-compare[data-round='2']", timeout=120_000)
    assert_clean(page)
    page.close()


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_the_teach_tabs_panels_opened_and_a_word_typed_in_a_list(app, theme):
    """Every accordion open before a run (the empty export box, the tree panel, the experiments), and a word typed
    into the tree panel's Round list that is none of its choices: Gradio greys it as subdued (4.05:1 on the dark page
    in Soft's grey-400)."""
    page = _page(app, dark=theme == "dark", tab="teach", ready="#step-start")
    for panel in page.locator("#teach-tab .label-wrap").all():
        panel.click()
    page.locator("#tree-step-round input").fill("round")
    page.wait_for_selector("#tree-step-round input.subdued")
    assert_clean(page)
    page.close()


def test_the_chat_tab_on_a_phone(app):
    page = _page(app, size=(390, 844))
    _replied(page)
    assert_clean(page)
    page.close()


def test_the_teach_tab_on_a_phone_whose_draft_table_the_keyboard_scrolls(app):
    """The draft table, wider than a phone, scrolls sideways (style.css): a Tab stop while it does, whose arrow keys
    scroll it rather than step the rounds (keys.js)."""
    page = _page(app, size=(390, 844), tab="teach", ready="#step-start")
    page.click("#step-start")
    page.wait_for_selector("#step-view .teach-step[data-round='1']", timeout=120_000)
    page.wait_for_selector("#step-view .teach-table[tabindex='0']", timeout=15_000)
    assert_clean(page)
    table = page.locator("#step-view .teach-table[tabindex='0']").first
    table.focus()
    page.keyboard.press("ArrowRight")
    page.wait_for_function("t => t.scrollLeft > 0", arg=table.element_handle(), timeout=15_000)
    assert page.locator("#step-view .teach-step").get_attribute("data-round") == "1"  # not stepped to round 2
    page.close()


def test_a_draft_table_tapped_on_a_phone_leaves_the_keys_stepping_the_rounds(app):
    """A table that scrolls is a Tab stop (keys.js), so a click or a tap on it focused it, and from then on → and a
    clicker's PageDown stepped nothing (a presenter pointing at the table lost the clicker): the keys scroll a table
    reached with Tab alone."""
    page = _page(app, size=(390, 844), tab="teach", ready="#step-start")
    page.click("#step-start")
    page.wait_for_selector("#step-view .teach-step[data-round='1']", timeout=120_000)
    page.wait_for_selector("#step-view .teach-table[tabindex='0']", timeout=15_000)
    page.locator("#step-view .teach-table[tabindex='0'] td").first.click()  # the table has the focus now
    assert page.evaluate("document.activeElement.hasAttribute('data-specui-scroll')")
    page.keyboard.press("ArrowRight")
    page.wait_for_selector("#step-view .teach-step[data-round='2']", timeout=30_000)
    page.close()


def test_a_draft_table_stays_a_tab_stop_after_a_chat_in_the_other_tab(app):
    """keys.js looks at the tables as the page changes: a reply streamed in the Chat tab, while the Teach tab was
    hidden (a hidden table scrolls nothing), took the Teach table out of the Tab order, and opening the Teach tab
    again changed nothing in the page to put it back: the keyboard could not reach the table (axe:
    scrollable-region-focusable)."""
    page = _page(app, size=(390, 844), tab="teach", ready="#step-start")
    page.click("#step-start")
    page.wait_for_selector("#step-view .teach-table[tabindex='0']", timeout=120_000)
    page.get_by_role("tab", name="Chat").click()
    _replied(page, **{"max-new-tokens": 4})
    page_timers_run(page, 300)  # keys.js's look at the tables (100 ms after the reply's last change) ran while hidden
    page.get_by_role("tab", name="Teach").click()
    page.wait_for_selector("#step-view .teach-table[tabindex='0']", timeout=15_000)
    assert_clean(page)
    page.close()
