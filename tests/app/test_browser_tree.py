"""A real browser on the served app with token trees: tree width 2 and a repetition penalty, a run compared with
plain decoding (identical), then the Token trees panel lists the tree rounds and draws one (plotly points for its
nodes), a model's text staying text."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import require_browser, served_app, ui_config
from tools.screenshot import launch_chromium, run_prompt, set_number

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # drives Chromium on the served app


def test_a_tree_run_fills_the_tree_view():
    require_browser()
    from playwright.sync_api import sync_playwright

    with served_app(ui_config()) as url, sync_playwright() as p:
        browser = launch_chromium(p)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        dialogs = []
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        page.goto(url)
        page.wait_for_selector("#prompt textarea", timeout=60_000)
        set_number(page, "max-new-tokens", 16)
        set_number(page, "tree-width", 2)
        set_number(page, "repetition-penalty", 1.3)  # each tree row penalised by its own ancestors
        page.check("#compare input")
        run_prompt(page, "def main(argv):\n")
        assert "identical output" in page.locator("#chat .specui-verdict").last.inner_text()
        with page.expect_download() as download:
            page.locator("#chat-export a").first.click()
        settings = json.loads(Path(download.value.path()).read_text(encoding="utf-8"))["settings"]
        assert settings["repetition_penalty"] == 1.3 and settings["tree_width"] == 2  # the sliders reached the run
        page.locator("#tree-view").get_by_text("Token trees: a tree round").first.click()  # open the accordion
        page.wait_for_function("() => /tree rounds/.test(document.querySelector('#tree-note')?.textContent || '')",
                               timeout=30_000)
        page.wait_for_selector("#chart-tree .scatterlayer .point", timeout=30_000)
        assert page.locator("#chart-tree .scatterlayer .point").count() >= 3  # the root, nodes, the own token
        assert "Round" in page.locator("#chart-tree .gtitle").text_content()
        page.click("#tree-round input")
        assert page.locator("[role=option]").count() >= 1
        assert not dialogs
        browser.close()
