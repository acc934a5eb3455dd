"""`python -m specui`'s word wrapping (`specui.terminal_view.Wrap`) as a reply streams: what it shows and when."""

from __future__ import annotations

import random

from specui.terminal_view import Wrap


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
