"""The tab a page opens on (`specui.ui.address.opening_tab`), without a browser: the Teach tab when the address
names it; nothing at all for the Chat tab, which the page shows already — the load event's answer comes a moment
after the page, and one that selected the Chat tab took back a click on the Teach tab made in that moment (the
browser test's refreshed page stayed on the Chat tab, about one run in five)."""

from __future__ import annotations

import gradio as gr
import pytest
from starlette.requests import Request

from specui.ui.address import opening_tab


def _request(query: str) -> gr.Request:
    return gr.Request(request=Request({"type": "http", "query_string": query.encode(), "headers": []}))


@pytest.mark.parametrize("query", ["tab=teach", "tab=TEACH", "tab=%20teach"])
def test_the_address_naming_the_teach_tab_opens_it(query):
    assert opening_tab(_request(query)).selected == "teach"


@pytest.mark.parametrize("query", ["", "tab=chat", "tab=nope"])
def test_a_page_on_the_chat_tab_is_sent_nothing(query):
    assert opening_tab(_request(query)) == gr.skip()
