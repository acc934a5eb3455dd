"""A stopped reply's note, the chat's and the arena's, is drawn by the fonts this machine has: its "⏹ stopped" showed an
empty box in Debian's Chromium, whose fonts (DejaVu, Liberation) have no U+23F9. Fontconfig answers which font has a
character (Chromium on Linux falls back through it); no model and no browser."""

from __future__ import annotations

import shutil
import subprocess
from html.parser import HTMLParser

import pytest

from specui.ui import arena_view
from specui.ui.request import Settings
from specui.ui.runs import Run
from specui.ui.session import Showcase
from tests.helpers import ui_config


class Notes(HTMLParser):
    """The text of every `specui-note` in some markup."""

    def __init__(self, markup: str):
        super().__init__(convert_charrefs=True)
        self.notes, self.inside = [], False
        self.feed(markup)

    def handle_starttag(self, tag, attrs):
        self.inside = dict(attrs).get("class") == "specui-note"
        if self.inside:
            self.notes.append("")

    def handle_data(self, data):
        if self.inside:
            self.notes[-1] += data

    def handle_endtag(self, tag):
        self.inside = False


def without_a_font(text: str) -> list[str]:
    """The characters of `text` that no font of this machine has (fontconfig's answer)."""
    if shutil.which("fc-list") is None:
        pytest.skip("no fontconfig (fc-list) here")
    return [ch for ch in sorted(set(text)) if not ch.isascii() and not subprocess.run(
        ["fc-list", f":charset={ord(ch):x}", "family"], capture_output=True, text=True, check=True).stdout.strip()]


def stopped(arena: bool) -> Run:
    run = Run(Settings(arena=arena, max_new_tokens=8))
    run.phase = "stopped"
    return run


@pytest.mark.parametrize("arena", [False, True])
def test_a_stopped_replys_note_is_drawn_by_the_fonts_here(arena):
    run = stopped(arena)
    message = (arena_view.view(run, final=True).message if arena
               else Showcase(ui_config(), None).frame(run, final=True).message)
    notes = Notes(message).notes
    assert len(notes) == 1 and "stopped" in notes[0], message
    assert without_a_font(notes[0]) == [], notes[0]
