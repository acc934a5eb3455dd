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
from tests.gradio_calls import chat_call
from tests.helpers import served_app, ui_config

pytestmark = pytest.mark.slow  # serves the app on the bundled pair

gradio_client = pytest.importorskip("gradio_client")


def test_an_api_client_of_the_chat_event_gets_no_frame_mark():
    config = ui_config()
    showcase = Showcase(config, PairCache(), text_interval=0)  # a frame each round: many in-between values
    with served_app(config, showcase=showcase) as url:
        client = gradio_client.Client(url, verbose=False)
        job = chat_call(client, PROMPT, num_draft_tokens=4, max_new_tokens=32)  # greedy, no tree: the page's defaults
        outputs = list(job)
    streamed = [o for o in outputs if "tok-" in json.dumps(o)]
    assert len(streamed) >= 3, "too few frames to tell"  # tokens in several frames, the last included
    assert not [o for o in outputs if "specui-frame" in json.dumps(o) or "data-frame" in json.dumps(o)]
    assert showcase.pages._drawn == {}  # no run's tag kept for a client that never says what it drew


class _Client:
    """A gradio_client stand-in: the config of a /chat event with two controls, and the values it was sent."""

    def __init__(self, *elem_ids):
        controls = [{"id": i, "type": "slider", "props": {"elem_id": e, "value": i, "label": f"L{i}"}}
                    for i, e in enumerate(("prompt", *elem_ids))]
        self.config = {"components": [*controls, {"id": 9, "type": "state", "props": {}}],
                       "dependencies": [{"api_name": "chat", "inputs": [c["id"] for c in controls] + [9]}]}

    def submit(self, *values, api_name):
        return values


def test_chat_call_sends_each_control_its_own_value_and_refuses_controls_it_cannot_tell_apart():
    assert _Client("top-k", "seed").submit("p", 1, 2, api_name="/chat") == ("p", 1, 2)  # the stand-in itself
    assert chat_call(_Client("top-k", "seed"), "p", seed=5) == ("p", 1, 5)  # the defaults, a named one, no state
    for ids in (("top-k", None), ("seed", "seed")):  # a control without elem_id, two with one: one value for both
        with pytest.raises(TypeError, match="can't tell apart"):
            chat_call(_Client(*ids), "p")
    with pytest.raises(TypeError, match=r"no control \['sed'\]"):
        chat_call(_Client("top-k", "seed"), "p", sed=5)
    renamed = _Client("seed")
    renamed.config["components"][0]["props"]["elem_id"] = "message"  # the prompt box renamed: the prompt not sent
    with pytest.raises(TypeError, match="the prompt would not be sent"):
        chat_call(renamed, "p")
