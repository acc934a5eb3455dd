"""`python -m specui --chat` says a conversation's oldest messages were left out in the words the app's chat leads the
reply with (`specui.text.left_out_note`, one place for both): a sentence, where the terminal said it lowercase in
parentheses with its own wording. The real bundled pair, as a chat preset (a ChatML template it ships without, as
tests/app/test_ui_teach_handoff.py gives it), whose context of 1,024 tokens a few long messages fill."""

from __future__ import annotations

import io
import sys
from dataclasses import replace

import pytest

from specui.text import left_out_note
from tests.helpers import BUNDLED_TARGET
from tests.unit.test_chat_ids import CHATML


@pytest.mark.parametrize("count, said", [
    (0, ""),
    (1, "The conversation's first message left out: with it, it is longer than the model's context (8,192 tokens)."),
    (4, "The conversation's first 4 messages left out: with them, it is longer than the model's context "
        "(8,192 tokens)."),
])
def test_the_left_out_note_is_one_sentence_for_the_app_and_the_terminal(count, said):
    from specui.ui.request import Settings
    from specui.ui.runs import Run

    assert left_out_note(count, 8192) == said == Run(Settings(max_new_tokens=8), left_out=count,
                                                     context=8192).left_out_note


@pytest.mark.skipif(not BUNDLED_TARGET.exists(), reason="the bundled pair is not in assets/")
def test_the_terminals_chat_says_the_messages_left_out_as_the_app_does(monkeypatch, capsys):
    import specui
    from specui.terminal import Session, converse, parse_args, settings_for

    engine = specui.load_engine("bundled")
    engine.tokenizer.chat_template = CHATML
    preset = replace(engine.preset, name="bundled-chat", chat_template=True)
    args = parse_args(["--chat", "--max-new-tokens", "4", "--color", "never"])
    session = Session(args, engine, preset, settings_for(args, engine, preset), [])
    long, longer = "x = 1; " * 100, "y = 2; " * 160  # a line each, together more than the 1,024 tokens
    sizes = [len(engine.tokenizer(text)["input_ids"]) for text in (long, longer)]
    assert sum(sizes) > 1024 and max(sizes) < 700, sizes  # the second alone fits, a quarter of the context free
    monkeypatch.setattr(sys, "stdin", io.StringIO(f"{long}\n{longer}\n"))
    assert converse(session, None) == 0
    err = capsys.readouterr().err
    assert f"\n{left_out_note(2, 1024)}\n" in f"\n{err}", err
