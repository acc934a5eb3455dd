"""`/generate` given text no tokenizer reads: an API client's JSON may hold a lone surrogate ("\\ud800"), which the
page's text box never sends. It is refused in one line naming the field and the character, with no traceback on the
server (the tokenizer had raised a TypeError naming its own types). And a seed that no float holds reaches the run
exactly."""

from __future__ import annotations

import asyncio
import json
import logging

import gradio as gr
import pytest

from specui.loading import PairCache
from specui.ui.api import generate_endpoint
from specui.ui.session import Showcase
from tests.helpers import ui_config


@pytest.mark.parametrize("fields, words", [
    ({"prompt": json.loads('"def f():\\n    \\ud800"')},
     "The prompt is not valid Unicode text: character 14 is U+D800"),
    ({"prompt": "hi", "system": json.loads('"Be brief \\udfff"')},
     "The system prompt is not valid Unicode text: character 10 is U+DFFF"),
])
def test_a_lone_surrogate_is_refused_by_name(fields, words, caplog):
    config = ui_config()
    showcase = Showcase(config, PairCache())
    generate = generate_endpoint(showcase)
    with caplog.at_level(logging.WARNING, logger="specui"), pytest.raises(gr.Error) as refused:
        asyncio.run(generate(**fields, max_new_tokens=4))
    assert refused.value.message.startswith(words) and "send the text as UTF-8" in refused.value.message
    assert not caplog.records, [r.getMessage() for r in caplog.records]  # a client's mistake: nothing to log


def test_a_seed_above_2_to_the_53_reaches_the_run_exactly():
    """A seed goes up to 2**63 - 1; the settings' check read it through float(), which holds 53 bits, so 2**60 + 1 ran
    (and was reported) as 2**60: another run than the client asked for."""
    showcase = Showcase(ui_config(), PairCache())
    seed = 2**60 + 1
    run = asyncio.run(generate_endpoint(showcase)("def f():", temperature=0.8, max_new_tokens=4, seed=seed))
    assert run["seed"] == seed
