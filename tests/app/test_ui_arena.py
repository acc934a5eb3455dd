"""The chat tab's arena mode without a server: its table rows, chart, token HTML and verdict from hand-made
runs; then the session on the bundled pair (plain decoding and every drafter, one after another, Stop)."""

from __future__ import annotations

import json
import threading
from html.parser import HTMLParser
from itertools import pairwise

import pytest

from specui import arena
from specui.events import GenerationResult, Round
from specui.ui import arena_view, charts, render, stats
from specui.ui.render import TokenView
from specui.ui.request import Settings
from tools import frame_bytes
from tools.frame_bytes import edits

INJECTION = "<img src=x onerror=alert(1)>"


def result_of(blocks, *, plain=False, draft_s=0.002, verify_s=0.01):
    """A finished run whose rounds emit `blocks` (lists of (token, kind)); a drafter's round drafted its
    accepted tokens plus one (rejected) unless it ends in a bonus."""
    result = GenerationResult(prefill_s=0.01)
    for i, block in enumerate(blocks):
        tokens, kinds = [t for t, _ in block], [k for _, k in block]
        accepted = sum(k == "accepted" for k in kinds)
        drafted = [] if plain else tokens[:accepted] + ([99] if kinds[-1] == "resampled" else [])
        result.add(Round(index=i, token_ids=tokens, kinds=kinds, drafted=drafted, num_accepted=accepted,
                         target_probs=[0.5] * len(drafted), draft_probs=[1.0] * len(drafted),
                         accept_probs=[1.0] * accepted + [0.0] * (len(drafted) - accepted), uniforms=[],
                         token_target_probs=[0.5] * len(tokens), token_draft_probs=[None] * len(tokens),
                         residual_top=[], num_draft_tokens=0 if plain else 3, draft_s=0.0 if plain else draft_s,
                         verify_s=verify_s, elapsed_s=0.0, speculative=not plain))
    result.stop_reason = "length"
    return result


@pytest.fixture
def results():
    return {"plain": result_of([[(t, "plain")] for t in (1, 2, 3, 4)], plain=True),
            "model": result_of([[(1, "accepted"), (2, "accepted"), (3, "resampled")], [(4, "bonus")]]),
            "prompt_lookup": result_of([[(1, "accepted"), (2, "resampled")], [(3, "accepted"), (4, "bonus")]])}


def test_table_rows_give_each_contestants_figures(results):
    rows = stats.arena_rows(arena.summarise(results, greedy=True))
    assert [r[0] for r in rows] == ["plain (target alone)", "draft model", "prompt lookup"]
    assert all(len(r) == len(stats.ARENA_HEADERS) for r in rows)
    plain, model, lookup = (r[:1] + r[2:] for r in rows)  # K apart
    assert [r[1] for r in rows] == ["–", "3", "3"]  # no settings given: the K its rounds asked for
    assert plain[1] == "–" and plain[2] == "1.00" and plain[5] == "1.00×" and plain[6] == "reference"
    assert model[1] == "0.667" and model[2] == "2.00" and model[6] == "yes"  # 2 of 3 drafts accepted, 4 tokens in 2 rounds
    assert lookup[1] == "0.667" and lookup[6] == "yes"
    results["model"].token_ids[3] = 7  # an output that parts from plain decoding's
    assert stats.arena_rows(arena.summarise(results, greedy=True))[1][7] == "NO"
    assert stats.arena_rows(arena.summarise(results, greedy=False))[1][7] == "–"
    assert stats.arena_rows(None) == []


def test_the_tables_k_is_the_k_chosen_as_the_stats_line_gives_it(results):
    """K 64 and a budget of a few tokens: every round asked for fewer drafts than K (the table had said 63 where the
    stats line and the Teach tab say 64); a drafter with its own K in the preset gives that; adaptive K, the K most
    rounds asked for. Theorem 3.8 is taken at the same K."""
    from specui.settings import DecodeSettings

    chosen = arena.summarise(results, greedy=True, settings=DecodeSettings(num_draft_tokens=64),
                             ks={"prompt_lookup": 2})
    assert [r[1] for r in stats.arena_rows(chosen)] == ["–", "64", "2"]
    assert [s.k for s in chosen.standings] == [None, 64, 2]
    assert chosen.standing("model").stats.theory.k == 64
    adaptive = arena.summarise(results, greedy=True, settings=DecodeSettings(num_draft_tokens=64, adaptive=True))
    assert [r[1] for r in stats.arena_rows(adaptive)] == ["–", "3", "3"]
    assert arena.chosen_k(DecodeSettings(num_draft_tokens=5), "plain") is None


def test_the_chart_has_a_panel_per_figure_and_a_bar_per_contestant(results):
    outcome = arena.summarise(results, greedy=True)
    fig = charts.arena_figure(outcome)
    panels = len(charts.ARENA_PANELS)
    assert len(fig.data) == panels * 3 and all(t.type == "bar" for t in fig.data)
    assert [t.name for t in fig.data if t.showlegend] == ["plain (target alone)", "draft model", "prompt lookup"]
    model = [t for t in fig.data if t.name == "draft model"]
    by_panel = dict(zip((title for title, _ in charts.ARENA_PANELS), (t.y[0] for t in model)))
    s = outcome.standing("model")
    assert by_panel["tokens/s"] == pytest.approx(s.stats.tokens_per_s, rel=1e-3)
    assert by_panel["speedup ×"] == pytest.approx(s.speedup, rel=1e-3)
    assert by_panel["acceptance rate"] == pytest.approx(2 / 3, rel=1e-3) and by_panel["mean accepted length"] == 2.0
    assert by_panel["c (draft cost)"] == pytest.approx(s.stats.cost_ratio, rel=1e-3)
    assert [t.y[0] for t in fig.data if t.name == "plain (target alone)"][2] is None  # plain drafts nothing
    empty = charts.arena_figure()
    assert not empty.data and "Arena" in empty.layout.annotations[-1].text
    for figure in (fig, empty):
        assert json.loads(figure.to_json())["layout"]["title"]["text"]


def test_the_run_charts_follow_every_contestant_in_an_arena(results):
    """Below the arena's own chart, the four run charts: speed and acceptance by position with a line per
    contestant (plain decoding drafts nothing, so it has no position line), the per-round ones saying they
    follow a single run, not standing empty."""
    figures = charts.arena_run_figures(results)
    assert set(figures) == set(charts.all_figures())
    speed, position = figures["chart-speed"], figures["chart-position"]
    assert [t.name for t in speed.data] == ["plain (target alone)", "draft model", "prompt lookup"]
    assert speed.data[0].line.dash == "dot" and all(len(t.x) == len(results[n].rounds)
                                                     for t, n in zip(speed.data, results))
    assert [t.name for t in position.data] == ["draft model", "prompt lookup"]
    assert list(position.data[0].y) == [1.0, 1.0, 0.0]  # model: positions 1 and 2 accepted, 3 rejected
    assert list(position.data[0].y) == list(charts.position_figure(results["model"]).data[0].y)  # as one run's bars
    for name in ("chart-acceptance", "chart-tokens-per-round"):
        assert not any(any(t.y) for t in figures[name].data) and "arena" in figures[name].layout.annotations[0].text
        assert len(figures[name].layout.annotations) == 1  # its note alone, not over the empty chart's
    before = charts.arena_run_figures()  # plain decoding has not started yet
    assert not before["chart-speed"].data and not before["chart-position"].data


class Tokens(HTMLParser):
    def __init__(self):
        super().__init__()
        self.spans, self.tags, self._in = [], [], None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.append(tag)
        if tag == "span" and "tok" in attrs.get("class", "").split():
            self._in = {"class": attrs["class"], "title": attrs.get("title", ""), "text": ""}
            self.spans.append(self._in)

    def handle_endtag(self, tag):
        self._in = None

    def handle_data(self, data):
        if self._in is not None:
            self._in["text"] += data


def test_each_token_is_coloured_by_the_drafters_that_proposed_it_and_model_text_stays_text(results):
    outcome = arena.summarise(results, greedy=True)
    texts = ["a", INJECTION, "c", "\n  d"]
    lanes = [(name, arena.label(name), [TokenView(text=t, kind=k) for t, k in zip(texts, results[name].kinds)])
             for name in results]
    labels = {name: arena.label(name) for name in results}
    plain = [TokenView(text=t, kind="plain", special=i == 3) for i, t in enumerate(texts)]  # the last: an end of turn
    markup = arena_view.render_arena(list(zip(plain, outcome.credits)), lanes, labels=labels, streaming="prompt_lookup")
    assert "<img" not in markup and "&lt;img" in markup
    parser = Tokens()
    parser.feed(markup)
    assert "img" not in parser.tags
    key, who = parser.spans[:4], parser.spans[4:8]
    assert [s["class"] for s in key] == ["tok arena-model", "tok arena-prompt_lookup", "tok arena-many", "tok arena-none"]
    assert [s["text"] for s in who] == texts
    # token 1: both drafted it; 2: only the model (lookup's draft was rejected); 3: only lookup; 4: bonus in both
    assert [s["class"] for s in who] == ["tok arena-many", "tok arena-model", "tok arena-prompt_lookup",
                                         "tok arena-none tok-special"]  # the special token shows as a marker
    assert "proposed it: draft model ·" in who[1]["title"] and "resampled): prompt lookup" in who[1]["title"]
    # the drafters that did the same at a token are named together: "proposed it: draft model, draft model + lookup"
    assert who[0]["title"].count("proposed it") == 1 and "proposed it: draft model, prompt lookup" in who[0]["title"]
    assert "bonus" in who[3]["title"] and INJECTION in who[1]["title"] and "special token" in who[3]["title"]
    lanes_spans = parser.spans[8:]
    assert [s["class"] for s in lanes_spans[4:8]] == ["tok tok-accepted", "tok tok-accepted", "tok tok-resampled",
                                                      "tok tok-bonus"]  # the model's own run, by kind
    assert markup.count("specui-caret") == 1 and markup.index("specui-caret") > markup.index("prompt lookup</div>")


def test_no_who_line_before_a_drafter_runs_and_the_verdicts():
    plain_only = arena_view.render_arena([], [("plain", "plain", [TokenView(text="x", kind="plain")])], labels={})
    assert "Who proposed" not in plain_only and "tok-plain" in plain_only
    assert "identical" in arena_view.render_arena_verdict(greedy=True, differ=[], finished=True)
    assert arena_view.render_arena_verdict(greedy=True, differ=[], finished=False) == ""
    differ = arena_view.render_arena_verdict(greedy=True, differ=[("prompt lookup", 3)], finished=True)
    assert "prompt lookup at token 3" in differ and "specui-different" in differ
    assert "sampling" in arena_view.render_arena_verdict(greedy=False, differ=[], finished=True)


def test_settings_take_the_arena_box():
    assert Settings.from_ui(num_draft_tokens=3, max_new_tokens=8, arena=True).arena is True
    assert Settings.from_ui(num_draft_tokens=3, max_new_tokens=8).arena is False


def test_the_chat_tab_has_the_arena_box_table_and_chart(tmp_path):
    import gradio as gr

    from specui.presets import load_config
    from specui.ui.blocks import chat_tab

    (tmp_path / "models.yaml").write_text("default: tiny\npresets:\n  tiny:\n    target: ./nowhere\n"
                                          "    drafter: prompt_lookup\n")
    with gr.Blocks() as demo:
        tab = chat_tab(load_config(tmp_path / "models.yaml"))
    ids = {c.get("props", {}).get("elem_id") for c in demo.config["components"]}
    assert {"arena", "arena-results", "arena-table", "chart-arena"} <= ids
    assert tab.results.arena_table in tab.outputs and tab.results.plots["chart-arena"] in tab.outputs


# -- the session, on the bundled pair ------------------------------------------------------------------


@pytest.fixture(scope="module")
def showcase():
    from specui.loading import PairCache
    from specui.ui.session import Showcase
    from tests.helpers import ui_config

    return Showcase(ui_config(), PairCache())


PROMPT = "def main(argv):\n    "


def test_an_arena_request_runs_plain_then_every_drafter_and_fills_the_table(showcase, monkeypatch):
    """And its streamed frames grow at their end but where a contestant starts (a frame every round, the fixture's
    pair): each is left open after the streaming lane's last token (its caret), the who-proposed-it line crediting the
    runs done and that lane's title its name, so gradio's queue sends a contestant's frames after its first as appends
    of what they gained (`gradio.utils.diff` of the Chatbot's values), where every frame went whole (20-40 kB); a
    contestant's first frame (the lane before it closed, its figures in its title, the who line crediting it) and the
    final one go whole."""
    from specui.ui import session

    # a frame every round, however fast the machine: no hold for the page to read a frame (its bytes at a rate)
    monkeypatch.setattr(session, "FRAME_BYTES_PER_S", float("inf"))
    fast = session.Showcase(showcase.config, showcase.cache, text_interval=0, chart_interval=1e9)
    frames = list(fast.run(PROMPT, Settings(max_new_tokens=16, arena=True, seed=0)))
    frame, run = frames[-1]
    assert frame.done and run.phase == "done" and frame.error is None
    assert list(run.arena) == ["plain", "model", "model_lookup", "eagle", "medusa", "early_exit", "early_exit_lookup",
                               "prompt_lookup"]
    assert all(r.token_ids == run.arena["plain"].token_ids for r in run.arena.values())
    assert [row[0] for row in frame.table] == ["plain (target alone)", "draft model", "draft model + lookup", "EAGLE",
                                               "Medusa", "early exit", "early exit + lookup", "prompt lookup"]
    assert [row[-1] for row in frame.table] == ["reference", "yes", "yes", "yes", "yes", "yes", "yes", "yes"]
    assert set(frame.figures) == {"chart-arena", *charts.all_figures()}
    assert len(frame.figures["chart-arena"].data) == 8 * len(charts.ARENA_PANELS)
    assert "identical to plain decoding" in frame.message and "Who proposed each token" in frame.message
    assert run.reply_text == "".join(v.text for v in run.arena_views["plain"]) and run.reply_text
    assert frame.race.count('class="race-lane"') == 8 and "prompt lookup · " in frame.race
    assert all(f.race is None for f, _ in frames[:-1])
    streamed = [f.message for f, _ in frames if not f.done and "specui-arena" in f.message]
    lanes = [m.count('class="arena-lane"') for m in streamed]
    assert sorted(set(lanes)) == list(range(1, 9)), "the arena streams each of its runs as it decodes"
    for m, n in zip(streamed, lanes):  # open: the streaming lane's block last, its caret; the who line once two ran
        assert m.count(render.CARET) == 1 and "<div" not in m[m.index(render.CARET):] and m.endswith("</span>"), m
        assert ("Who proposed" in m) == (n > 2)
    whole = [i + 1 for i, (old, new) in enumerate(pairwise(streamed)) if [e[0] for e in edits(old, new)] != ["append"]]
    assert whole == [i for i in range(1, len(lanes)) if lanes[i] > lanes[i - 1]] and len(whole) < len(streamed) - 9
    on_the_wire = frame_bytes.count([*streamed, frame.message])  # as `python -m tools.frame_bytes --arena` counts them
    assert on_the_wire["appends"] == len(streamed) - 1 - len(whole) and on_the_wire["frames"] == len(streamed) + 1
    assert render.CARET not in frame.message and frame.message.endswith("</div></div>")


def test_an_arena_with_trees_ignores_a_drafter_that_cannot_draft_them(showcase):
    """The page's drafter radio may still say prompt lookup when Arena and a tree are switched on: the
    arena races every drafter anyway, so that choice must not refuse the request."""
    settings = Settings.from_ui(drafter="prompt lookup", num_draft_tokens=3, max_new_tokens=12, seed=0, arena=True,
                                tree_width=2)
    frame, run = list(showcase.run(PROMPT, settings))[-1]
    assert frame.error is None and run.phase == "done"
    assert list(run.arena) == ["plain", "model", "eagle", "medusa"]  # the tree drafters
    assert set(run.skipped) == {"model_lookup", "early_exit", "early_exit_lookup", "prompt_lookup"}
    assert all(r.token_ids == run.arena["plain"].token_ids for r in run.arena.values())


def test_stop_ends_the_arena_between_rounds(showcase):
    halt = threading.Event()
    for frame, run in showcase.run(PROMPT, Settings(max_new_tokens=200, arena=True), stop=halt):
        if run.arena.get("plain") and run.arena["plain"].rounds:
            halt.set()
    assert run.phase == "stopped" and frame.done and list(run.arena) == ["plain"]
    assert len(run.arena["plain"].rounds) == 1 and "Stopped" in frame.stats and "stopped" in frame.message
    assert frame.race is None  # no replay of a stopped arena
    assert showcase.live == 0


def test_drafters_with_their_own_k_race_at_it_and_the_slider_follows_the_drafter(showcase):
    """A preset's drafter_tokens: the arena runs those drafters at their own K, the about line names them,
    and choosing such a drafter moves the K slider to its K (a preset without them leaves K alone)."""
    from dataclasses import replace

    from specui.loading import PairCache
    from specui.ui.preset_view import about as _about
    from specui.ui.preset_view import on_drafter
    from specui.ui.session import Showcase

    config = showcase.config
    bundled = config.get("bundled")
    own = replace(bundled, num_draft_tokens=3, drafter_tokens=(("medusa", 1), ("prompt_lookup", 2)))
    config = replace(config, presets={**config.presets, "bundled": own})
    frame, run = list(Showcase(config, PairCache()).run(PROMPT, Settings(max_new_tokens=12, arena=True, seed=0,
                                                                         num_draft_tokens=3)))[-1]
    assert frame.error is None and run.phase == "done"
    asked = {name: max(r.num_draft_tokens for r in result.rounds) for name, result in run.arena.items() if name != "plain"}
    assert asked == {"model": 3, "model_lookup": 3, "eagle": 3, "medusa": 1, "early_exit": 3, "early_exit_lookup": 3,
                     "prompt_lookup": 2}
    table_k = {row[0]: row[1] for row in frame.table}  # the table says which K each raced at
    assert table_k["Medusa"] == "1" and table_k["prompt lookup"] == "2" and table_k["draft model"] == "3"
    frame, run = list(Showcase(config, PairCache()).run(PROMPT, Settings(max_new_tokens=8, arena=True, seed=0,
                                                                         num_draft_tokens=64, ignore_eos=True)))[-1]
    assert max(r.num_draft_tokens for r in run.arena["model"].rounds) == 7  # the budget cut every round short,
    table_k = {row[0]: row[1] for row in frame.table}  # but the table gives the K chosen, as the stats line does
    assert table_k["draft model"] == "64" and table_k["Medusa"] == "1" and table_k["plain (target alone)"] == "–"
    assert all(r.token_ids == run.arena["plain"].token_ids for r in run.arena.values())
    assert "K = 3 (Medusa 1, prompt lookup 2)" in _about(own) and "Drafter: draft model ·" in _about(own)
    for drafter, label in (("model_lookup", "draft model + lookup ·"), ("eagle", "EAGLE ·")):
        assert f"Drafter: {label}" in _about(replace(bundled, drafter=drafter))  # the preset's own drafter, named
    assert "Drafter: prompt lookup (no draft model) ·" in _about(replace(bundled, draft=None, drafter="prompt_lookup"))
    eagle_own = replace(own, drafter="eagle", drafter_tokens=(("eagle", 5), ("medusa", 1)))  # as the chat preset
    assert "Drafter: EAGLE · K = 5 (Medusa 1, others 3) ·" in _about(eagle_own)
    assert on_drafter(config, "bundled", "Medusa")["value"] == 1
    assert on_drafter(config, "bundled", "EAGLE")["value"] == 3
    plain_k = {**config.presets, "bundled": replace(bundled, drafter_tokens=())}
    assert "value" not in on_drafter(replace(config, presets=plain_k), "bundled", "Medusa")  # none: K stays


def test_a_drafter_races_with_its_own_draft_confidence_and_the_slider_follows_it(showcase):
    """A preset's `draft_confidence` gives a drafter its own stop in the arena (as `drafter_tokens` its own K): its
    chains draft fewer than K where it is unsure, the others draft K; the chat's confidence slider follows the
    drafter chosen, and the preset's line says it."""
    from dataclasses import replace

    from specui.loading import PairCache
    from specui.ui.preset_view import about, on_chat_drafter
    from specui.ui.session import Showcase

    config = showcase.config
    own = replace(config.get("bundled"), draft_confidence=(("model", 0.5),))
    config = replace(config, presets={**config.presets, "bundled": own})
    frame, run = list(Showcase(config, PairCache()).run(PROMPT, Settings(max_new_tokens=24, arena=True, seed=0,
                                                                         num_draft_tokens=4)))[-1]
    assert frame.error is None and run.phase == "done"
    short = {name: [r.num_drafted < r.num_draft_tokens for r in result.rounds] for name, result in run.arena.items()}
    assert any(short["model"]) and not any(short["eagle"])  # asked K (or what the budget left): fewer, and all
    assert all(r.token_ids == run.arena["plain"].token_ids for r in run.arena.values())
    k, confidence = on_chat_drafter(config, "bundled", "draft model")
    assert k["value"] == 7 and confidence["value"] == 0.5 and on_chat_drafter(config, "bundled", "EAGLE")[1]["value"] == 0.0
    assert "value" not in on_chat_drafter(showcase.config, "bundled", "EAGLE")[1]  # none named: the slider stays
    assert "Drafter: draft model · K = 7, drafting while confident ≥ 0.5 (Medusa 2" in about(own)


def test_the_teach_tab_takes_the_presets_drafter_and_k_as_the_chat_tab_does(showcase):
    """The Teach tab opens on the default preset's drafter at that drafter's K (the chat preset: EAGLE at 3, not
    the others' 2); choosing a preset brings its drafter and K, a drafter its own K, all within the tab's K range."""
    from dataclasses import replace

    import gradio as gr

    from specui.drafters import LABELS
    from specui.loading import PairCache
    from specui.ui import teaching
    from specui.ui.preset_view import on_drafter, on_preset
    from specui.ui.session import Showcase

    config = showcase.config
    bundled = config.get("bundled")
    eagle_own = replace(bundled, drafter="eagle", num_draft_tokens=2, drafter_tokens=(("eagle", 3), ("medusa", 12)))
    config = replace(config, presets={**config.presets, "bundled": eagle_own})
    drafter, k = on_preset(config, "bundled", k_max=teaching.TEACH_K_MAX)
    assert drafter["value"] == LABELS["eagle"] and k["value"] == 3
    assert on_drafter(config, "bundled", LABELS["medusa"], k_max=teaching.TEACH_K_MAX)["value"] == 8  # 12, capped
    assert on_drafter(config, "bundled", LABELS["model"], k_max=teaching.TEACH_K_MAX)["value"] == 2
    assert all("value" not in update for update in on_preset(config, "no such preset", k_max=teaching.TEACH_K_MAX))
    with gr.Blocks():
        tab = teaching.teaching_tab(Showcase(config, PairCache()), tab=False)
    assert tab.controls.drafter.value == LABELS["eagle"] and tab.controls.k.value == 3


def test_a_contestants_title_names_its_acceptance_rate_as_the_table_does(results):
    """The title's figure is the table's "acceptance rate" column (accepted drafts / drafted); α is the stats line's
    fitted per-token acceptance, another number."""
    from specui.ui import arena_view

    standing = arena.summarise(results, greedy=True).standing("model")
    title = arena_view._title("model", standing)
    assert "acceptance rate 0.67" in title and "α" not in title
    assert "acceptance rate" in stats.ARENA_HEADERS
