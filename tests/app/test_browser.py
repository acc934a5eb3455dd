"""A real browser on the served app: Python playwright driving Debian's Chromium (never `playwright install`).

It types a prompt and sees coloured tokens stream and the charts draw, turns compare on and sees the
speedup and the identical-output check, runs the drafter arena and sees its table, chart and who proposed
each token, stops a long run, sends an HTML-injection string and sees it as text (no element, no dialog),
sees a prompt that goes on from the last one keep its tokens, runs the last message again (↻) and takes it
back (↶), sends a message while another visitor's run goes on, and takes a message to the Teach tab. Under
CI=true a missing browser is a failure, not a skip.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.helpers import require_browser, served_app, ui_config
from tools.screenshot import FINISHED, launch_chromium, run_prompt, set_number

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # drives Chromium on the served app

INJECTION, PROMPT = "<img src=x onerror=alert(1)>", "import os\nimport sys\n\n\ndef main(argv):\n"
EMITTED = "#chat .tok-accepted, #chat .tok-resampled, #chat .tok-bonus"


def run_prompt_done(page):
    """Wait until the last reply has no caret (the run finished); say what the page shows if it never does."""
    try:
        page.wait_for_function(FINISHED, timeout=120_000)
    except Exception as e:
        raise AssertionError(f"the run did not finish: chat={page.locator('#chat').inner_text()[-500:]!r} "
                             f"stats={page.locator('#stats').inner_text()!r}") from e


def choose_preset(page, name):
    page.click("#preset input")
    page.locator("[role=option]", has_text=name).first.click()
    page.wait_for_function("n => document.querySelector('#preset input').value === n", arg=name, timeout=10_000)


@pytest.fixture(scope="module")
def page():
    require_browser()
    from playwright.sync_api import sync_playwright

    config = ui_config(with_broken=True)
    with served_app(config) as url, sync_playwright() as p:
        browser = launch_chromium(p)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.default_preset = config.default
        page.dialogs = []
        page.on("dialog", lambda d: (page.dialogs.append(d.message), d.dismiss()))
        page.goto(url)
        page.wait_for_selector("#prompt textarea", timeout=60_000)
        yield page
        browser.close()


def test_tokens_stream_coloured_with_tooltips_and_the_charts_draw(page):
    # K = 1 and 512 tokens: about two seconds of streaming, long enough to be seen on a busy machine (at the
    # preset's K = 7 the stdlib pair wrote 400 tokens in under a second, and a loaded CI once saw none stream)
    k = page.locator("#num-draft-tokens input[type=number]").first.input_value()
    set_number(page, "num-draft-tokens", 1)
    set_number(page, "max-new-tokens", 512)
    # record every state of the chat in which coloured tokens show inside the block whose drawn caret says it streams
    page.evaluate("""sel => { const streamed = window.streamed = [];
        new MutationObserver(() => {
            const n = document.querySelectorAll(sel).length, c = document.querySelector('#chat .specui-caret');
            if (n && c?.querySelector('.tok') && getComputedStyle(c, '::after').content !== 'none') streamed.push(n);
        }).observe(document.querySelector('#chat'), {subtree: true, childList: true, characterData: true}); }""",
                  EMITTED)
    page.fill("#prompt textarea", PROMPT)
    page.click("#send")
    run_prompt_done(page)
    set_number(page, "num-draft-tokens", k)
    assert page.evaluate("window.streamed.length") > 0, "no token was shown before the run finished"
    token = page.locator(EMITTED).filter(visible=True).first  # one there: window.streamed counted them
    token.hover()  # tokens.js writes the title out from the span's short value
    title = token.get_attribute("title")
    assert "p (target) =" in title and "q (draft) =" in title and "accept prob" in title
    text = page.locator("#chat .specui-out .specui-text").last
    assert text.evaluate("e => getComputedStyle(e).whiteSpace") == "pre-wrap"
    assert page.locator("#chat .specui-prompt").last.evaluate("e => e.textContent") == PROMPT  # newlines kept
    stats = page.locator("#stats").inner_text()
    assert "acceptance rate" in stats and "tokens/s" in stats and "theoretical speedup" in stats
    for chart in ("chart-speed", "chart-acceptance", "chart-tokens-per-round", "chart-position"):
        page.wait_for_selector(f"#{chart} .js-plotly-plot", timeout=30_000)
    assert page.locator("#chart-speed .scatterlayer .trace").count() >= 1
    assert page.locator("#chart-acceptance .barlayer .trace, #chart-acceptance .scatterlayer .trace").count() >= 1


def test_a_tapped_token_shows_its_p_and_q_beside_it(page):
    """Touch screens have no hover: a click on a token shows its title (p, q, acceptance probability) in a box
    next to it, as text; Escape, or a click elsewhere, closes it."""
    if not page.locator(EMITTED).count():
        run_prompt(page, PROMPT)
    token = page.locator(EMITTED).filter(visible=True).filter(has_text=re.compile(r"\w")).first
    token.click()
    tip = page.locator(".specui-tip")
    tip.wait_for(timeout=5_000)
    assert tip.inner_text().split("\n") == token.get_attribute("title").split(" · ") and "p (target) =" in tip.inner_text()
    box, spot = tip.bounding_box(), token.bounding_box()
    assert abs(box["y"] - (spot["y"] + spot["height"])) < 40 or box["y"] + box["height"] <= spot["y"] + 1  # beside it
    page.keyboard.press("Escape")
    assert tip.count() == 0
    token.click()
    page.click("#stats")
    assert page.locator(".specui-tip").count() == 0


def test_shift_enter_sends_and_enter_starts_a_new_line(page):
    """The prompt box holds code, so Enter is a new line; Shift+Enter sends, as the placeholder says."""
    assert "Shift+Enter" in page.get_attribute("#prompt textarea", "placeholder")
    set_number(page, "max-new-tokens", 8)
    before = page.locator("#chat .specui-prompt").count()
    page.fill("#prompt textarea", "x = 1")
    page.press("#prompt textarea", "Enter")
    assert page.input_value("#prompt textarea") == "x = 1\n"
    page.press("#prompt textarea", "Shift+Enter")
    page.wait_for_function("n => document.querySelectorAll('#chat .specui-prompt').length > n", arg=before,
                           timeout=60_000)
    run_prompt_done(page)
    assert page.locator("#chat .specui-prompt").last.evaluate("e => e.textContent") == "x = 1\n"


def test_token_kinds_differ_by_more_than_colour_and_read_on_a_dark_page(page):
    """Resampled and bonus tokens carry a line (solid, dotted) that accepted ones lack: red and green alone look
    alike to many colour-blind readers."""
    def line(kind: str) -> str:
        return page.locator(f"#legend .tok-{kind}").evaluate(
            "e => getComputedStyle(e).textDecorationLine + ' ' + getComputedStyle(e).textDecorationStyle")

    assert line("accepted").startswith("none")
    assert line("resampled") == "underline solid" and line("bonus") == "underline dotted"

    def lightness(kind: str, prop: str) -> float:  # 0 black .. 1 white
        rgb = page.locator(f"#legend .tok-{kind}").evaluate(f"e => getComputedStyle(e).{prop}")
        return sum(int(v) for v in rgb[rgb.index("(") + 1:rgb.index(")")].split(",")[:3]) / 765

    light = [lightness("resampled", "textDecorationColor"), lightness("bonus", "textDecorationColor"),
             lightness("rejected", "color")]
    page.evaluate("document.body.classList.add('dark')")  # Gradio's dark theme marks the body so
    try:
        dark = [lightness("resampled", "textDecorationColor"), lightness("bonus", "textDecorationColor"),
                lightness("rejected", "color")]
        page.wait_for_selector("#chart-speed .svg-container", timeout=30_000)  # plotly's white charts turn dark
        assert "invert" in page.evaluate("getComputedStyle(document.querySelector('#chart-speed .svg-container')).filter")
    finally:
        page.evaluate("document.body.classList.remove('dark')")
    assert all(d > 0.5 > l for d, l in zip(dark, light)), (light, dark)  # dark lines on a light page, light on dark


def test_rejected_drafts_toggle(page):
    page.click("#show-rejected input")
    page.wait_for_selector("#chat.show-rejected", timeout=10_000)
    rejected = page.locator("#chat .tok-rejected")
    if rejected.count():
        assert rejected.first.evaluate("e => getComputedStyle(e).display") != "none"
        assert "line-through" in rejected.first.evaluate("e => getComputedStyle(e).textDecorationLine")
    page.click("#show-rejected input")
    page.wait_for_selector("#chat.show-rejected", state="detached", timeout=10_000)
    if rejected.count():
        assert rejected.first.evaluate("e => getComputedStyle(e).display") == "none"


def test_compare_shows_the_speedup_and_the_identical_output_check(page):
    set_number(page, "max-new-tokens", 32)
    page.click("#compare input")
    run_prompt(page, PROMPT)
    verdict = page.locator("#chat .specui-verdict").last
    verdict.wait_for(timeout=60_000)
    assert "speedup" in verdict.inner_text() and "×" in verdict.inner_text()
    assert "identical output" in verdict.inner_text()
    assert page.locator("#chat .specui-out").last.locator(".tok-plain").count() >= 1
    assert "speedup" in page.locator("#stats").inner_text()
    race = page.locator("#race .specui-race")
    assert race.count() == 1 and race.locator(".race-lane").count() == 2
    assert page.locator("#chart-speed .scatterlayer .trace").count() == 2  # speculative and plain
    page.click("#compare input")  # back off for the next tests
    with page.expect_download() as download:  # the run as JSON, under the stats line
        page.locator("#chat-export a").first.click()
    data = json.loads(Path(download.value.path()).read_text(encoding="utf-8"))
    assert data["identical"] is True and data["plain_text"] == data["text"] and data["settings"]["compare"] is True


def test_arena_mode_runs_every_drafter_and_shows_who_proposed_each_token(page):
    set_number(page, "max-new-tokens", 24)
    page.click("#arena input")
    page.wait_for_selector("#arena-results", state="visible", timeout=10_000)
    try:
        run_prompt(page, PROMPT)
        reply = page.locator("#chat .specui-arena").last
        reply.locator(".specui-verdict").wait_for(timeout=60_000)
        assert "identical to plain decoding" in reply.locator(".specui-verdict").inner_text()
        # plain, the draft model, the draft model + lookup, EAGLE, Medusa, early exit, early exit + lookup, prompt lookup
        assert reply.locator(".arena-lane").count() == 8
        who = reply.locator(".specui-text").first.locator(".tok")
        assert who.count() == 24 and "proposed" in who.first.get_attribute("title") + who.last.get_attribute("title")
        page.wait_for_function("() => document.querySelector('#arena-table [role=grid]')"
                               "?.getAttribute('aria-rowcount') === '9'", timeout=30_000)  # the header and 8 rows
        table = page.locator("#arena-table").inner_text()
        assert all(name in table for name in ("prompt lookup", "draft model + lookup", "early exit + lookup", "reference"))
        page.wait_for_selector("#chart-arena .barlayer .trace", timeout=30_000)
        assert page.locator("#race .race-lane").count() == 8  # every run replayed at its pace
    finally:
        page.click("#arena input")  # back off for the next tests, whatever happened here
        page.wait_for_selector("#arena-results", state="hidden", timeout=10_000)


def test_a_confidence_stop_keeps_the_output(page):
    """The Confidence stop slider reaches the run (its download's settings say so), whose greedy output is still
    plain decoding's (the compare verdict)."""
    set_number(page, "draft-confidence", 0.5)
    page.check("#compare input")
    run_prompt(page, PROMPT)
    assert "identical output" in page.locator("#chat .specui-verdict").last.inner_text()
    with page.expect_download() as download:
        page.locator("#chat-export a").first.click()
    data = json.loads(Path(download.value.path()).read_text(encoding="utf-8"))
    assert data["settings"]["draft_confidence"] == 0.5 and data["identical"] is True
    page.uncheck("#compare input")
    set_number(page, "draft-confidence", 0)


def test_stop_halts_a_long_run(page):
    set_number(page, "max-new-tokens", 400)
    page.click("#compare input")  # a speculative run and then a plain one: a long run to stop
    page.fill("#prompt textarea", PROMPT)
    page.click("#send")
    # press Stop from inside the page as soon as the reply starts streaming
    page.wait_for_function("() => { if (!document.querySelector('#chat .specui-caret')) return false;"
                           " document.querySelector('#stop').click(); return true; }", timeout=120_000)
    try:
        page.wait_for_function("() => document.querySelector('#stats').innerText.includes('Stopped')", timeout=30_000)
    except Exception as e:
        raise AssertionError(f"no 'Stopped' in {page.locator('#stats').inner_text()!r}") from e
    reply = page.locator("#chat .specui-out").last
    assert "stopped" in reply.inner_text()
    assert reply.locator(".tok:not(.tok-rejected)").count() < 2 * 400
    assert reply.locator(".specui-verdict").count() == 0  # no comparison claimed for a stopped run
    page.click("#compare input")
    run_prompt_done(page)  # 'Stopped' is the last frame: a Send before the event's end is "still being answered"


def test_injection_shows_as_text_and_never_runs(page):
    set_number(page, "max-new-tokens", 8)
    run_prompt(page, INJECTION)
    assert page.locator("#chat .specui-prompt").last.evaluate("e => e.textContent") == INJECTION
    assert page.locator("#chat img").count() == 0
    assert page.dialogs == []


def test_copy_reply_puts_the_replys_text_on_the_clipboard_not_its_markup(page):
    """Gradio's own copy buttons copied a message's HTML (token spans, rejected drafts): they are gone; each
    finished reply has a "Copy reply" button that copies its text alone, and the chat's toolbar a "Copy
    conversation" button that copies every turn as text."""
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    set_number(page, "max-new-tokens", 16)
    run_prompt(page, PROMPT)
    run_prompt_done(page)
    reply = page.locator("#chat .specui-out").last
    shown = reply.locator(".specui-text").first.evaluate(
        "e => [...e.querySelectorAll('.tok:not(.tok-rejected)')].map(t => t.textContent).join('')")
    assert shown and page.locator("#chat button[aria-label='Copy message']").count() == 0
    reply.locator(".specui-copy").click()
    page.wait_for_function("() => [...document.querySelectorAll('#chat .specui-copy')].pop().textContent === 'Copied'",
                           timeout=10_000)
    assert page.evaluate("navigator.clipboard.readText()") == shown
    page.get_by_role("button", name="Copy conversation").click()  # the chat's toolbar: every turn, as text
    page.wait_for_function("() => navigator.clipboard.readText().then(t => t.startsWith('User: '))", timeout=10_000)
    conversation = page.evaluate("navigator.clipboard.readText()")
    assert conversation.endswith(f"User: {PROMPT}\n\nAssistant: {shown}") and "<span" not in conversation


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
    page.click("#send")  # (the stopped message, never run, leaves the chat; its text stayed in the box to be sent again)
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
