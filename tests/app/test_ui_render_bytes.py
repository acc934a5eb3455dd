"""A token's markup, sent whole in every streamed frame (`specui.ui.render`): its tooltip quotes the token's text, and
`html.escape` made each apostrophe six bytes (`&#x27;`) in an attribute that only a double quote can end. Now `"`, &,
< and > alone are escaped there: the browser reads the same tooltip, and nothing a model writes becomes markup."""

from __future__ import annotations

from html.parser import HTMLParser

import pytest

from specui.events import Kind
from specui.ui import render

HOSTILE = ['it\'s', '"><img src=x onerror=alert(1)>', "a & b &amp; <b>", "'\"'", "x' onmouseover='alert(1)"]


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
    view = render.TokenView(text=text, kind=Kind.ACCEPTED, p=0.5, q=0.25, accept=1.0, token_id=7, note="n")
    markup = render.token_span(view)
    spans = parsed(markup)
    assert spans.tags == [("span", {"class": "tok tok-accepted", "title": render.tooltip(view)})]
    assert spans.text == text  # the token's text, as text: no element of its own


def test_an_apostrophe_in_a_tooltip_takes_one_byte():
    view = render.TokenView(text=" of", kind=Kind.REJECTED, p=0.5, q=0.25, accept=1.0, token_id=7)
    markup = render.token_span(view)
    assert "' of'" in markup.partition(">")[0]  # the tooltip's quotes of the token's text, as written
    assert len(markup.partition(">")[0]) == len(f'<span class="tok tok-rejected" title="{render.tooltip(view)}"')
    block = render.render_tokens([view])
    assert "&#x27;" not in block.partition(">")[0] and parsed(block).tags[0][1]["title"] == render.TOKENS_LABEL
