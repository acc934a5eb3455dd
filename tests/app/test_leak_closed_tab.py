"""Tabs closed while their work is unfinished, on the served app in a real Chromium: what the server recorded for them
(a message's wait for its turn, `chat_handlers.Stops`) must go with them, or it outlives them for good and every
later visitor pays for it."""

from __future__ import annotations

import json
import threading
import time
import urllib.request

import pytest

from tests.helpers import require_browser, served_app, ui_config, wait_until
from tools.screenshot import FINISHED, launch_chromium, open_page, set_number

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # drives Chromium on the served app

WAITING = "Waiting for the run in progress"


def queued(url: str) -> int:
    """The events waiting for their turn in the server's queue."""
    return json.load(urllib.request.urlopen(url + "gradio_api/queue/status"))["queue_size"]


def test_a_tab_closed_while_its_message_waits_leaves_no_wait_behind():
    """A run in flight, a visitor's message waits behind it, and they close the tab: gradio drops the queued run, so
    it never ended the wait that Send recorded. From then on every visitor's message said "Waiting for the run in
    progress to finish" though nothing ran, and Stop and Clear were no help (the wait was another session's)."""
    require_browser()
    gradio_client = pytest.importorskip("gradio_client")
    from playwright.sync_api import sync_playwright

    from specui.loading import PairCache
    from specui.ui.session import Showcase

    config = ui_config()
    showcase = Showcase(config, PairCache())
    lock = showcase.lock(config.default)  # held: a run in flight stays in flight
    left, forget = threading.Event(), showcase.forget

    def forgotten(key):  # blocks.py's `left` (a page's unload) ends the page's waits, then forgets its caches
        forget(key)
        left.set()

    showcase.forget = forgotten
    with served_app(config, showcase=showcase) as url, sync_playwright() as p:
        client = gradio_client.Client(url, verbose=False)
        client.predict("def main(argv):", max_new_tokens=4, api_name="/generate")  # the pair loaded and warm
        browser = launch_chromium(p)
        try:
            gone = open_page(browser, url)
            lock.acquire()
            first = client.submit("def main(argv):", max_new_tokens=4, api_name="/generate")  # in flight
            wait_until(lambda: showcase.live > 0, "the API's run to start")
            gone.fill("#prompt textarea", "import os\n")
            gone.click("#send")
            gone.wait_for_selector(f"#chat >> text={WAITING}")
            wait_until(lambda: queued(url) > 0, "the closing tab's run to join the queue")  # its run waits there
            left.clear()  # from here: the unload of the tab closed next
            gone.close()
            wait_until(lambda: queued(url) == 0, "gradio to drop the closed tab's run from the queue")
            lock.release()
            first.result(timeout=120)
            assert left.wait(120), "the closed tab's unload (blocks.py's `left`) never ran"

            page = open_page(browser, url)
            set_number(page, "max-new-tokens", 8)
            lock.acquire()  # nothing runs, but the next run holds on its first round, so its note stays in view
            page.fill("#prompt textarea", "import sys\n")
            page.click("#send")
            page.wait_for_selector("#chat .specui-prompt")
            wait_until(lambda: showcase.live > 0, "the run to start")  # it waits for the lock: the note as Send left it
            note = page.locator("#chat [data-testid=bot]").last.text_content()
            lock.release()
            page.wait_for_function(FINISHED, timeout=60_000)
            assert WAITING not in note, note
        finally:
            if lock.locked():
                lock.release()
            browser.close()


def test_the_conversation_caches_of_closed_tabs_go_with_them():
    """Each message keeps its conversation's target cache for the next turn (`cache_pool.PromptCaches`), the pool
    bounded by a memory budget only (a quarter of the machine's). A closed tab's conversation no page shows any more,
    yet its caches stayed until newer ones pushed them out: a day of visitors filled the whole budget (the bundled
    pair: 6 MB a message; the chat model's many more). The API's runs, which no tab owns, keep theirs."""
    require_browser()
    gradio_client = pytest.importorskip("gradio_client")
    from playwright.sync_api import sync_playwright

    from specui.loading import PairCache
    from specui.ui.session import Showcase

    config = ui_config()
    cache = PairCache()
    showcase = Showcase(config, cache)
    with served_app(config, showcase=showcase) as url, sync_playwright() as p:
        gradio_client.Client(url, verbose=False).predict("def main(argv):", max_new_tokens=4, api_name="/generate")
        pool = cache.get(config.get(None)).conversations
        browser = launch_chromium(p)
        try:
            pages = [open_page(browser, url) for _ in range(3)]
            for visitor, page in enumerate(pages):
                set_number(page, "max-new-tokens", 8)
                for turn in range(2):
                    page.fill("#prompt textarea", f"def visitor_{visitor}_turn_{turn}(x):")
                    page.click("#send")
                    page.wait_for_function(f"() => document.querySelectorAll('#chat .specui-prompt').length === "
                                           f"{turn + 1}")
                    page.wait_for_function(FINISHED, timeout=60_000)
            assert len({c.owner for c in pool.caches} - {None}) == 3  # each visitor's conversation kept
            for page in pages:
                page.close()
            deadline = time.monotonic() + 30
            while any(c.owner is not None for c in pool.caches):  # each tab's unload has had its turn
                if time.monotonic() > deadline:
                    break
                time.sleep(0.1)
            assert [c.owner for c in pool.caches if c.owner is not None] == []
            assert [c.owner for c in pool.caches] == [None]  # the API's
        finally:
            browser.close()
