"""A real browser on the served app, on the Chat tab's settings and modes: a number typed into a slider's box shows the
value the run takes once it is committed (Enter, or leaving the box), within the slider's range and on its step; a
message refused at its turn leaves the session free for the next one."""

from __future__ import annotations

import pytest

from tools.screenshot import run_prompt

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # drives Chromium on the served app


def typed(page, elem_id: str, value, shows: str, *, enter: bool = True) -> None:
    """Type `value` into a number box, commit it (Enter, or a click elsewhere), and wait until the box `shows` it
    (blocks.settled's js puts it on the slider's grid a moment after)."""
    box = page.locator(f"#{elem_id} input[type=number]").first
    box.fill(str(value))
    if enter:
        box.press("Enter")
    else:
        page.click("#prompt textarea")
    try:
        page.wait_for_function("([box, shows]) => box.value === shows", arg=[box.element_handle(), shows],
                               timeout=30_000)
    except Exception as e:
        raise AssertionError(f"#{elem_id}: {value} typed shows {box.input_value()!r}, not {shows!r}") from e


def test_a_typed_number_shows_the_value_the_run_takes_and_a_refusal_leaves_send_free(fresh_page):
    from playwright.sync_api import expect

    page = fresh_page  # a session of its own on the folder's server (conftest.py)
    # gradio kept 999 in the box after Enter (the slider at 64), and 2.5, 13 or 0.33 off the slider's step
    typed(page, "num-draft-tokens", 999, "64")
    expect(page.locator("#num-draft-tokens input[type=range]")).to_have_value("64", timeout=30_000)
    typed(page, "num-draft-tokens", 2.5, "3", enter=False)
    typed(page, "max-new-tokens", 13, "16")
    typed(page, "temperature", 0.33, "0.35")
    typed(page, "temperature", 0, "0")
    typed(page, "top-k", -5, "0")
    typed(page, "seed", 2.5, "3")
    typed(page, "tree-nodes", 4, "4")  # a dynamic tree needs tree width 2: refused when its turn comes
    run_prompt(page, "def main(argv):\n")
    assert "tree" in page.locator("#chat .specui-error").last.inner_text()
    typed(page, "tree-nodes", 0, "0")
    run_prompt(page, "import os\n")  # was refused as "still being answered" until Stop was pressed
    assert page.locator("#chat .specui-out").count() >= 1
    assert "K=3" in page.locator("#stats").inner_text()  # the K the box showed
