"""Accessibility in a real browser: the keyboard, a screen reader's names, contrast on light and dark pages.

A reply's tokens are one Tab stop whose arrow keys step from token to token, showing and announcing each one's
kind, p and q; a slider, a check box, a radio, the prompt box, a number box and the preset list show a focus ring, the
Teach tab's text boxes the same one; faded and coloured text (a rejected draft, the Teach tab's verdicts, the prompt in
grey) keeps WCAG AA's 4.5:1 on both page themes. One served app, one browser.
"""

from __future__ import annotations

import pytest

from tests.helpers import require_browser, served_app, ui_config
from tools.screenshot import FINISHED, launch_chromium, run_prompt

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # drives Chromium on the served app

# the classes that colour or fade text, as the Chat and Teach tabs' renderers write them
SAMPLES = ('<div class="show-rejected"><span class="tok tok-rejected" id="s-rejected">rejected draft</span></div>'
           '<div class="teach-context"><span class="teach-prompt-text" id="s-prompt">the prompt</span></div>'
           '<table class="teach-table"><tr><td class="verdict-accepted" id="s-accepted">accepted</td>'
           '<td class="verdict-rejected" id="s-verdict-rejected">rejected</td>'
           '<td class="verdict-discarded" id="s-discarded">discarded</td>'
           '<td><span class="teach-unused" id="s-unused">(unused)</span></td></tr></table>'
           '<span class="specui-different" id="s-different">outputs differ</span>'
           '<span class="specui-error" id="s-error">error</span>')
# contrast of an element's text against what is behind it: backgrounds composited up the tree, opacity included
CONTRAST = """id => {
  const parse = c => { const v = c.match(/[\\d.]+/g).map(Number); return [v[0], v[1], v[2], v.length > 3 ? v[3] : 1]; };
  const over = (t, b) => [0, 1, 2].map(i => t[i] * t[3] + b[i] * (1 - t[3])).concat([1]);
  const lum = c => c.slice(0, 3).map(x => { x /= 255; return x <= 0.03928 ? x / 12.92 : ((x + 0.055) / 1.055) ** 2.4; })
    .reduce((s, x, i) => s + x * [0.2126, 0.7152, 0.0722][i], 0);
  const el = document.getElementById(id);
  const chain = []; let opacity = 1;
  for (let e = el; e; e = e.parentElement) {
    const s = getComputedStyle(e); chain.push(parse(s.backgroundColor)); opacity *= +s.opacity;
  }
  let bg = [255, 255, 255, 1]; for (const c of chain.reverse()) bg = over(c, bg);
  const fg = over(parse(getComputedStyle(el).color), bg);
  const text = over([...fg.slice(0, 3), opacity], bg);
  const [a, b] = [lum(text), lum(bg)]; return (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
}"""


@pytest.fixture(scope="module")
def app():
    require_browser()
    from playwright.sync_api import sync_playwright

    with served_app(ui_config()) as url, sync_playwright() as p:
        browser = launch_chromium(p)
        yield browser, url
        browser.close()


def _page(app, *, query: str = "", ready: str = "#prompt textarea"):
    """A new 1400 × 1000 page of the served app (`query`: e.g. ?__theme=dark), once `ready` shows."""
    browser, url = app
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(url + query)
    page.wait_for_selector(ready, timeout=60_000)
    return page


def test_a_reply_is_one_tab_stop_whose_arrow_keys_give_each_tokens_kind_p_and_q(app):
    page = _page(app)
    run_prompt(page, "def main(argv):\n")
    page.wait_for_function(FINISHED, timeout=120_000)
    block = page.locator("#chat .specui-text").last
    assert block.get_attribute("role") == "group" and "arrow keys" in block.get_attribute("title")
    assert page.locator("#chat .tok[tabindex='0']").count() == 0  # no tab stop per token
    block.focus()
    assert page.evaluate("() => document.activeElement.matches('#chat .specui-text')")
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowRight")
    focused = page.evaluate("() => [document.activeElement.className, document.activeElement.getAttribute('title')]")
    assert focused[0].startswith("tok ") and "p (target)" in focused[1]
    assert "p (target)" in page.locator(".specui-tip").inner_text()
    live = page.locator(".specui-sr-only[aria-live]").inner_text()
    assert "p (target)" in live and any(word in live for word in ("accepted", "resampled", "bonus"))
    assert page.evaluate("() => getComputedStyle(document.activeElement, null).outlineStyle") == "solid"
    page.keyboard.press("Escape")
    assert page.locator(".specui-tip").count() == 0
    assert page.evaluate("() => document.activeElement.matches('#chat .specui-text')")
    page.close()


def test_a_slider_a_check_box_and_a_radio_show_a_focus_ring(app):
    page = _page(app, ready="#adaptive-k input")
    for selector in ("#num-draft-tokens input[type=range]", "#adaptive-k input", "#drafter input"):
        page.locator(selector).first.focus()
        page.keyboard.press("Shift+Tab")  # arrive by the keyboard, as :focus-visible asks
        page.keyboard.press("Tab")
        ring = page.evaluate("() => { const e = document.activeElement, s = getComputedStyle(e); "
                             "return [e.matches(':focus-visible'), s.outlineStyle, s.outlineWidth] }")
        assert ring == [True, "solid", "2px"], (selector, ring)
    page.close()


def test_the_prompt_box_a_number_box_and_the_preset_list_show_a_focus_ring(app):
    """Gradio marked their focus by a pale border alone (1.8:1 against the page; a focus mark needs 3:1)."""
    page = _page(app)
    for selector in ("#prompt textarea", "#top-k input", "#max-new-tokens input[type=number]", "#preset input"):
        page.locator(selector).first.focus()
        page.keyboard.press("Shift+Tab")  # arrive by the keyboard
        page.keyboard.press("Tab")
        ring = page.evaluate("() => { const e = document.activeElement; "
                             "return [e.matches(':focus-visible'), getComputedStyle(e).boxShadow] }")
        assert ring == [True, "rgb(37, 99, 235) 0px 0px 0px 2px"], (selector, ring)  # Gradio: outline none !important
    page.close()


def test_the_teach_tabs_text_boxes_show_the_chat_tabs_focus_ring(app):
    """The Teach tab's prompt, seed and preset boxes had Gradio's pale border alone (1.8:1), the same focused or not."""
    page = _page(app, query="?tab=teach", ready="#teach-prompt textarea")
    for selector in ("#teach-prompt textarea", "#teach-seed input", "#teach-preset input"):
        page.locator(selector).focus()
        ring = page.evaluate("s => getComputedStyle(document.querySelector(s)).boxShadow", selector)
        assert ring == "rgb(37, 99, 235) 0px 0px 0px 2px", (selector, ring)
    page.close()


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_coloured_and_faded_text_keeps_aa_contrast(app, theme):
    page = _page(app, query="?__theme=dark" if theme == "dark" else "", ready="#legend")
    page.evaluate("html => { const d = document.createElement('div'); d.innerHTML = html; "
                  "document.querySelector('#legend').appendChild(d); }", SAMPLES)
    ids = ["s-rejected", "s-prompt", "s-accepted", "s-verdict-rejected", "s-discarded", "s-unused", "s-different",
           "s-error"]
    ratios = {i: round(page.evaluate(CONTRAST, i), 2) for i in ids}
    assert all(r >= 4.5 for r in ratios.values()), ratios
    page.close()


def test_every_chart_is_a_figure_named_by_its_title_and_axes(app):
    """Plotly's SVG reads as stray text; charts.js names each chart as a figure (its modebar stays reachable)."""
    page = _page(app, ready="#chat-tab .js-plotly-plot")
    named = ("() => { const plots = [...document.querySelectorAll('.js-plotly-plot')]; return plots.length > 0 && "
             "plots.every(p => p.getAttribute('role') === 'figure' && /^Chart/.test(p.getAttribute('aria-label'))); }")
    page.wait_for_function(named, timeout=10_000)
    labels = "() => [...document.querySelectorAll('#chat-tab .js-plotly-plot')].map(p => p.getAttribute('aria-label'))"
    before = page.evaluate(labels)  # empty: the title and what the chart will show
    assert "Chart: Tokens/s over time. Tokens so far ÷ engine time so far" in before[0], before
    run_prompt(page, "def main(argv):\n")
    page.wait_for_function(FINISHED, timeout=120_000)
    # redrawn with data: its axes too (a chart drawn a moment ago may wait a quarter second for its name)
    page.wait_for_function(f"() => ({labels})().some(label => (label || '').includes('x: round, y: acceptance'))",
                           timeout=10_000)
    page.close()
