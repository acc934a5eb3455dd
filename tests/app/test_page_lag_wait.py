"""`tools.page_lag`'s wait for the reply: it starts timing once the reply streams or has finished, whichever the page
shows first. It waited 60 s for a caret alone: the chat model's load and first token on a loaded machine took longer,
and a reply that finished in its first frame (or an error) never showed one (now `--first-token-s`, and either)."""

from __future__ import annotations

import pytest

from specui.loading import PairCache
from specui.ui.session import Showcase
from tests.helpers import served_browser, ui_config
from tools.screenshot import open_page

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # the served app in Chromium


class Unstreamed(Showcase):
    """The app's showcase sending no frame while a reply decodes: the page gets it finished, with no caret ever."""

    def _drive(self, *args):
        for _ in super()._drive(*args):
            pass
        return
        yield


def test_page_lag_times_a_reply_that_never_showed_a_caret():
    from tools import page_lag

    config = ui_config()
    with served_browser(config, showcase=Unstreamed(config, PairCache())) as (browser, url):
        page = open_page(browser, url)
        page.fill("#prompt textarea", page_lag.PROMPT)
        cdp = page.context.new_cdp_session(page)
        cdp.send("Performance.enable")
        row = page_lag.measure(page, cdp)  # it waited 60 s for a caret, then raised playwright's TimeoutError
        shown = page.evaluate("() => document.querySelectorAll('#chat .specui-out .tok').length")
    assert shown > 0  # the reply, finished and shown
    assert set(row) == {"wall_s", "busy_s", "busy_share", "answer_median_ms", "answer_max_ms"}
