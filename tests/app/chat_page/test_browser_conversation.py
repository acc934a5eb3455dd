"""A conversation in a real browser on the served app, on test_browser.py's page (conftest.py): a preset that fails
to load is a message and the app goes on, a prompt that goes on from the last one keeps its tokens, ↻ runs the last
message again and ↶ takes it back, a message waits while another visitor's run goes on and Stop cancels it, a
message goes to the Teach tab, and Clear (ours and the chat's own) starts a new conversation. Under CI=true a missing
browser is a failure, not a skip.
"""

from __future__ import annotations

import pytest

from tests.app.chat_page import PROMPT, run_prompt_done
from tools.screenshot import FINISHED, run_prompt, set_number

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # drives Chromium on the served app


def choose_preset(page, name):
    page.click("#preset input")
    page.locator("[role=option]", has_text=name).first.click()
    page.wait_for_function("n => document.querySelector('#preset input').value === n", arg=name, timeout=10_000)


def test_a_preset_that_fails_to_load_is_a_readable_message_and_the_app_keeps_serving(page):
    choose_preset(page, "broken")
    run_prompt(page, "x = 1")
    error = page.locator("#chat .specui-error").last.inner_text()
    assert "broken" in error and "no config.json" in error
    assert "Traceback" not in page.locator("#chat").inner_text()
    choose_preset(page, page.default_preset)
    set_number(page, "max-new-tokens", 8)
    run_prompt(page, "x = 1")
    assert page.locator("#chat .specui-out").last.locator(".tok").count() >= 1


def test_a_prompt_that_goes_on_reads_only_its_new_tokens(page):
    """The target's cache of the last request is kept (specui.prompt_cache): the stats line says how many of
    the prompt's tokens it held."""
    set_number(page, "max-new-tokens", 16)
    run_prompt(page, PROMPT)
    run_prompt(page, PROMPT + "    parser = argparse.ArgumentParser()\n")
    stats = page.locator("#stats").inner_text()
    assert "kept" in stats and "prompt" in stats, stats


def test_retry_runs_the_last_message_again_and_undo_gives_it_back_to_the_box(page):
    """↻ under the last reply runs its message again with the settings as they are now (here compare turned on:
    the race shows) in place of the old reply; ↶ takes the exchange out and puts its message back in the box."""
    set_number(page, "max-new-tokens", 16)
    run_prompt(page, PROMPT)
    shown = page.locator("#chat .specui-prompt").count()
    verdicts = page.locator("#chat .specui-verdict").count()  # the reply run again gets one: compare is on
    page.fill("#prompt textarea", "a message being typed")
    page.check("#compare input")
    page.locator("#chat button[aria-label='Retry']").click()
    page.wait_for_function("n => document.querySelectorAll('#chat .specui-verdict').length > n", arg=verdicts,
                           timeout=120_000)
    run_prompt_done(page)
    page.uncheck("#compare input")
    assert "identical output" in page.locator("#chat .specui-verdict").last.inner_text()
    assert page.locator("#chat .specui-prompt").count() == shown
    assert page.locator("#chat .specui-prompt").last.evaluate("e => e.textContent") == PROMPT
    assert page.input_value("#prompt textarea") == "a message being typed"
    page.locator("#chat button[aria-label='Undo']").click()
    page.wait_for_function("n => document.querySelectorAll('#chat .specui-prompt').length === n - 1", arg=shown,
                           timeout=10_000)
    assert page.input_value("#prompt textarea") == PROMPT


def test_a_message_sent_during_another_visitors_run_shows_at_once_and_stop_cancels_it(page):
    """One run at a time: a second visitor's message shows in the chat at once with a note that it waits, Send
    again is refused with a message, and Stop ends it before it starts, saying so at once; a message sent next, while
    the stopped one is still in the queue, waits its turn and is answered once the other visitor is gone."""
    other = page.context.browser.new_page()  # another visitor: a session of its own
    other.goto(page.url)
    other.wait_for_selector("#prompt textarea", timeout=60_000)
    set_number(other, "num-draft-tokens", 1)
    set_number(other, "max-new-tokens", 512)
    set_number(other, "temperature", 1.0)
    other.check("#arena input")
    other.check("#compare input")
    other.fill("#prompt textarea", PROMPT)
    other.click("#send")
    other.wait_for_selector("#chat .specui-caret", timeout=60_000)  # its run is under way
    set_number(page, "max-new-tokens", 8)
    page.fill("#prompt textarea", "x = 1")
    page.click("#send")
    page.wait_for_function("() => document.querySelector('#chat').innerText.includes('Waiting for the run in "
                           "progress')", timeout=10_000)
    page.click("#send")
    page.locator(".toast-body", has_text="still being answered").wait_for(timeout=10_000)
    page.click("#stop")  # at once, though the other visitor's run (an arena over 512 tokens) goes on
    page.wait_for_function("() => document.querySelector('#chat').innerText.includes('Stopped before it started')",
                           timeout=10_000)
    assert page.input_value("#prompt textarea") == "x = 1"
    # the next message, sent while the stopped one still holds its place in the queue, waits its turn too (under
    # gradio's default trigger mode its run was skipped, the stopped one's still pending: the page waited for ever)
    page.fill("#prompt textarea", "x = 2")
    page.click("#send")  # (the stopped message, never run, leaves the chat; its text stayed in the box to resend)
    page.wait_for_function("() => { const m = document.querySelectorAll('#chat [data-testid=bot]'); const p = document"
                           ".querySelectorAll('#chat .specui-prompt'); return p[p.length - 1]?.innerText === 'x = 2' &&"
                           " m[m.length - 1].innerText.includes('Waiting for the run in progress'); }", timeout=10_000)
    # the other visitor leaves (its session ends; its run ends or finishes) and the queue serves this page again. Its
    # page streams an arena over 512 tokens: on slow 2-core VMs its renderer took over 30 s, and once over 120 s, to
    # take a click on its Stop (Stop itself: test_stop_halts_a_long_run), so it is closed rather than stopped
    other.close()
    page.wait_for_function(FINISHED, timeout=240_000)
    assert page.locator("#chat .specui-out").last.locator(".tok").count() >= 1


def test_a_message_goes_to_the_teach_tab_to_be_stepped_through(page):
    """"Step through this message in the Teach tab": the Teach tab opens with the message and the chat's settings
    (K within its range, the confidence stop), and its Decode steps through it."""
    set_number(page, "num-draft-tokens", 3)
    set_number(page, "max-new-tokens", 16)
    confidence = page.locator("#draft-confidence input[type=number]").first.input_value()
    set_number(page, "draft-confidence", 0.4)
    run_prompt(page, PROMPT)
    page.click("#to-teach")
    page.wait_for_function("p => document.querySelector('#teach-prompt textarea')?.value === p", arg=PROMPT,
                           timeout=10_000)
    assert page.locator("#teach-tab").is_visible() and not page.locator("#chat").is_visible()
    page.wait_for_function("() => new URL(location.href).searchParams.get('tab') === 'teach'", timeout=5_000)
    assert page.locator("#teach-k input[type=number]").first.input_value() == "3"
    assert page.locator("#teach-max-new-tokens input[type=number]").first.input_value() == "16"
    assert page.locator("#teach-confidence input[type=number]").first.input_value() == "0.4"
    assert "press Decode" in page.locator("#step-status").inner_text()
    page.click("#step-start")
    page.wait_for_selector("#step-view .teach-step[data-round='1']", timeout=120_000)
    page.get_by_role("tab", name="Chat").click()
    page.wait_for_selector("#prompt textarea", state="visible", timeout=10_000)
    set_number(page, "draft-confidence", confidence)


def test_clear_empties_the_chat(page):
    page.click("#clear")
    page.wait_for_function("() => document.querySelectorAll('#chat .specui-prompt').length === 0", timeout=10_000)


def test_the_chats_own_clear_icon_starts_a_new_conversation_too(page):
    """The chat's 🗑 (gradio's own) empties the page's chat; the conversation must go with it, or the next message
    would bring the old exchange back (and a chat model would still read it)."""
    run_prompt(page, PROMPT)
    page.locator("#chat button[aria-label='Clear']").first.click()
    page.wait_for_function("() => document.querySelectorAll('#chat .specui-prompt').length === 0", timeout=10_000)
    run_prompt(page, "import os\n")
    assert page.locator("#chat .specui-prompt").count() == 1 and page.locator("#chat [data-testid=bot]").count() == 1
