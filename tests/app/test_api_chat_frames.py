"""The chat's event through `gradio_client` (`/chat`, undocumented): its in-between values are clean. A page's frames
carry a hidden mark in the stats line (`pages.Pages.mark`), which the page's frames.js reads to say which frame it
drew; an API client reads no mark and says nothing, and got it in every streamed stats value. Only a page's Send,
which waits first (`chat_handlers.waiting`), now has its frames marked and paced."""

from __future__ import annotations

import json

import pytest

from specui.loading import PairCache
from specui.ui.session import Showcase
from tests.app.test_app_client import PROMPT
from tests.helpers import served_app, ui_config

pytestmark = pytest.mark.slow  # serves the app on the bundled pair

gradio_client = pytest.importorskip("gradio_client")


def test_an_api_client_of_the_chat_event_gets_no_frame_mark():
    config = ui_config()
    showcase = Showcase(config, PairCache(), text_interval=0)  # a frame each round: many in-between values
    with served_app(config, showcase=showcase) as url:
        client = gradio_client.Client(url, verbose=False)
        # preset, drafter, K, adaptive, confidence, temperature, top-p, top-k, penalty, max new, seed, compare, arena,
        # tree width and nodes (no tree), system prompt (none), as test_app_client's test of /chat
        job = client.submit(PROMPT, None, "draft model", 4, False, 0.0, 0.0, 1.0, 0, 1.0, 32, 0, False, False, 1, 0,
                            "", api_name="/chat")
        outputs = list(job)
    streamed = [o for o in outputs if "tok-" in json.dumps(o)]
    assert len(streamed) >= 3, "too few frames to tell"  # tokens in several frames, the last included
    assert not [o for o in outputs if "specui-frame" in json.dumps(o) or "data-frame" in json.dumps(o)]
    assert showcase.pages._drawn == {}  # no run's tag kept for a client that never says what it drew
