"""The Chat tab's Seed -1, through its handlers without a server or a browser (over the bundled pair): the app draws
the seed (`request.seeded`) below 10**9, once for the whole request, so the stats line shows one the page's Seed box
holds, and that seed typed back (as the box sends it) gives the very tokens again, the compare run's plain column and
a sampled arena's every contestant too; the Teach tab's "Step through" gets it with the message. The engine drew 63
bits: more than a page's number holds, and the hand-off said "the seed was random" and kept the Teach tab's."""

from __future__ import annotations

import json
import re

import pytest

from specui.ui import teach_handoff, teaching
from specui.ui.blocks import MAX_SEED_SHOWN
from specui.ui.chat_handlers import respond, retry
from specui.ui.request import SEEDS_DRAWN
from tests.app.test_ui_teach_handoff import (CODE, chat, chat_form, chat_state, tabs,  # noqa: F401 - the fixtures
                                             teach_form)

pytestmark = pytest.mark.slow  # runs the bundled pair

SAMPLED = {"temperature": 0.9, "k": 3, "max_new": 16}  # 16: a budget the Teach tab takes as it is


def sent(app, ui, prompt: str, **values) -> tuple[dict, dict]:
    """A real chat run of `prompt`: the inputs it was sent with, and each output as its frames left it."""
    data, page = chat_form(ui, prompt, **values), {}
    for frame in respond(app, ui, data):
        page.update(frame)
    return data, page


def shown_seed(stats: str) -> int:
    """The seed the stats line shows."""
    found = re.search(r'stat-name">seed</span> <span class="stat-value">(\d+)<', stats)
    assert found, stats
    return int(found.group(1))


def typed_back(ui, seed: int):
    """The seed as the page's Seed box sends it when typed in: a javascript number, read by its gr.Number."""
    return ui.controls.seed.preprocess(float(seed))


def ran(last, ui) -> dict:
    with open(last[ui.results.export]["value"], encoding="utf-8") as f:
        return json.load(f)


def test_minus_one_draws_a_short_seed_shown_in_the_stats_that_typed_back_replays_both_runs(tabs):  # noqa: F811
    ui, _, app = tabs
    _, first = sent(app, ui, CODE, seed=-1, compare=True, **SAMPLED)
    seed = shown_seed(first[ui.results.stats])
    answer = ran(first, ui)
    assert 0 <= seed < SEEDS_DRAWN and answer["seed"] == answer["settings"]["seed"] == seed
    _, again = sent(app, ui, CODE, seed=typed_back(ui, seed), compare=True, **SAMPLED)
    replayed = ran(again, ui)
    assert shown_seed(again[ui.results.stats]) == seed
    assert [t["id"] for t in replayed["tokens"]] == [t["id"] for t in answer["tokens"]]
    assert replayed["plain_text"] == answer["plain_text"]  # the plain run took the same seed
    _, greedy = sent(app, ui, CODE, seed=-1, temperature=0.0, k=3, max_new=8)
    assert 'stat-name">seed<' not in greedy[ui.results.stats]  # a greedy run reads none: none to show


def test_a_sampled_arenas_seed_is_said_and_typed_back_replays_every_contestant(tabs):  # noqa: F811
    ui, _, app = tabs
    _, first = sent(app, ui, CODE, seed=-1, arena=True, **SAMPLED)
    answer = ran(first, ui)
    seed = answer["seed"]
    assert 0 <= seed < SEEDS_DRAWN and f"the same prompt, settings and seed ({seed})." in first[ui.results.stats]
    _, again = sent(app, ui, CODE, seed=typed_back(ui, seed), arena=True, **SAMPLED)
    assert {n: a["token_ids"] for n, a in ran(again, ui)["arena"].items()} == {
        n: a["token_ids"] for n, a in answer["arena"].items()}


def test_the_hand_off_carries_the_seed_minus_one_drew_and_the_teach_tab_replays_the_message(tabs):  # noqa: F811
    ui, teach, app = tabs
    data, last = sent(app, ui, CODE, seed=-1, **SAMPLED)
    answer = ran(last, ui)
    moved = teach_handoff.step_through(ui, teach, {**data, **chat_state(ui, last), ui.controls.k: 6},
                                       max_seed=MAX_SEED_SHOWN)
    assert moved[teach.controls.seed] == answer["seed"] and moved[teach.controls.k] == 3
    assert "random" not in moved[teach.step.status]
    decoded = teaching.decode(teaching.TeachState(app.showcase), teach, teach_form(teach, moved))
    assert decoded[teach.run].spec.token_ids == [t["id"] for t in answer["tokens"]]
    # where the message's own settings cannot be read, a Seed of -1 in the chat's box is still random: said so
    unknown = teach_handoff.step_through(ui, teach, {**data, **chat_state(ui, last), ui.results.export: None},
                                         max_seed=MAX_SEED_SHOWN)
    assert teach.controls.seed not in unknown and "the seed was random" in unknown[teach.step.status]


def test_in_a_chat_the_seed_typed_back_replays_the_message_by_its_retry_as_the_stats_hint_says(chat):  # noqa: F811
    """In a conversation the same message sent again follows the reply it got: another context, other tokens, though
    the stats' hint said that the seed typed in Seed "runs the same tokens again". ↻ runs the message again in its
    own context, and with the seed typed back gives the very tokens: the hint names it."""
    ui, _, app, _ = chat
    values, state, frames = {"preset": "bundled-chat", **SAMPLED}, {}, []
    for prompt in ("def add(a, b):\n    ", CODE):  # two turns: the second has a conversation before it
        frames = list(respond(app, ui, {**chat_form(ui, prompt, **values), **state}))
        state = {ui.messages: frames[-1][ui.messages], ui.turns: frames[-1][ui.turns],
                 ui.exchanges: frames[-1][ui.exchanges]}
    line = [f for f in frames if ui.results.stats in f][-1][ui.results.stats]
    seed, answer = shown_seed(line), ran(frames[-1], ui)
    again = list(retry(app, ui, {**chat_form(ui, "", **{**values, "seed": typed_back(ui, seed)}), **state}))
    assert [t["id"] for t in ran(again[-1], ui)["tokens"]] == [t["id"] for t in answer["tokens"]]
    hint = re.search(r'<span class="stat" title="([^"]*)"><span class="stat-name">seed<', line).group(1)
    assert "↻" in hint and "new message" in hint, hint
