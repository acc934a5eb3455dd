"""`python -m specui`'s word wrapping (`specui.terminal_view.Wrap`) as a reply streams: what it shows and when."""

from __future__ import annotations

import io
import random
import re
import unicodedata

from specui.events import Kind
from specui.terminal_view import (AMBIGUOUS_WIDE, BLANK_REJECTION, LINE_BREAK, Reply, Wrap, ambiguous_columns, columns,
                                  stream_reply)
from tests.app.test_ui_unicode import smollm2_tokenizer  # noqa: F401 (a fixture)


def _text(pieces) -> str:
    return "".join(text for text, _ in pieces)


def test_a_word_longer_than_a_line_streams_as_it_comes():
    """A word was held until it ended: a reply with no spaces (Chinese or Japanese, a long URL or a line of code)
    showed nothing as it streamed, then all at once, though a word longer than a line is broken at the edge anyway."""
    wrap = Wrap(10)
    shown = _text(wrap.push("hi ", "accepted"))
    for token in ("你好", "世界你", "好世界", "你好世界"):  # 24 columns, no space
        shown += _text(wrap.push(token, "accepted"))
    assert shown == "hi \n你好世界你\n好世界你好\n世界"  # lines of 10 columns (2 a character), as they fill
    shown += _text(wrap.push("好世界 ok", "bonus") + wrap.flush())
    assert shown == "hi \n你好世界你\n好世界你好\n世界好世界\nok"
    wrap = Wrap(8)
    assert _text(wrap.push("see https://example.org/a/b", "bonus")) == "see \nhttps://\nexample.\norg/a/b"


def test_streaming_wraps_as_the_whole_text_at_once_does():
    """However a reply is cut into tokens, the wrapped text is the same."""
    rng = random.Random(0)
    for _ in range(300):
        text = "".join(rng.choice(["a", "bc", " ", "  ", "\n", "\t", "漢", "xxxxxxxxxxxx", "é"])
                       for _ in range(rng.randint(1, 30)))
        width = rng.randint(1, 12)
        whole = Wrap(width)
        expected = _text(whole.push(text, "bonus") + whole.flush())
        cut, wrap, got = sorted(rng.sample(range(len(text) + 1), min(4, len(text) + 1))), Wrap(width), ""
        for a, b in zip([0, *cut], [*cut, len(text)]):
            got += _text(wrap.push(text[a:b], "bonus"))
        assert got + _text(wrap.flush()) == expected, (text, width)


def test_a_rejections_line_break_mark_never_moves_the_text_nor_passes_the_edge(smollm2_tokenizer):  # noqa: F811
    """Where colours are, a rejection's line break shows as `LINE_BREAK` before the break. The mark joined the word
    before it: a word that ended a line at the edge was taken to the next line with it (the reply wrapped one way
    where the line break was accepted, another where it was a rejection), and a full line's mark went past the edge,
    on a line of its own. The wrap keeps the last column for it: the text's lines are the same wherever the
    rejections fell, and each mark ends its line."""
    from tests.app.test_ui_render import make_round

    tok = smollm2_tokenizer
    rng = random.Random(1)
    words = ["a", "to", "the", "abcde", "hello", "world.", "xxxxxxxxxxxxx"]
    for _ in range(40):
        text = "".join(rng.choice(words) + rng.choice([" ", " ", "\n", "\n\n", " \n"]) for _ in range(12))
        ids = tok(text, add_special_tokens=False)["input_ids"]
        assert tok.decode(ids) == text
        breaks = [i for i, t in enumerate(ids) if not tok.decode([t]).strip(" \n") and "\n" in tok.decode([t])]
        rejected = set(rng.sample(breaks, len(breaks) // 2 + 1)) if breaks else set()
        for width in (2, 5, 8, 10, 24):
            shown = {}
            for label, bad in (("accepted", set()), ("rejected", rejected)):
                kinds = [Kind.RESAMPLED if i in bad else Kind.ACCEPTED for i in range(len(ids))]
                rounds = [make_round(drafted=[], num_accepted=0, token_ids=[t], kinds=[k]) for t, k in zip(ids, kinds)]
                out = io.StringIO()
                stream_reply(rounds, Reply(), tokenizer=tok, prompt_ids=[], out=out, colour=True, safe=True,
                             width=width)
                shown[label] = re.sub(r"\x1b\[[0-9;]*m", "", out.getvalue())
            lines = shown["rejected"].split("\n")
            assert all(len(line) <= width for line in lines), (width, lines)  # nothing past the edge
            assert all(LINE_BREAK not in line[:-1] for line in lines), (width, lines)  # each mark ends its line
            assert shown["rejected"].count(LINE_BREAK) == sum(tok.decode([ids[i]]).count("\n") for i in rejected)
            # the text wraps the same wherever the rejections fell
            assert shown["rejected"].replace(LINE_BREAK, "") == shown["accepted"], (width, text)


def test_a_space_at_the_edge_before_a_line_break_adds_no_blank_line():
    """A space that would cross the edge was written as a line break at once, so the line break after it (a line
    ending in a space, as ' \\n' is often tokenized) showed a blank line the text does not have; where colours are
    (the text a column short) the mark of a rejection's line break there stood alone on that blank line. The space's
    break now waits for the next character: a line break (after the mark) ends the line itself."""

    def shown(pieces, *, width, marks=False):
        wrap = Wrap(width, marks=marks)
        return "".join(_text(wrap.push(text, kind)) for text, kind in pieces) + _text(wrap.flush())

    assert shown([("abcde \nfg", "accepted")], width=5) == "abcde\nfg"
    assert shown([("abcd \nfg", "accepted")], width=5, marks=True) == "abcd\nfg"
    assert shown([("abcd", "accepted"), (" " + LINE_BREAK + "\n", BLANK_REJECTION), ("fg", "accepted")],
                 width=5, marks=True) == f"abcd{LINE_BREAK}\nfg"
    assert shown([("abcd ", "accepted"), (LINE_BREAK + "\n", BLANK_REJECTION)], width=5, marks=True) == \
        f"abcd{LINE_BREAK}\n"
    assert shown([("abcd\t", "accepted"), ("\n", "accepted")], width=6) == "abcd\n"  # a tab alike
    # anything else after it starts the next line, as before; and a reply that ends on it ends there
    assert shown([("abcde ", "accepted"), (" fg", "accepted")], width=5) == "abcde\n fg"
    assert shown([("abcde ", "accepted"), ("fg hi", "accepted")], width=5) == "abcde\nfg hi"
    assert shown([("abcde ", "accepted")], width=5) == "abcde"


def test_the_line_break_mark_is_one_column_on_every_terminal_cjk_set_ones_too():
    """Wrap keeps the last column of a line for a rejection's `LINE_BREAK` mark and counts it as one. A terminal set
    for CJK text draws the characters Unicode calls East Asian Ambiguous (A: ¶, ←, →, …) two columns wide, and such a
    mark at the edge would cross it onto a line of its own. ↵ (U+21B5) is Neutral (N): one column whether ambiguous
    characters are narrow or wide (glibc's wcwidth, Markus Kuhn's mk_wcwidth_cjk and Unicode's table agree)."""
    assert unicodedata.east_asian_width(LINE_BREAK) in ("N", "Na", "H") and columns(LINE_BREAK) == 1
    wrap = Wrap(6, marks=True)
    shown = _text(wrap.push("abcde", "accepted") + wrap.push(LINE_BREAK + "\n", BLANK_REJECTION) + wrap.flush())
    assert shown == f"abcde{LINE_BREAK}\n"  # the word fills the line but its last column, the mark takes that one
    assert max(sum(columns(c) for c in line) for line in shown.split("\n")) == 6


AMBIGUOUS_TEXT = "ab αβγδ ×°…"  # 3 + 4 + 1 + 3 characters, all but "ab" and the spaces East Asian Ambiguous


def wrapped(width: int, ambiguous: int) -> str:
    """AMBIGUOUS_TEXT wrapped to `width` columns, an ambiguous character taking `ambiguous`."""
    wrap = Wrap(width, ambiguous=ambiguous)
    return "".join(text for text, _ in wrap.push(AMBIGUOUS_TEXT, "accepted") + wrap.flush())


def test_ambiguous_characters_take_the_columns_the_terminal_gives_them():
    """On a terminal that draws East Asian Ambiguous characters two columns wide (one set for CJK text), with
    SPECUI_AMBIGUOUS_WIDE set, a reply's own ambiguous characters count two columns each, where they counted one and
    the terminal's lines ran past the wrap's edge, breaking words in two."""
    assert [columns(c) for c in "aα×漢"] == [1, 1, 1, 2]
    assert [columns(c, 2) for c in "aα×漢"] == [1, 2, 2, 2]
    assert columns("\u0301", 2) == 0  # a combining mark (Ambiguous too) takes none either way
    assert wrapped(11, 1) == AMBIGUOUS_TEXT  # narrow: 11 columns, one line
    assert wrapped(11, 2) == "ab αβγδ\n×°…"  # wide: "ab αβγδ" fills the line's 11 columns, ×°… takes 6
    for line in wrapped(11, 2).split("\n"):
        assert sum(columns(c, 2) for c in line) <= 11, line


def test_the_ambiguous_width_is_read_from_the_environment(monkeypatch, smollm2_tokenizer):  # noqa: F811
    """A streamed reply wraps with SPECUI_AMBIGUOUS_WIDE's width (set to 1 or yes: 2; unset, empty, 0, false, no or
    off: 1)."""
    from tests.app.test_ui_render import make_round

    monkeypatch.delenv(AMBIGUOUS_WIDE, raising=False)
    assert ambiguous_columns() == 1
    for off in ("", "0", "false", "No", " off "):  # set to turn it off, as a user may: not on (`=0` turned it on)
        monkeypatch.setenv(AMBIGUOUS_WIDE, off)
        assert ambiguous_columns() == 1, off
    shown = {}
    for value in ("", "1"):
        monkeypatch.setenv(AMBIGUOUS_WIDE, value)
        ids = smollm2_tokenizer(AMBIGUOUS_TEXT, add_special_tokens=False)["input_ids"]
        rounds = [make_round(drafted=[], num_accepted=0, token_ids=ids, kinds=[Kind.ACCEPTED] * len(ids))]
        out = io.StringIO()
        stream_reply(rounds, Reply(), tokenizer=smollm2_tokenizer, prompt_ids=[], out=out, colour=False, safe=True,
                     width=11)
        shown[value] = out.getvalue()
    assert ambiguous_columns() == 2
    assert shown[""].rstrip("\n") == wrapped(11, 1) and shown["1"].rstrip("\n") == wrapped(11, 2), shown


def test_the_ambiguous_width_is_in_the_terminals_help(capsys):
    """`python -m specui --help`, where a terminal's user looks (README: it "lists it all"), names the variable and
    how to turn it on, in ASCII (a help that a Latin-1 terminal cannot print would fail)."""
    import pytest

    from specui.terminal import parse_args

    with pytest.raises(SystemExit):
        parse_args(["--help"])
    shown = capsys.readouterr().out
    assert f"{AMBIGUOUS_WIDE}=1" in shown and "East Asian Ambiguous" in shown
    assert shown[shown.index("environment:"):].isascii()
