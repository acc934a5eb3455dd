"""A real browser on the served app: a refused request says why (a toast, a line in the panel) and leaves the page
as it was, with no gradio "Error" badge over the conversation or the Teach tab's panels (a handler that raises puts
its event's outputs into that state, which hid the whole conversation behind it)."""

from __future__ import annotations

import pytest

from tools.screenshot import run_prompt, set_number

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # drives Chromium on the served app


def test_a_refusal_leaves_the_conversation_and_the_panels_in_view(fresh_page):
    page = fresh_page  # a session of its own on the folder's server (conftest.py)
    set_number(page, "max-new-tokens", 8)
    run_prompt(page, "def main(argv):\n")
    page.fill("#prompt textarea", "   ")
    page.click("#send")  # nothing to send: refused
    page.locator(".toast-body", has_text="Type a prompt first").wait_for(timeout=10_000)
    assert page.locator("#chat .error").count() == 0
    assert page.locator("#chat .specui-prompt").first.is_visible()  # the conversation still shows
    page.get_by_role("tab", name="Teach").click()
    page.locator("#teach-drafter").get_by_text("prompt lookup", exact=True).click()
    page.locator("#teach-tree").get_by_text("Token trees: a tree round, node by node").click()  # the Teach tab's
    page.click("#tree-step-start")  # prompt lookup drafts no trees: refused
    page.wait_for_function("() => /Not decoded/.test(document.querySelector('#tree-step-status')?.textContent)",
                           timeout=60_000)
    assert "cannot draft trees" in page.locator("#tree-step-status").inner_text()
    assert "Decode with a tree" in page.locator("#tree-step-view").inner_text()  # as it was
    page.fill("#teach-prompt textarea", "")
    page.click("#step-start")
    page.wait_for_function("() => /Not decoded/.test(document.querySelector('#step-status')?.textContent)",
                           timeout=30_000)
    assert page.locator("#teach-tab .error").count() == 0 and page.locator("#chat .error").count() == 0
