"""The page's toasts show their message as text (`specui.ui.toasts`): gradio renders a toast's message as HTML, so
the app's warnings and refusals escape it, and none of its handlers calls gradio's toasts directly (the API's
errors go to a client, not a page, and keep their text as it is)."""

from __future__ import annotations

import re
import time

import pytest

from tests.helpers import ROOT, require_browser

INJECTION = 'a <b class="injected">bold</b> <img class="injected" src=x onerror="window.injected=1"> & more'


def test_no_handler_shows_a_toast_but_through_specui_ui_toasts():
    direct = [f"{path.name}:{n}" for path in sorted((ROOT / "specui" / "ui").glob("*.py"))
              if path.name not in ("toasts.py", "api.py")
              for n, line in enumerate(path.read_text().splitlines(), start=1)
              if re.search(r"\bgr\.(Warning|Error|Info)\(", line)]
    assert direct == []


def test_a_refusal_prints_no_traceback_and_escapes_its_message():
    from specui.ui.toasts import refusal

    error = refusal(INJECTION)
    assert error.print_exception is False and "<b" not in error.message and "&lt;b" in error.message


@pytest.mark.browser
@pytest.mark.slow
def test_a_toast_shows_markup_as_text_in_the_browser():
    require_browser()
    import gradio as gr
    from playwright.sync_api import sync_playwright

    from specui.ui.toasts import refusal, warn
    from tools.screenshot import free_port, launch_chromium

    def warned():
        warn(INJECTION)
        return "warned"

    def refused():
        raise refusal(INJECTION)

    with gr.Blocks() as demo:
        out = gr.Textbox(elem_id="out")
        gr.Button("warn", elem_id="warn").click(warned, None, out)
        gr.Button("refuse", elem_id="refuse").click(refused, None, out)
    demo.queue()
    port = free_port()
    demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True)
    try:
        with sync_playwright() as p:
            browser = launch_chromium(p)
            page = browser.new_page()
            page.goto(f"http://127.0.0.1:{port}/")
            page.click("#warn")
            page.click("#refuse")
            deadline = time.monotonic() + 30
            while page.get_by_text("bold", exact=False).count() < 2 and time.monotonic() < deadline:
                time.sleep(0.2)
            shown = page.locator("body").inner_text()
            assert shown.count('<img class="injected"') == 2, shown  # both toasts, as typed
            assert page.locator(".injected").count() == 0
            browser.close()
    finally:
        demo.close()
