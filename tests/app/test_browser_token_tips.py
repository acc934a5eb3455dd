"""A token's tooltip as the page's script writes it from the short value a reply sends (`render.tip_value`,
specui/ui/tokens.js), in Chromium without a server: hovered, tapped or reached by the arrow keys, every kind, note,
special token, part of a character and hostile text gives the very tooltip `render.tooltip` writes, as text."""

from __future__ import annotations

import pytest

from specui.events import Kind
from specui.ui import render
from tests.helpers import static_page

pytestmark = [pytest.mark.browser]  # Chromium on a page of its own: no app, no model

TEXTS = [" the", "it's", 'say "hi"', "both ' and \"", "back\\slash", "line\nbreak\tand tab", "cr\r", "bell\x07",
         '"><img src=x onerror="window.__pwned=1">', "x' onmouseover='window.__pwned=2", "&amp; <b>", "café",
         "\U0001F468\u200d\U0001F469", "\u202eabc", "\u2028", "a  b", "<|im_end|>", "",
         "\x00"]  # a NUL: the page's parser drops it, the span shows no text, yet no part of a character
NOTES = ["", render.COPIED, render.UNDRAFTED, render.REJECTED_HERE, render.DISCARDED, render.NOT_NEEDED,
         f"{render.REJECTED_HERE} · {render.COPIED}", f"{render.NOT_NEEDED} · {render.COPIED}"]


def views() -> list[render.TokenView]:
    """Every kind, every note, p, q or the acceptance probability unknown, no id, a special token, hostile texts."""
    kinds = [Kind.ACCEPTED, Kind.RESAMPLED, Kind.BONUS, Kind.PLAIN, Kind.REJECTED]
    out = [render.TokenView(text=text, kind=kinds[i % 5], p=0.1234567 if i % 4 else None, q=0.5 if i % 3 else None,
                            accept=[1.0, 0.25, None][i % 3], token_id=None if i == 3 else 100 + i,
                            note=NOTES[i % len(NOTES)], special=text == "<|im_end|>")
           for i, text in enumerate(TEXTS)]
    return out + [render.TokenView(text="odd", kind=Kind.ACCEPTED, p=0.5, q=0.5, accept=1.0, token_id=9,
                                   note="a note of no letter")]  # sent as a title, written out


def test_a_tokens_tooltip_is_written_out_as_render_writes_it_hovered_tapped_or_stepped_to():
    shown = views()
    reply = render.render_reply(shown)
    assert reply.count(" title=") == 2  # the block's name and the note of no letter: the rest sent short
    with static_page(f"<div id=chat class=show-rejected>{reply}</div>", scripts=("tokens.js",)) as page:
        tokens = page.locator("#chat .tok")
        assert tokens.count() == len(shown)
        tokens.nth(1).hover()  # the mouse: the native tooltip's title
        assert tokens.nth(1).get_attribute("title") == render.tooltip(shown[1])
        page.evaluate("() => document.querySelectorAll('#chat .tok').forEach("
                      "t => t.dispatchEvent(new MouseEvent('mouseover', {bubbles: true})))")
        titles = page.evaluate("() => [...document.querySelectorAll('#chat .tok')].map(t => t.title)")
        for view, title in zip(shown, titles):
            assert title == render.tooltip(view), view
        assert page.evaluate("() => window.__pwned ?? null") is None
        assert page.locator("#chat img, #chat b").count() == 0
    with static_page(f"<div id=chat>{reply}</div>", scripts=("tokens.js",)) as page:  # keys, a tap: no hover first
        page.locator("#chat .specui-text").focus()
        page.keyboard.press("ArrowRight")
        first = next(v for v in shown if v.kind != Kind.REJECTED)  # rejected drafts hidden: skipped
        assert page.evaluate("() => document.activeElement.title") == render.tooltip(first)
        live = page.locator(".specui-sr-only[aria-live]").inner_text()
        assert live.endswith(render.tooltip(first).replace(" · ", ", ")), live
        page.keyboard.press("End")
        tip = page.locator(".specui-tip")
        assert tip.inner_text().split("\n") == render.tooltip(shown[-1]).split(" · ")
        page.keyboard.press("Escape")
        page.locator("#chat .tok-plain").first.click()
        plain = next(v for v in shown if v.kind == Kind.PLAIN)
        assert tip.inner_text().split("\n") == render.tooltip(plain).split(" · ")
