"""A token's markup, sent whole in every streamed frame (`specui.ui.render`): its tooltip goes short, as its figures
(`render.tip_value`, which the page's tokens.js writes out: tests/app/test_browser_token_tips.py), where the tooltip
written out was 80% of a reply's bytes. A tooltip quotes the token's text, and `html.escape` made each apostrophe six
bytes (`&#x27;`) in an attribute that only a double quote can end. Now `"`, &, < and > alone are escaped there: the
browser reads the same value, and nothing a model writes becomes markup."""

from __future__ import annotations

from dataclasses import replace
from html.parser import HTMLParser

import pytest

from specui.events import Kind
from specui.ui import render

HOSTILE = ['it\'s', '"><img src=x onerror=alert(1)>', "a & b &amp; <b>", "'\"'", "x' onmouseover='alert(1)",
           'é"><img src=x>', "\u202e' x=\"y"]


class Spans(HTMLParser):
    """Every element's tag and attributes, and the text, as a browser's parser reads them."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags, self.text = [], ""

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text += data


def parsed(markup: str) -> Spans:
    spans = Spans()
    spans.feed(markup)
    spans.close()
    return spans


@pytest.mark.parametrize("text", HOSTILE)
def test_a_tokens_tooltip_is_read_back_whole_and_its_text_stays_text(text):
    view = render.TokenView(text=text, kind=Kind.ACCEPTED, p=0.5, q=0.25, accept=1.0, token_id=7, note=render.COPIED)
    spans = parsed(render.token_span(view))
    assert spans.tags == [("span", {"class": "tok tok-accepted", "value": render.tip_value(view)})]
    assert spans.text == render.closed_bidi(text)  # the token's text, as text: no element of its own
    taught = parsed(render.token_span(view, shown="x"))  # the Teach tab's, and a note of no letter: a title
    noted = replace(view, note="n")
    assert taught.tags[0][1]["title"] == render.tooltip(view)
    assert parsed(render.token_span(noted)).tags[0][1]["title"] == render.tooltip(noted)


def test_an_apostrophe_in_a_tooltip_takes_one_byte():
    view = render.TokenView(text=" of", kind=Kind.REJECTED, p=0.5, q=0.25, accept=1.0, token_id=7)
    markup = render.token_span(view, shown="of")  # the Teach tab's: a title
    assert "' of'" in markup.partition(">")[0]  # the tooltip's quotes of the token's text, as written
    assert len(markup.partition(">")[0]) == len(f'<span class="tok tok-rejected" title="{render.tooltip(view)}"')
    block = render.render_tokens([view])
    assert "&#x27;" not in block.partition(">")[0] and parsed(block).tags[0][1]["title"] == render.TOKENS_LABEL


def test_a_replys_token_sends_its_figures_alone_and_no_tooltip_written_out():
    """A streamed reply's span: its class and `value` (p, q, accept, id, a letter per note; the text's repr only where
    it is not printable ASCII), some 60 bytes, where its title had been 200."""
    view = render.TokenView(text=" keeper", kind=Kind.REJECTED, p=0.0123, q=0.75, accept=0.0164, token_id=41231,
                            note=f"{render.REJECTED_HERE} · {render.COPIED}")
    assert render.tip_value(view) == "0.0123 0.7500 0.016 41231 rc"
    expected = '<span class="tok tok-rejected" value="0.0123 0.7500 0.016 41231 rc"> keeper</span>'
    assert render.token_span(view) == expected
    assert len(render.tooltip(view)) > 150
    plain = render.TokenView(text="été\n", kind=Kind.PLAIN, p=0.5, token_id=7)
    assert render.tip_value(plain) == "0.5000 – – 7  'été\\n'"
    assert render.tip_value(render.TokenView(text="x", kind=Kind.BONUS)) == "– – –  "
