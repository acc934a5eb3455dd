"""A real browser on the served app, on text as the Chat tab shows it: a right-to-left message (Hebrew, Arabic) reads
right to left, line by line, in the prompt box and in the chat, beside code that reads left to right."""

from __future__ import annotations

import pytest

from tests.helpers import require_browser, served_app, ui_config
from tools.screenshot import launch_chromium, open_page, run_prompt, set_number

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # drives Chromium on the served app

RTL = "שלום עולם?\nمرحبا بالعالم!\nx = 1"
# the left edges of each line's first and last characters, in the element's text node
EDGES = """e => { const node = e.firstChild, text = node.textContent, out = []; let start = 0;
  for (const line of text.split('\\n')) {
    const at = i => { const r = document.createRange(); r.setStart(node, i); r.setEnd(node, i + 1);
                      return r.getBoundingClientRect().left; };
    out.push({line, first: at(start), last: at(start + line.length - 1)}); start += line.length + 1; }
  return out; }"""


def test_a_right_to_left_message_reads_right_to_left_line_by_line():
    require_browser()
    from playwright.sync_api import sync_playwright

    with served_app(ui_config()) as url, sync_playwright() as p:
        browser = launch_chromium(p)
        page = open_page(browser, url)
        set_number(page, "max-new-tokens", 8)
        page.fill("#prompt textarea", RTL)
        # the box too: its lines take their direction from their own text
        assert page.eval_on_selector("#prompt textarea", "e => getComputedStyle(e).unicodeBidi") == "plaintext"
        run_prompt(page, RTL)
        hebrew, arabic, code = page.locator("#chat .specui-prompt").last.evaluate(EDGES)
        # right to left: the first letter at the right, the closing mark at the left
        assert hebrew["last"] < hebrew["first"] and arabic["last"] < arabic["first"], (hebrew, arabic)
        assert code["first"] < code["last"], code  # and code still left to right
        assert page.locator("#chat .specui-out .specui-text").last.evaluate(
            "e => getComputedStyle(e).unicodeBidi") == "plaintext"  # a reply's lines alike
        browser.close()
