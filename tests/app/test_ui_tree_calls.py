"""The Chat tab's tree view after a run sends no call for nothing: the round picker's change fires for a value the
server sets too, and each call redrew the figure that the run's answer had just drawn. After a run the picker keeps
the round on show where the new run has it (no change, no call); where the page showed no tree, the answer leaves the
figure to the picker's change, which draws it once."""

from __future__ import annotations

import pytest

from specui.ui import chat_tree
from specui.ui.blocks import chat_tab
from tests.app.test_ui_tree import record
from tests.helpers import ui_config


@pytest.fixture(scope="module")
def view():
    import gradio as gr

    with gr.Blocks():
        return chat_tab(ui_config()).tree


def test_after_a_run_the_round_on_show_stays_and_the_figure_comes_once(view):
    trees = {i: record(round_index=i) for i in range(3)}
    kept = chat_tree.after_run(view, trees, 2)  # round 3 on show, and the new run has one: no change, no call
    assert kept[view.pick]["value"] == kept[view.shown] == 2 and kept[view.plot].layout.title.text.startswith("Round 3")
    gone = chat_tree.after_run(view, trees, 7)  # the round on show is gone: the first, drawn in the answer too (a
    assert gone[view.pick]["value"] == gone[view.shown] == 0  # round might have been picked while the run went on)
    assert gone[view.plot].layout.title.text.startswith("Round 1")
    first = chat_tree.after_run(view, trees, None)  # no tree on show: the picker's change draws the first round
    assert first[view.pick]["value"] == first[view.shown] == 0 and view.plot not in first
    empty = chat_tree.after_run(view, {}, None)  # no tree rounds: the value stays None, the empty view drawn here
    assert empty[view.pick]["value"] is None and not empty[view.plot].data
    gone = chat_tree.after_run(view, {}, 2)  # from a round to none: the picker's change draws the empty view
    assert gone[view.pick]["value"] is gone[view.shown] is None and view.plot not in gone
    assert chat_tree.after_run(view, trees)[view.plot].layout.title.text.startswith("Round 1")  # the page's unknown


@pytest.mark.browser
@pytest.mark.slow  # drives Chromium on the served app
def test_a_run_after_a_picked_round_keeps_it_and_calls_nothing(monkeypatch):
    from playwright.sync_api import sync_playwright

    from tests.gradio_calls import wait_quiet
    from tests.helpers import open_page, require_browser, served_app
    from tools.screenshot import launch_chromium, run_prompt, set_number

    require_browser()
    drawn = []  # the rounds the picker's change drew (the served app's calls of chat_tree.show)
    real = chat_tree.show
    monkeypatch.setattr(chat_tree, "show", lambda trees, index: drawn.append(index) or real(trees, index))
    with served_app(ui_config()) as url, sync_playwright() as p:
        browser = launch_chromium(p)
        page = open_page(browser, url, tracked=True, viewport={"width": 1400, "height": 1000})
        set_number(page, "max-new-tokens", 16)
        set_number(page, "tree-width", 2)
        page.locator("#tree-view").get_by_text("Token trees: a tree round, node by node").click()
        run_prompt(page, "def main(argv):\n")  # greedy: the same tree rounds each time
        # the figure is the picker's change's to draw (the answer leaves it out): waited for, as the page may send
        # that call after a quiet spell of wait_quiet's on a loaded machine (rendering the answer first)
        page.wait_for_selector("#chart-tree .scatterlayer .point", timeout=120_000)
        wait_quiet(page)
        assert drawn == [0]  # no tree on show before: the picker's change drew round 1, once
        page.locator("#tree-round input").focus()
        page.keyboard.press("ArrowDown")
        page.keyboard.press("Enter")  # round 2, by the keys
        page.wait_for_function("() => /^Round 2/.test(document.querySelector('#chart-tree .gtitle')?.textContent)",
                               timeout=120_000)
        wait_quiet(page)
        assert drawn == [0, 1]
        run_prompt(page, "def main(argv):\n")
        wait_quiet(page)
        assert drawn == [0, 1], drawn  # the run's answer drew round 2 of its own trees; the picker kept it: no call
        assert page.locator("#tree-round input").input_value().startswith("round 2 ")
        assert page.locator("#chart-tree .gtitle").text_content().startswith("Round 2")
        set_number(page, "tree-width", 1)  # a chain: no tree rounds, and the picker's change draws the empty view
        run_prompt(page, "def main(argv):\n")
        page.wait_for_function("() => !document.querySelector('#chart-tree .scatterlayer .point')",
                               timeout=120_000)  # the change's call drew it (the answer left it out), waited for
        wait_quiet(page)
        assert drawn == [0, 1, None], drawn
        browser.close()
