"""A ZeroGPU Space's bounded queue (blocks.ZERO_GPU_QUEUE_SIZE) full when a chat message's run asks for its place:
the message had shown (Send's first step runs at once), its run was refused ("This application is currently busy"),
and the session stayed "still being answered" for good."""

from __future__ import annotations

import json
import urllib.request

import pytest

from tests.helpers import require_browser, served_app, ui_config, wait_until
from tools.screenshot import FINISHED, launch_chromium, set_number

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # drives Chromium on the served app


def test_a_message_whose_run_the_full_queue_refused_leaves_the_session_free(monkeypatch):
    """A run in flight, a visitor's Send shows their message, and before its run joins the queue another event fills
    it (here a size of 1 and an API call; on a Space, 64 waiting): the run is refused, so it never ends the wait Send
    recorded. The visitor's next Send was refused ("Your last message is still being answered") until Stop, and after
    Stop the next message was taken for the refused one ("Stopped before it started") and stuck again."""
    require_browser()
    gradio_client = pytest.importorskip("gradio_client")
    from playwright.sync_api import sync_playwright

    from specui.loading import PairCache
    from specui.ui import blocks
    from specui.ui.session import Showcase

    monkeypatch.setenv("SPACES_ZERO_GPU", "true")
    monkeypatch.setattr(blocks, "ZERO_GPU_QUEUE_SIZE", 1)
    config = ui_config()
    showcase = Showcase(config, PairCache())
    lock = showcase.lock(config.default)  # held: a run in flight stays in flight
    with served_app(config, showcase=showcase) as url, sync_playwright() as p:
        deps = json.load(urllib.request.urlopen(url + "config"))["dependencies"]
        chat_run = next(d["id"] for d in deps if d.get("api_name") == "chat")
        client = gradio_client.Client(url, verbose=False)
        browser = launch_chromium(p)
        held = []

        def hold_the_run(route):  # the run's request to join the queue, held until the queue is full
            if not held and (route.request.post_data_json or {}).get("fn_index") == chat_run:
                held.append(route)
            else:
                route.continue_()

        try:
            page = browser.new_page()
            page.goto(url)
            page.wait_for_selector("#prompt textarea", timeout=60_000)
            set_number(page, "max-new-tokens", 4)
            lock.acquire()
            first = client.submit("def main(argv):", max_new_tokens=4, api_name="/generate")  # in flight
            wait_until(lambda: showcase.live > 0, "the API's run to start")
            page.route("**/queue/join*", hold_the_run)
            page.fill("#prompt textarea", "import os\n")
            page.click("#send")
            page.wait_for_selector("#chat .specui-prompt")  # Send's first step: the message shows
            wait_until(lambda: held, "the page's run to ask to join the queue",
                       pause=lambda s: page.wait_for_timeout(s * 1000))  # playwright routes requests meanwhile
            second = client.submit("def main(argv):", max_new_tokens=4, api_name="/generate")  # waits: the queue full
            wait_until(lambda: str(second.status().code) == "Status.IN_QUEUE", "the second call to wait in the queue")
            held[0].continue_()  # refused: "This application is currently busy"
            page.wait_for_selector("text=This application is currently busy", timeout=30_000)
            page.unroute("**/queue/join*")
            lock.release()
            first.result(timeout=120), second.result(timeout=120)
            # the refused message says it did not run, and the next Send runs
            assert "did not run" in page.locator("#chat [data-testid=bot]").last.text_content()
            page.fill("#prompt textarea", "import sys\n")
            page.click("#send")  # the chat shows the conversation its state holds: this message, not the refused one
            page.wait_for_function("() => [...document.querySelectorAll('#chat .specui-prompt')].map(e => "
                                   "e.textContent).join() === 'import sys\\n'", timeout=30_000)
            page.wait_for_function(FINISHED, timeout=60_000)
            assert page.locator("#chat .specui-out").count() == 1
            assert "still being answered" not in page.locator("body").inner_text()  # the page as shown, not its scripts
        finally:
            if lock.locked():
                lock.release()
            browser.close()
