"""A real browser on the served app: Python playwright driving Debian's Chromium (never `playwright install`).

It types a prompt and sees coloured tokens stream and the charts draw, turns compare on and sees the
speedup and the identical-output check, runs the drafter arena and sees its table, chart and who proposed
each token, stops a long run, sends an HTML-injection string and sees it as text (no element, no dialog), and
copies a reply's text. test_browser_conversation.py goes on on the same page (conftest.py). Under CI=true a missing
browser is a failure, not a skip.
"""

from __future__ import annotations

import json
import re
import threading
import time
from pathlib import Path

import pytest

from specui.ui.session import Showcase
from tests.app.chat_page import PROMPT, run_prompt_done, send, send_and_finish
from tools.screenshot import FINISHED, run_prompt, set_number

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # drives Chromium on the served app

INJECTION = "<img src=x onerror=alert(1)>"
EMITTED = "#chat .tok-accepted, #chat .tok-resampled, #chat .tok-bonus"
HOLD_CAP_S = 300  # a held run goes on after this in any case: a test that failed never leaves the server stuck


@pytest.fixture
def held(monkeypatch):
    """The next run the served app decodes waits after its first streamed frame (tokens in it) until the event is set
    or the run's Stop is, so the page is certain to see its tokens stream, however fast the run (the stdlib pair wrote
    512 tokens in 0.23 s on a quiet machine) or slow the page. Only the speculative phase's first frame is held."""
    go, real = threading.Event(), Showcase._drive

    def drive(self, run, stream, result, pair, ids, views, lock, stop, *rest):
        frames = real(self, run, stream, result, pair, ids, views, lock, stop, *rest)
        try:
            for frame in frames:
                yield frame
                give_up = time.monotonic() + HOLD_CAP_S
                while run.phase == "speculative" and not (go.wait(0.05) or stop.is_set()):  # the lock is not held here
                    if time.monotonic() > give_up:
                        break
                go.set()  # one frame held, once
        finally:
            frames.close()

    monkeypatch.setattr(Showcase, "_drive", drive)
    yield go
    go.set()


def test_tokens_stream_coloured_with_tooltips_and_the_charts_draw(page, held):
    """The run is held after its first streamed frame (`held`) until the page has shown its tokens, coloured, inside
    the reply whose caret says it streams: a fast run once ended before the page drew any frame but the last."""
    set_number(page, "max-new-tokens", 64)
    # record every state of the chat in which coloured tokens show inside the block whose drawn caret says it streams
    page.evaluate("""sel => { const streamed = window.streamed = [];
        new MutationObserver(() => {
            const n = document.querySelectorAll(sel).length, c = document.querySelector('#chat .specui-caret');
            if (n && c?.querySelector('.tok') && getComputedStyle(c, '::after').content !== 'none') streamed.push(n);
        }).observe(document.querySelector('#chat'), {subtree: true, childList: true, characterData: true}); }""",
                  EMITTED)
    send(page, PROMPT)
    try:
        page.wait_for_function("() => window.streamed.length > 0", timeout=120_000)  # shown at all: a generous cap
    finally:
        held.set()  # the run goes on
    run_prompt_done(page)
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
        page.wait_for_selector(f"#{chart} .js-plotly-plot", timeout=120_000)  # drawn at all: a generous cap
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
    tip.wait_for(timeout=120_000)  # shown at all: a generous cap, not a speed
    assert tip.inner_text().split("\n") == token.get_attribute("title").split(" · ")
    assert "p (target) =" in tip.inner_text()
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
        assert "invert" in page.evaluate(
            "getComputedStyle(document.querySelector('#chart-speed .svg-container')).filter")
    finally:
        page.evaluate("document.body.classList.remove('dark')")
    assert all(d > 0.5 > lit for d, lit in zip(dark, light)), (light, dark)  # dark lines on a light page, light on dark


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
        # plain, the draft model, the draft model + lookup, EAGLE, Medusa, early exit, early exit + lookup,
        # prompt lookup
        assert reply.locator(".arena-lane").count() == 8
        who = reply.locator(".specui-text").first.locator(".tok")
        assert who.count() == 24 and "proposed" in who.first.get_attribute("title") + who.last.get_attribute("title")
        page.wait_for_function("() => document.querySelector('#arena-table [role=grid]')"
                               "?.getAttribute('aria-rowcount') === '9'", timeout=30_000)  # the header and 8 rows
        table = page.locator("#arena-table").inner_text()
        assert all(name in table
                   for name in ("prompt lookup", "draft model + lookup", "early exit + lookup", "reference"))
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


def test_stop_halts_a_long_run(page, held):
    """The run is held after its first streamed frame (`held`) until its Stop is set: a fast run once ended before
    the click landed."""
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


def test_send_and_finish_waits_for_the_run_it_sent_not_the_finished_reply_on_show(page):
    """A Send the page takes a second to start (a loaded machine): the wait is for that run's end, where the finished
    reply on show passed it at once (the run not even started, its tokens never seen streaming)."""
    set_number(page, "max-new-tokens", 8)
    if not page.locator("#chat .specui-out").count():
        run_prompt(page, "x = 1")  # a finished reply on show
    page.evaluate("""() => { const send = document.querySelector('#send'); let held = true;
        send.addEventListener('click', (event) => { if (!held) return;
            held = false; event.stopImmediatePropagation(); setTimeout(() => send.click(), 1500); }, true); }""")
    before = page.locator("#chat .specui-prompt").count()
    send_and_finish(page, "x = 2")
    assert page.locator("#chat .specui-prompt").count() == before + 1
    assert page.locator("#chat .specui-prompt").last.evaluate("e => e.textContent") == "x = 2"
    assert page.evaluate(FINISHED)
