"""A new visitor's first screens, in Chromium on the served app (what a layout is, only a browser tells): the Chat
tab's prompt box and Send show without scrolling at 1280 × 800, the prompt box on a phone (the empty chat, 460 px high,
had pushed them below the screen's edge), and the chat takes its full height once it has a message; the Teach tab
shows no empty export box before a run (Gradio's empty file frame, about 200 px of dashed border around an icon), and
shows the export once a run has given one.

One served app (the UI tests' bundled pair, a few tokens a run) and one browser for the module."""

from __future__ import annotations

import pytest

from tests.helpers import open_page, served_browser, ui_config, wait_at_rest
from tools.screenshot import run_prompt, set_number

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # drives Chromium on the served app

BOX = "s => { const r = document.querySelector(s).getBoundingClientRect(); return {top: r.top, bottom: r.bottom}; }"


@pytest.fixture(scope="module")
def served():
    with served_browser(ui_config()) as (browser, url):
        yield browser, url


@pytest.mark.parametrize("viewport", [(1280, 800), (390, 844)])
def test_the_first_screen_shows_the_prompt_box_and_send(served, viewport):
    browser, url = served
    width, height = viewport
    page = open_page(browser, url, viewport={"width": width, "height": height})
    try:
        wait_at_rest(page)
        send, prompt = page.evaluate(BOX, "#send"), page.evaluate(BOX, "#prompt textarea")
        assert 0 <= prompt["top"] and prompt["top"] + 60 <= height, prompt  # where to type, without scrolling
        if width > 1000:  # and Send beside it; then a message: the chat takes its full height
            assert send["bottom"] <= height, send
            set_number(page, "max-new-tokens", 8)
            run_prompt(page, "import os\n")
            chat = page.evaluate(BOX, "#chat")
            assert chat["bottom"] - chat["top"] >= 400, chat
    finally:
        page.context.close()


def test_the_teach_tab_shows_its_export_only_once_a_run_gives_one(served):
    browser, url = served
    page = open_page(browser, url + "?tab=teach", ready="#teach-prompt textarea",
                     viewport={"width": 1280, "height": 800})
    try:
        wait_at_rest(page)
        assert page.locator("#teach-export").is_hidden()  # no empty file box under "No run yet."
        set_number(page, "teach-max-new-tokens", 8)
        page.click("#step-start")
        page.wait_for_selector("#teach-export a", timeout=120_000)
        assert page.locator("#teach-export").is_visible() and ".json" in page.locator("#teach-export").inner_text()
    finally:
        page.context.close()


RING = "s => getComputedStyle(document.querySelector(s)).boxShadow"


def test_the_teach_tabs_text_boxes_show_their_focus_as_the_chat_tabs_do(served):
    """A focused text box gets the page's 2 px ring in both tabs: the Teach tab's prompt, seed and preset boxes had
    Gradio's pale border alone (1.8:1), the same focused or not."""
    browser, url = served
    page = open_page(browser, url + "?tab=teach", ready="#teach-prompt textarea",
                     viewport={"width": 1280, "height": 800})
    try:
        for box in ("#teach-prompt textarea", "#teach-seed input", "#teach-preset input", "#prompt textarea"):
            if box == "#prompt textarea":
                page.get_by_role("tab", name="Chat").click()
            page.locator(box).focus()
            assert "rgb(37, 99, 235) 0px 0px 0px 2px" in page.evaluate(RING, box), box
    finally:
        page.context.close()


# where the picked round's label ends (its text measured in the box's font) and where the list's arrow begins: Gradio
# lays the arrow over the box's right end, so a label under it was cut short with no overflow the box could tell
TEXT_END = """() => { const e = document.querySelector('#tree-step-round input'); const cs = getComputedStyle(e);
    const c = document.createElement('canvas').getContext('2d'); c.font = cs.font;
    return e.getBoundingClientRect().left + parseFloat(cs.paddingLeft) + c.measureText(e.value).width; }"""
ARROW = "() => document.querySelector('#tree-step-round .icon-wrap').getBoundingClientRect().left"


def test_the_teach_trees_round_list_shows_its_whole_label(served):
    """The Teach tab's token-tree section: the picked round's label ("round 1 · 9 nodes · 2 accepted + bonus") fits
    its list, where the list, half of a row shared with Decode with a tree, cut it short under its arrow."""
    browser, url = served
    page = open_page(browser, url + "?tab=teach", ready="#teach-prompt textarea",
                     viewport={"width": 1280, "height": 800})
    try:
        set_number(page, "teach-max-new-tokens", 8)
        page.locator("#teach-tree button").first.click()  # the section opens
        set_number(page, "tree-step-nodes", 9)
        page.click("#tree-step-start")
        page.wait_for_function("() => /^round 1 /.test(document.querySelector('#tree-step-round input').value)",
                               timeout=120_000)
        assert page.evaluate(TEXT_END) <= page.evaluate(ARROW), page.locator("#tree-step-round input").input_value()
    finally:
        page.context.close()
