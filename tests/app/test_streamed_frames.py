"""A streamed chat reply's frames grow at their end: each starts with the one before (`render.render_reply` leaves a
streamed message open after its last token, the caret drawn by its block's class), so gradio's queue sends each as an
append of what the reply gained (`gradio.utils.diff`), where every frame had sent the whole reply again (a 200-token
reply: 2 MB, 4 MB in compare mode); the final frame closes the message as it always was. And the open markup in
Chromium, through the app's own Chatbot on a served Blocks: tokens and caret as they stream, hostile token texts
staying text inside the open block, no caret once the final frame lands."""

from __future__ import annotations

import threading
from contextlib import contextmanager
from html.parser import HTMLParser
from itertools import pairwise

import gradio as gr
import pytest

from specui import runstats
from specui.events import GenerationResult, Kind
from specui.loading import PairCache
from specui.text import STOP_REASONS, fmt
from specui.ui import arena_view, render
from specui.ui.request import Settings
from specui.ui.runs import Run
from specui.ui.session import Showcase
from tests.helpers import require_browser, ui_config
from tools.frame_bytes import edits

PROMPT = "import os\nimport sys\n\n\ndef main(argv):\n"


@pytest.fixture(scope="module")
def showcase():
    return Showcase(ui_config(), PairCache(), text_interval=0, chart_interval=1e9)  # a frame every round


class Opened(HTMLParser):
    """The elements left open at the end of some markup (class names), and every element it made."""

    def __init__(self, markup: str):
        super().__init__(convert_charrefs=True)
        self.open, self.made = [], []
        self.feed(markup)

    def handle_starttag(self, tag, attrs):
        self.made.append(tag)
        self.open.append(f"{tag}.{dict(attrs).get('class', '')}")

    def handle_endtag(self, tag):
        assert self.open and self.open[-1].startswith(f"{tag}."), (tag, self.open)
        self.open.pop()


def appended(old: str, new: str) -> bool:
    """Whether gradio's queue sends `new` after `old` as an append: a Chatbot's values as it sends them (its
    postprocess; the app's: sanitised, no Markdown), diffed as the queue diffs them."""
    return [e[0] for e in edits(old, new)] == ["append"]


@pytest.mark.parametrize("compare", [False, True])
def test_streamed_frames_are_appends_and_the_final_message_is_the_whole_reply(showcase, compare):
    frames = list(showcase.run(PROMPT, Settings(max_new_tokens=40, num_draft_tokens=2, compare=compare),
                               figures=False))
    final, run = frames[-1]
    streamed = [f.message for f, _ in frames if not f.done and "specui-out" in f.message]  # not a loading note
    assert len(streamed) >= 4 and final.done
    replaced = [i + 1 for i, (old, new) in enumerate(pairwise(streamed)) if not appended(old, new)]
    plain_opens = [i for i, m in enumerate(streamed) if "tokens/s" in m][:1]  # compare: the plain run's first frame
    assert replaced == plain_opens and len(plain_opens) == compare, replaced
    # compare: the plain column's title shows from the first frame, in its place before its run begins (NEXT_COLUMN)
    assert all(("plain (target alone)" in m) == compare for m in streamed)
    assert [render.NEXT_COLUMN in m for m in streamed] == [compare and i < plain_opens[0] for i in range(len(streamed))]
    for message in streamed:  # open: the reply's block last, its caret its class; nothing after its tokens
        column = ["div.specui-compare", "div.specui-col"] if compare else []
        assert Opened(message).open == ["div.specui-out", *column, f"div.specui-text {render.CARET}"], message[-300:]
    assert render.CARET not in final.message and not Opened(final.message).open
    # the final message as it always was: the reply whole, closed, its note and copy row after it (and the verdict)
    note, copy = STOP_REASONS[run.spec.stop_reason], run.reply_text
    if not compare:
        assert final.message == render.render_reply(run.spec_views, note=note, copy=copy)
        return
    spec, plain = run.stats()
    verdict = render.render_verdict(identical=run.identical, speedup=runstats.speedup(spec, plain))
    assert run.identical and final.message == render.render_reply(
        run.spec_views, plain=run.plain_views, spec_title=f"speculative · {fmt(spec.tokens_per_s, '.1f')} tokens/s",
        plain_title=f"plain (target alone) · {fmt(plain.tokens_per_s, '.1f')} tokens/s", note=note, verdict=verdict,
        copy=copy)


HOSTILE = ("ok ", '</div></div><img src=x onerror="window.__pwned=1">', "&amp; &lt;", "\n\n", "'\"", "\u202eabc",
           "<script>window.__pwned=2</script>", "\n</span>x", " end")
SHOWN = [render.closed_bidi(text) for text in HOSTILE]  # each token's text on the page (its bidi scope closed)


def test_hostile_token_texts_in_an_open_message_make_no_element_and_leave_it_open():
    views = [render.TokenView(text, Kind.ACCEPTED, 0.5, 0.5, 1.0, i) for i, text in enumerate(HOSTILE)]
    for shown in range(1, len(views) + 1):
        parsed = Opened(render.render_reply(views[:shown], streaming="spec"))
        assert parsed.open == ["div.specui-out", f"div.specui-text {render.CARET}"], parsed.open
        assert set(parsed.made) == {"div", "span"} and parsed.made.count("span") == shown


@pytest.mark.parametrize("compare", [False, True])
def test_a_left_out_note_leads_the_reply_in_one_place_from_its_first_frame_to_its_last(compare):
    """A turn that left a chat's oldest messages out (they no longer fit the context) says so from its first frame on:
    the note is the message's start in every streamed frame and in the final one, so it never moves, and the streamed
    frames still grow at their end (compare: the plain column's first frame aside, as ever); the arena's too. No
    model: the showcase's frames (`Showcase.frame`) of a run whose token views come one at a time."""
    showcase = Showcase(ui_config(), None)
    run = Run(Settings(compare=compare, max_new_tokens=8))
    run.left_out, run.context = 2, 8192
    note = render.render_note(run.left_out_note)
    assert "first 2 messages left out" in note and "(8,192 tokens)" in note
    frames = []
    for phase, kind in [("speculative", Kind.ACCEPTED), ("plain", Kind.PLAIN)][:1 + compare]:
        run.phase, run.plain = phase, GenerationResult() if phase == "plain" else None
        for i in range(4):
            (run.plain_views if run.plain else run.spec_views).append(render.TokenView(f" w{i}", kind, 0.5, 0.5, 1, i))
            frames.append(showcase.frame(run).message)
    run.phase = "done"
    final = showcase.frame(run, final=True).message
    assert all(m.startswith(f'<div class="specui-out">{note}<') for m in [*frames, final]), final
    assert final.count("left out") == 1
    replaced = [i + 1 for i, (old, new) in enumerate(pairwise(frames)) if not appended(old, new)]
    assert replaced == ([4] if compare else []), replaced
    arena = Run(Settings(arena=True, max_new_tokens=8), left_out=2, context=8192)
    for final in (False, True):
        assert arena_view.view(arena, final=final).message.startswith(f'<div class="specui-out specui-arena">{note}<')


@contextmanager
def chat_page(stream):
    """A page of the app's Chatbot (its sanitiser, no Markdown; the app's CSS and JS) on a served Blocks, Send pressed:
    the chat shows what `stream()` yields, one value at a time."""
    require_browser()
    from playwright.sync_api import sync_playwright

    from specui.ui import blocks
    from tools.screenshot import NO_PROBE, free_port, launch_chromium

    with gr.Blocks() as demo:
        panel = blocks._chat_panel()
        panel.send.click(stream, None, panel.chat)
    port = free_port()
    try:
        blocks.launch(demo, server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True,
                      **NO_PROBE)
        with sync_playwright() as p:
            browser = launch_chromium(p)
            page = browser.new_page()
            page.goto(f"http://127.0.0.1:{port}/")
            page.click("#send")
            yield page
            browser.close()
    finally:
        demo.close()


@pytest.mark.browser
@pytest.mark.slow
def test_an_open_message_streams_in_the_apps_chatbot_as_tokens_and_caret_and_ends_closed():
    """The app's Chatbot, sent hostile tokens one frame at a time, each frame an append: every token shows in the
    caret's block, as text, the caret drawn after the last (blinking, still under reduced motion); the final frame
    closes the message (no caret). The server yields the next frame once the test has seen this one."""
    views = [render.TokenView(text, Kind.ACCEPTED, 0.5, 0.5, 1.0, i) for i, text in enumerate(HOSTILE)]
    seen = threading.Semaphore(0)

    def stream():
        for shown in range(1, len(views) + 1):
            yield [{"role": "assistant", "content": render.render_reply(views[:shown], streaming="spec")}]
            assert seen.acquire(timeout=60), "the page never showed the frame"
        yield [{"role": "assistant", "content": render.render_reply(views, note="end of text", copy="x")}]

    state = """() => { const block = document.querySelector('#chat .specui-text'); return block && {
        caret: block.classList.contains('specui-caret'), drawn: getComputedStyle(block, '::after').content,
        tokens: [...block.querySelectorAll('.tok')].map(t => t.textContent), pwned: window.__pwned ?? null,
        made: document.querySelectorAll('#chat :is(img, script)').length,
        outside: document.querySelectorAll('#chat .tok').length - block.querySelectorAll('.tok').length}; }"""
    with chat_page(stream) as page:
        for shown in range(1, len(views) + 1):
            page.wait_for_function(f"() => document.querySelectorAll('#chat .tok').length === {shown}",
                                   timeout=60_000)
            found = page.evaluate(state)
            assert found == {"caret": True, "drawn": '"▍" / ""', "tokens": SHOWN[:shown],
                             "pwned": None, "made": 0, "outside": 0}, found
            if shown == 1:  # the caret blinks, and stands still for a reader who asks for less motion
                blink = "() => getComputedStyle(document.querySelector('#chat .specui-caret'), '::after').animationName"
                assert page.evaluate(blink) == "specui-blink"
                page.emulate_media(reduced_motion="reduce")
                assert page.evaluate(blink) == "none"
            seen.release()
        page.wait_for_selector("#chat .specui-copy", timeout=60_000)  # the final frame
        found = page.evaluate(state)
        assert not found["caret"] and found["drawn"] == "none" and found["tokens"] == SHOWN, found


@pytest.mark.browser
@pytest.mark.slow
def test_a_compare_runs_plain_column_stands_in_its_place_before_its_run_begins():
    """Compare mode, the speculative column streaming: the plain column's title stands where that column will be, the
    second cell beside it, though its markup comes first (the streaming column must stay the message's end); the plain
    run's first frame puts the plain column in that very place, the speculative column not moved."""
    spec = [render.TokenView(f" word{i}", Kind.ACCEPTED, 0.5, 0.5, 1.0, i) for i in range(60)]
    plain = [render.TokenView(" word0", Kind.PLAIN, 0.5, None, None, 0)]
    titles = {"spec_title": "speculative", "plain_title": "plain (target alone)"}
    seen = threading.Semaphore(0)

    def stream():
        yield [{"role": "assistant", "content": render.render_reply(spec, plain=[], streaming="spec", **titles)}]
        assert seen.acquire(timeout=60), "the page never showed the frame"
        yield [{"role": "assistant", "content": render.render_reply(spec, plain=plain, streaming="plain", **titles)}]

    columns = """() => [...document.querySelectorAll('#chat .specui-col')].map(c => {
        const box = c.getBoundingClientRect();
        return [c.querySelector('.specui-col-title').textContent, ...[box.x, box.y, box.width].map(Math.round)]; })"""
    with chat_page(stream) as page:
        page.wait_for_selector("#chat .specui-col .tok", timeout=60_000)
        before = page.evaluate(columns)  # in the markup's order: the plain column's title, then the spec column
        seen.release()
        page.wait_for_selector("#chat .tok-plain", timeout=60_000)
        after = page.evaluate(columns)
    assert [title for title, *_ in before] == ["plain (target alone)", "speculative"], before
    assert before[::-1] == after and after[0][1] < after[1][1], (before, after)


def test_the_first_token_frame_waits_for_no_chart_and_the_next_has_them(showcase, monkeypatch):
    """A run's first token frame builds no chart: it built all four plotly figures, and the page drew them with it,
    which held the first token back (0.3 s of 0.4 in the page, `tools.page_latency`). So too where the warm-up (here a
    stand-in of 0.1 s) or a long prompt's reading took longer than `chart_interval`: timed from the run's start, the
    charts came with that frame after all. The next frame has them (then every `chart_interval`): waiting
    `chart_interval` for them left the last run's charts on the page beside this run's tokens. The final frame has
    every chart."""
    import time

    from specui.ui import charts, session

    slow = Showcase(showcase.config, showcase.cache, text_interval=0, chart_interval=0.05)
    monkeypatch.setattr(session, "FRAME_BYTES_PER_S", float("inf"))  # a frame every round: no hold for its bytes
    monkeypatch.setattr(slow, "warm_up", lambda *args: time.sleep(0.1))  # longer than chart_interval
    frames = list(slow.run(PROMPT, Settings(max_new_tokens=24, num_draft_tokens=2)))
    streamed = [f for f, _ in frames if not f.done and "specui-out" in f.message]
    assert len(streamed) >= 3 and streamed[0].figures is None and set(streamed[1].figures) == set(charts.all_figures())
    assert frames[-1][0].done and set(frames[-1][0].figures) == set(charts.all_figures())
    rare = session.Throttle(60, first=False)
    assert session.Throttle(60)() and [rare(), rare(), rare()] == [False, True, False]
