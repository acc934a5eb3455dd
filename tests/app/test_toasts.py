"""The page's toasts show their message as text (`specui.ui.toasts`): gradio renders a toast's message as HTML, so
the app's warnings and refusals escape it, and none of its handlers calls gradio's toasts directly (the API's
errors go to a client, not a page, and keep their text as it is)."""

from __future__ import annotations

import re

import pytest

from tests.helpers import ROOT, require_browser, wait_until

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
    from tools.screenshot import NO_PROBE, free_port, launch_chromium

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
    demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True, **NO_PROBE)
    try:
        with sync_playwright() as p:
            browser = launch_chromium(p)
            page = browser.new_page()
            page.goto(f"http://127.0.0.1:{port}/")
            page.wait_for_selector("#warn", timeout=60_000)  # the page loaded (a busy machine: more than 30 s)
            page.click("#warn")
            page.click("#refuse")
            wait_until(lambda: page.get_by_text("bold", exact=False).count() >= 2, "both toasts", timeout_s=60,
                       pause=lambda s: page.wait_for_timeout(s * 1000))
            shown = page.locator("body").inner_text()
            assert shown.count('<img class="injected"') == 2, shown  # both toasts, as typed
            assert page.locator(".injected").count() == 0
            browser.close()
    finally:
        demo.close()


def test_calmly_tells_a_refusal_in_the_outputs_not_as_an_error():
    """A handler that raises puts all its event's outputs into gradio's red "Error" state; `calmly` turns its refusal
    into a warning toast and the outputs' own answer, for plain and streaming handlers alike (other errors stay)."""
    from specui.ui.toasts import calmly, refusal

    def refuses(data):
        raise refusal(f"no {data['x']}")

    def streams(data):
        yield {"out": 1}
        raise refusal("enough")

    def breaks(data):
        raise RuntimeError("a bug")

    def answer(text):
        return {"status": text}

    with pytest.warns(UserWarning, match="no &lt;b&gt;"):  # the toast's text escaped, the answer's as written
        assert calmly(refuses, answer)({"x": "<b>"}) == {"status": "no <b>"}
    with pytest.warns(UserWarning, match="enough"):
        assert list(calmly(streams, answer)({})) == [{"out": 1}, {"status": "enough"}]
    with pytest.raises(RuntimeError):
        calmly(breaks, answer)({})


def test_a_refusal_leaves_no_red_error_state_over_the_page():
    """The chat's Send, Shift+Enter and ↻ refuse an empty prompt or a message while one is answered: their status
    goes to a State, not the chatbot (gradio's error state would cover the conversation); the Teach tab's Decode
    refuses an empty prompt in its status line."""
    import gradio as gr

    from specui.ui.blocks import build
    from tests.helpers import ui_config

    demo = build(ui_config(), preload=False)
    by_id = {getattr(b, "elem_id", None): b for b in demo.blocks.values()}

    def event(elem_id, name):
        return next(f for f in demo.fns.values() if (by_id[elem_id]._id, name) in f.targets)

    for elem_id, name in (("send", "click"), ("prompt", "submit"), ("chat", "retry")):
        shown_on = event(elem_id, name).show_progress_on
        assert shown_on and all(isinstance(c, gr.State) for c in shown_on), (elem_id, shown_on)
    decode = event("step-start", "click")
    data = {c: c.value for c in decode.inputs} | {by_id["teach-prompt"]: "  "}
    with pytest.warns(UserWarning, match="Type a prompt first"):
        out = decode.fn(data)
    assert list(out) == [by_id["step-status"]] and out[by_id["step-status"]] == "⚠ Not decoded: Type a prompt first."


def test_a_negative_top_k_is_refused_by_name_not_by_gradio():
    """gradio's Number(minimum=0) refused top-k -5 before the app saw it: a toast that named no field ("Value -5 is
    less than minimum value 0.") and a traceback on the server. The app's own check names it."""
    from specui.ui.blocks import build
    from specui.ui.request import Settings, SettingsError
    from tests.helpers import ui_config

    demo = build(ui_config(), preload=False)
    top_k = next(b for b in demo.blocks.values() if getattr(b, "elem_id", None) == "top-k")
    assert top_k.preprocess(-5) == -5
    with pytest.raises(SettingsError, match="top k must be a whole number from 0"):
        Settings.from_ui(num_draft_tokens=4, max_new_tokens=8, top_k=-5)
