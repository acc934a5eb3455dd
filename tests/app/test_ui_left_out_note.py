"""The note that leads a reply when a chat's oldest messages were left out of the turn (`Run.left_out_note`) reads as
a sentence, as every other note on the page does: a capital letter first and a full stop last, in the message's
markup as it leads it (`render.render_reply`'s and `arena_view.render_arena`'s `lead`). No model, no server."""

from __future__ import annotations

import html

import pytest

from specui.events import Kind
from specui.ui import arena_view, render
from specui.ui.request import Settings
from specui.ui.runs import Run


@pytest.mark.parametrize("left_out, some", [(1, "message left out: with it"), (2, "2 messages left out: with them")])
def test_the_left_out_note_is_a_sentence_where_it_leads_the_message(left_out, some):
    """One message left out is "it", several "them": one read "first message left out: with them"."""
    note = Run(Settings(max_new_tokens=8), left_out=left_out, context=8192).left_out_note
    assert note == f"The conversation's first {some}, it is longer than the model's context (8,192 tokens)."
    shown = f'<div class="specui-note">{html.escape(note)}</div>'
    views = [render.TokenView(" w", Kind.ACCEPTED, 0.5, 0.5, 1.0, 0)]
    for streaming in ("spec", ""):
        assert render.render_reply(views, streaming=streaming, lead=note).startswith(f'<div class="specui-out">{shown}')
    arena = arena_view.render_arena([], [], labels={}, lead=note)
    assert arena.startswith(f'<div class="specui-out specui-arena">{shown}')


def test_no_note_when_nothing_was_left_out():
    assert Run(Settings(max_new_tokens=8)).left_out_note == ""
