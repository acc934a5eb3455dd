"""What `python -m specui` writes to a terminal of a model's text: escape sequences (a screen clear, an OSC 8 link,
an OSC 52 clipboard write), a carriage return and bidi overrides are shown as escapes, never obeyed; line breaks,
tabs, right-to-left text and its marks, and joiners are written as they are."""

from __future__ import annotations

import pytest

from specui.events import Kind
from specui.terminal_view import Wrap, painted, shown

HOSTILE = {
    "clear the screen": "\x1b[2J\x1b[H",
    "an OSC 8 link": "\x1b]8;;http://evil.example/\x1b\\click\x1b]8;;\x1b\\",
    "an OSC 52 clipboard write": "\x1b]52;c;dG91Y2ggL3RtcC9wd25lZA==\x07",
    "a carriage return over the line": "safe\rrm -rf",
    "an 8-bit CSI": "\x9b2J",
    "a right-to-left override": "total: 10\u202e05 :latot",
    "an isolate": "a\u2067b\u2069c",
}
BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"  # embeddings, overrides, isolates


@pytest.mark.parametrize("name", HOSTILE)
def test_no_control_or_bidi_override_reaches_the_terminal(name):
    """Each hostile text, shown as a terminal gets it (coloured or not, wrapped or not), holds no character a terminal
    obeys: no C0 or C1 control but line breaks, no bidi embedding, override or isolate (U+202E made the terminal draw
    the rest of the line reversed: it reached the terminal as it was)."""
    text = HOSTILE[name]
    wrapped = "".join(piece for piece, _ in Wrap(20).push(shown(text), Kind.ACCEPTED))
    for out in (painted(text, Kind.ACCEPTED, colour=False, safe=True), shown(text), wrapped):
        obeyed = [c for c in out if c != "\n" and (ord(c) < 0x20 or 0x7f <= ord(c) < 0xa0 or c in BIDI)]
        assert not obeyed, (name, out)
    coloured = painted(text, Kind.ACCEPTED, colour=True, safe=True)
    assert coloured.count("\x1b") == 2, coloured  # the colour's own code and its reset, no other


def test_text_a_terminal_draws_as_written_stays_as_written():
    """Line breaks, tabs, Arabic and Hebrew with their marks (U+200F, U+200E), a zero-width joiner and emoji are not
    escaped: only what a terminal would obey is."""
    text = "line\n\tשלום\u200f عربي\u200e 👨\u200d👩\u200d👧 é"
    assert shown(text) == text
