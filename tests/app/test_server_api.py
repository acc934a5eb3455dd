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
from specui.presets import load_config
from specui.ui.api import generate_endpoint, own_settings
from specui.ui.request import SEEDS_DRAWN
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


@pytest.mark.parametrize("fields", [{"seed": 10**400}, {"max_new_tokens": 10**400}, {"temperature": 10**400}])
def test_a_number_past_any_float_is_refused_by_name(fields):
    """JSON holds integers of any size (Python reads them exactly): one past a float's range raised OverflowError from
    the type check or the range check, a traceback, not the refusal naming the parameter."""
    generate = generate_endpoint(Showcase(ui_config(), PairCache()))
    with pytest.raises(gr.Error) as refused:
        asyncio.run(generate("def f():", **fields))
    assert refused.value.message.startswith(next(iter(fields)).replace("_", " ")), refused.value.message


@pytest.mark.parametrize("seed", ["+-5", "²", "9" * 5000, "9" * 400], ids=["signs", "superscript", "5000", "400"])
def test_a_seed_string_no_int_reads_is_a_settings_error(seed):
    """The page's reading of a whole number takes a string of digits exactly; one int() cannot read (signs twice, a
    superscript digit that str.isdigit takes, past int()'s 4,300 digits) or past a float's range is still refused as
    the settings' mistake (SettingsError), not a ValueError or OverflowError from inside the check."""
    from specui.settings import SettingsError
    from specui.ui.request import Settings

    with pytest.raises(SettingsError, match="^seed must be"):
        Settings.from_ui(preset="bundled", num_draft_tokens=4, max_new_tokens=8, seed=seed)


@pytest.mark.parametrize("fields", [{"seed": "9" * 5000}, {"drafter": "x" * 5000}, {"top_k": "x" * 5000},
                                    {"temperature": [0.5] * 2000}])
def test_a_refusal_quotes_a_long_value_cut_short(fields):
    """A refusal repeated the client's value whole: 5,000 characters back for a mistyped seed."""
    showcase = Showcase(ui_config(), PairCache())
    with pytest.raises(gr.Error) as refused:
        asyncio.run(generate_endpoint(showcase)("def f():", max_new_tokens=4, **fields))
    assert len(refused.value.message) < 300 and "characters)" in refused.value.message, refused.value.message


def test_a_fresh_seed_is_one_the_pages_seed_box_takes_and_replays_the_answer():
    """/generate's seed -1 drew 63 bits in the engine: a seed the page's Seed box (2**53 - 1 at most) cannot take. It is
    drawn as the page's is (`request.seeded`), below SEEDS_DRAWN, and sent back replays the same tokens."""
    generate = generate_endpoint(Showcase(ui_config(), PairCache()))
    fresh = asyncio.run(generate("def f():", temperature=0.8, max_new_tokens=6, seed=-1))
    assert 0 <= fresh["seed"] < SEEDS_DRAWN
    again = asyncio.run(generate("def f():", temperature=0.8, max_new_tokens=6, seed=fresh["seed"]))
    assert again["seed"] == fresh["seed"] and again["tokens"] == fresh["tokens"]


def test_a_token_trees_run_keeps_no_confidence_floor_unless_it_names_one():
    """docs/engine.md: a tree's run (tree_width > 1) keeps no confidence floor unless it names one, as the library,
    the benchmark and the terminal do; /generate gave it the preset's chain floor, pruning its trees."""
    showcase = Showcase(load_config(None), PairCache())  # models.yaml's presets: nothing loads
    own = showcase.config.get(None)
    name, floor = max(dict(own.draft_confidence).items(), key=lambda item: item[1])
    assert floor > 0  # the preset has a chain floor for this drafter, which a chain takes
    assert own_settings(showcase, None, name, None, None)[2] == floor
    assert own_settings(showcase, None, name, None, None, tree=True)[2] == 0
    assert own_settings(showcase, None, name, None, 0.3, tree=True)[2] == 0.3
