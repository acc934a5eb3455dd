"""Token trees in the chat tab, without a server: the tree chart (nodes, edges, the accepted path, escaped
labels, the step view), the round picker's handlers, the tree settings from widgets, and a chat request on
the bundled pair with tree width 2 whose tree rounds reach the tree view (and give no theoretical speedup)."""

from __future__ import annotations

import json

import pytest

from specui.events import TreeNode
from specui.tree_steps import TreeRecord, tree_steps
from specui.ui import chat_tree
from specui.ui.request import Settings, SettingsError
from specui.ui.tree_chart import FINAL, plain_label, positions, tree_figure

INJECTION = "<img src=x onerror=alert(1)>"


def record(**changes) -> TreeRecord:
    """Root -> 0 (accepted) -> 2 (rejected), 3 (rejected); root -> 1 (never judged); then a resample at 0."""
    nodes = (TreeNode(0, 10, -1, 0.6, 0.7, 0.6, 0.3, "accepted"), TreeNode(1, 11, -1, 0.2, 0.2, None, None, "unvisited"),
             TreeNode(2, 12, 0, 0.4, 0.5, 0.4, 0.8, "rejected"), TreeNode(3, 13, 0, 0.3, 0.2, 0.5, 0.9, "rejected"))
    base = dict(round_index=2, nodes=nodes, path=(0,), texts=(" a", INJECTION, "\n", "b&c"), root_text="x",
                greedy=False, sampled=False, final_id=14, final_text="z", final_kind="resampled", final_p=0.25,
                residual=((14, "z", 0.5),))
    return TreeRecord(**{**base, **changes})


def traces(fig, name):
    return [t for t in fig.data if t.name == name]


def test_the_layout_puts_nodes_at_their_depth_and_parents_beside_their_children():
    xy = positions(record())
    assert {n: x for n, (x, _) in xy.items()} == {-1: 0, 0: 1, 1: 1, 2: 2, 3: 2, FINAL: 2}
    assert xy[2][1] < xy[3][1] < xy[FINAL][1] < xy[1][1]  # leaves top to bottom in drafting order, the own token last
    assert xy[0][1] == pytest.approx((xy[2][1] + xy[3][1] + xy[FINAL][1]) / 3)


def test_the_figure_has_every_node_and_edge_and_highlights_the_accepted_path():
    fig = tree_figure(record())
    edges = fig.data[0]
    assert sum(x is None for x in edges.x) == 4  # one edge per node
    (path,) = traces(fig, "accepted path")
    assert path.line.width > edges.line.width and sum(x is None for x in path.x) == 2  # root -> 0 -> own token
    assert list(path.x) == [0, 1, None, 1, 2, None]
    (accepted,), (rejected,), (never,) = traces(fig, "accepted"), traces(fig, "rejected"), traces(fig, "never judged")
    assert len(accepted.x) == 1 and len(rejected.x) == 2 and len(never.x) == 1
    assert accepted.marker.color != rejected.marker.color
    (root,) = traces(fig, "root (the last token so far)")  # the legend in a reader's words, not the engine's "cur"
    assert list(root.text) == ["x"]
    (own,) = traces(fig, "round's own token (resampled)")
    assert "resampled" in own.hovertext[0] and "p = 0.2500" in own.hovertext[0]
    hover = rejected.hovertext[1]
    assert "node 3" in hover and "p(x) = 0.3000" in hover and "q(x) = 0.2000" in hover
    assert "acceptance probability = 0.5000" in hover and "draw r = 0.9000" in hover and "rejected" in hover
    assert json.loads(fig.to_json())["layout"]["title"]["text"].startswith("Round 3: 4 drafted nodes, 1 accepted")


def test_model_text_is_plain_text_in_labels_and_hover():
    fig = tree_figure(record())
    texts = [s for t in fig.data for s in list(t.text or ()) + list(t.hovertext or ())]
    assert not any("<img" in s or "b&c" in s for s in texts)
    (never,) = traces(fig, "never judged")
    assert never.text[0] == plain_label(INJECTION) and never.text[0].startswith("&lt;img")
    assert "&lt;img␣src=x␣onerror=alert(1)&gt;" in never.hovertext[0]
    assert plain_label("\n") == "↵" and plain_label(" a") == "␣a" and plain_label("") == "∅"
    assert plain_label("x" * 40).endswith("…") and len(plain_label("x" * 40)) == 14


def test_the_step_view_colours_only_what_was_judged_so_far():
    steps = tree_steps(record())
    first = tree_figure(record(), step=steps[1])  # the root's first child, accepted
    assert len(traces(first, "accepted")[0].x) == 1 and not traces(first, "rejected")
    assert len(traces(first, "not judged (yet)")[0].x) == 3 and not traces(first, "round's own token (resampled)")
    (ring,) = traces(first, "this step")
    assert (ring.x[0], ring.y[0]) == positions(record())[0]
    last = tree_figure(record(), step=steps[-1])
    assert traces(last, "round's own token (resampled)") and not traces(last, "this step")
    assert len(traces(last, "rejected")[0].x) == 2


def hovers(fig) -> dict:
    """node -> its hover text, read from the figure's node traces (a node's text starts "node N,")."""
    return {int(h.split(",")[0].split()[1]): h for t in fig.data for h in (t.hovertext or ()) if h.startswith("node ")}


def test_a_steps_hover_tells_no_verdict_nor_draw_of_a_node_not_judged_yet():
    """The Teach tab's tree step-through: hovering a node the walk has not reached showed its final draw and "verdict:
    accepted · on the accepted path" while the legend called it "not judged (yet)"."""
    steps = tree_steps(record())
    first = hovers(tree_figure(record(), step=steps[1]))  # node 0 judged (accepted); 2 and 3 come next, 1 never
    for node in (2, 3, 1):
        assert "verdict: not judged (yet)" in first[node], first[node]
        assert "draw" not in first[node] and "accepted" not in first[node] and "rejected" not in first[node]
        assert "acceptance probability" not in first[node] and "p(x) = " in first[node]
    assert "draw r = 0.3000" in first[0] and "verdict: accepted · on the accepted path" in first[0]
    drafted = hovers(tree_figure(record(), step=steps[0]))  # nothing judged yet
    assert all("draw" not in h and "verdict: not judged (yet)" in h for h in drafted.values()) and len(drafted) == 4
    for step in steps:  # at every step: a node's draw and verdict once it is judged, and only then
        shown = hovers(tree_figure(record(), step=step))
        assert {i for i, h in shown.items() if "draw r = " in h} == set(step.tried)
        assert {i for i, h in shown.items() if "on the accepted path" in h} == set(step.path)
    end = tree_figure(record(), step=steps[-1])  # the round over: node 1 never will be judged, and says so
    assert "verdict: never judged" in hovers(end)[1] and traces(end, "never judged") and not traces(end, "not judged (yet)")
    whole = hovers(tree_figure(record()))  # the chat's view of the whole round: the never judged node says so
    assert "verdict: never judged" in whole[1] and "draw" not in whole[1]
    assert "draw r = 0.8000" in whole[2] and "verdict: rejected" in whole[2] and "accepted path" not in whole[2]


def test_empty_tree_and_no_record():
    empty = tree_figure(record(nodes=(), path=(), texts=(), final_kind="bonus"))
    assert traces(empty, "round's own token (bonus)") and not traces(empty, "accepted")
    placeholder = tree_figure()
    assert not placeholder.data and "tree width 2" in placeholder.layout.annotations[0].text


def test_the_round_picker_lists_tree_rounds_and_draws_the_picked_one():
    trees = {2: record(), 0: record(round_index=0, path=(), final_kind="bonus")}
    assert chat_tree.round_choices(trees) == [("round 1 · 4 nodes · 0 accepted + bonus", 0),
                                              ("round 3 · 4 nodes · 1 accepted + resampled", 2)]
    assert chat_tree.show(trees, 2).layout.title.text.startswith("Round 3")
    assert chat_tree.show(trees, "2").layout.title.text.startswith("Round 3")
    assert not chat_tree.show(trees, 7).data and not chat_tree.show({}, None).data


def test_the_chat_tab_has_the_tree_settings_and_view(tmp_path):
    import gradio as gr

    from specui.presets import load_config
    from specui.ui.blocks import chat_tab

    (tmp_path / "models.yaml").write_text("default: tiny\npresets:\n  tiny:\n    target: ./nowhere\n"
                                          "    drafter: prompt_lookup\n")
    with gr.Blocks() as demo:
        tab = chat_tab(load_config(tmp_path / "models.yaml"))
    ids = {c.get("props", {}).get("elem_id") for c in demo.config["components"]}
    assert {"tree-width", "tree-nodes", "tree-view", "tree-round", "chart-tree", "tree-note"} <= ids
    assert {tab.controls.tree_width, tab.controls.tree_nodes} <= tab.controls.inputs
    assert set(tab.tree.outputs) <= set(tab.outputs)
    after = chat_tree.after_run(tab.tree, {2: record()})
    assert after[tab.tree.trees] == {2: record()} and after[tab.tree.pick]["value"] == 2
    assert after[tab.tree.plot].layout.title.text.startswith("Round 3") and "1 tree rounds" in after[tab.tree.note]
    assert chat_tree.cleared(tab.tree)[tab.tree.pick]["choices"] == []


def test_tree_settings_from_widgets():
    s = Settings.from_ui(num_draft_tokens=3, max_new_tokens=8, tree_width=3.0, tree_nodes=10.0)
    assert (s.decode.tree_width, s.decode.tree_nodes) == (3, 10)
    plain = Settings.from_ui(num_draft_tokens=3, max_new_tokens=8, tree_width=None, tree_nodes="")
    assert (plain.tree_width, plain.tree_nodes) == (1, 0)  # blanks: no tree
    with pytest.raises(SettingsError, match="cannot draft trees"):
        Settings.from_ui(num_draft_tokens=3, max_new_tokens=8, drafter="prompt_lookup", tree_width=2)
    with pytest.raises(SettingsError, match="tree width"):
        Settings.from_ui(num_draft_tokens=3, max_new_tokens=8, tree_width=9)


# -- a chat request on the bundled pair ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def showcase():
    from specui.loading import PairCache
    from specui.ui.session import Showcase
    from tests.helpers import ui_config

    return Showcase(ui_config(), PairCache())


def test_a_tree_request_fills_the_tree_view(showcase):
    import gradio as gr

    from specui.ui.blocks import chat_tab
    from specui.ui.chat_handlers import App, respond

    with gr.Blocks():
        ui = chat_tab(showcase.config)
    c = ui.controls
    data = {ui.panel.prompt: "def main(argv):\n    ", ui.messages: [], ui.turns: [], ui.exchanges: [],
            c.preset: "bundled", c.drafter: "draft model", c.k: 3, c.adaptive: False, c.confidence: 0.0, c.temperature: 0.0, c.top_p: 1.0,
            c.top_k: 0, c.penalty: 1.0, c.max_new: 16, c.seed: 0, c.compare: False, c.arena: False, c.tree_width: 2,
            c.tree_nodes: 0, c.system: ""}
    frames = list(respond(App(showcase), ui, data))
    last = frames[-1]
    trees = last[ui.tree.trees]
    assert trees and all(isinstance(r, TreeRecord) for r in trees.values())
    assert last[ui.tree.pick]["value"] == min(trees) and len(last[ui.tree.pick]["choices"]) == len(trees)
    assert last[ui.tree.plot].layout.title.text.startswith(f"Round {min(trees) + 1}:")
    for r in trees.values():
        assert len(r.texts) == len(r.nodes) and set(r.path) <= set(range(len(r.nodes)))
        assert all(r.nodes[i].verdict == "accepted" for i in r.path) and r.final_kind in ("resampled", "bonus")
    # Theorem 3.8 counts a chain of K drafts: a tree run's stats line gives no theoretical speedup (it read 0.00x)
    stats = [f[ui.results.stats] for f in frames if ui.results.stats in f][-1]
    assert "theoretical speedup</span> <span class=\"stat-value\">– (token trees)" in stats and "0.00×" not in stats


def test_an_arena_request_with_trees_skips_prompt_lookup_and_says_so(showcase):
    from specui.ui import stats

    frame, run = list(showcase.run("def main(argv):\n    ", Settings(max_new_tokens=8, arena=True, seed=0,
                                                                          tree_width=2)))[-1]
    assert frame.done and frame.error is None and list(run.arena) == ["plain", "model", "eagle", "medusa"]
    assert run.skipped == ("model_lookup", "early_exit", "early_exit_lookup", "prompt_lookup")
    assert run.arena["model"].token_ids == run.arena["plain"].token_ids
    assert [row[0] for row in frame.table] == ["plain (target alone)", "draft model", "EAGLE", "Medusa",
                                               "draft model + lookup (skipped)", "early exit (skipped)",
                                               "early exit + lookup (skipped)", "prompt lookup (skipped)"]
    assert frame.table[-1][-1] == "skipped: cannot draft token trees" and set(frame.table[-1][1:-1]) == {"–"}
    assert "prompt lookup: skipped, it cannot draft token trees" in frame.stats
    assert len(frame.table[0]) == len(stats.ARENA_HEADERS)


class ChatPage:
    """The Chat tab's preset menu, drafter radio and Tree width with the sliders they move, wired as the app wires
    them (`preset_view.follow_chat`; nothing loads), played as gradio's page plays their one event: each call sent with
    the page's values as they are then (`sent`), its answer put on the page as gradio puts it (`land`), a drafter it
    changes answered after it (the radio's change, sent once the answer has landed)."""

    def __init__(self):
        from pathlib import Path

        import gradio as gr

        from specui.presets import load_config
        from specui.ui import blocks, preset_view

        self.config = load_config(Path(__file__).parents[2] / "models.yaml")  # presets only: nothing loads
        with gr.Blocks() as self.demo:
            tab = blocks.chat_tab(self.config)
            preset_view.follow_chat(tab.controls, self.config)
        self.c = c = tab.controls
        [self.event] = [f for f in self.demo.fns.values() if f.fn and any(t[0] == c.tree_width._id for t in f.targets)]
        self.values = {x: x.value for x in self.event.inputs}

    def sent(self) -> list:
        """The event's inputs as the page sends them now."""
        return [self.values[x] for x in self.event.inputs]

    def land(self, sent: list) -> None:
        """The answer to a call sent with `sent`, put on the page; a drafter it changes fires the event again."""
        drafter = self.values[self.c.drafter]
        for x, value in zip(self.event.outputs, self.event.fn(*sent), strict=True):
            if not isinstance(value, dict):
                self.values[x] = value
            elif "value" in value:  # an update; gr.skip() leaves the component as it is
                self.values[x] = value["value"]
        if self.values[self.c.drafter] != drafter:
            self.land(self.sent())

    def set(self, component, value):
        """The user sets `component` to `value` and its call is answered (nothing else on its way): the slider's
        value then."""
        self.values[component] = value
        self.land(self.sent())
        return self.values[self.c.confidence]


def test_the_preset_menu_the_drafter_and_tree_width_are_one_event_answered_one_at_a_time():
    """Three events, each answered with the page's values as it was sent, crossed: a preset picked as the width moved
    (or the reverse) left the slider as the stale answer set it. One event whose trigger mode is always_last is never
    sent while its last call is on its way: gradio's page holds the next and sends it after, with its values by then
    (gradio's Blocks script: `defer` while `submissions.has(id)`, then `dispatch` again), not queued, private."""
    page = ChatPage()
    c, event = page.c, page.event
    assert {t[0] for t in event.targets} == {c.preset._id, c.drafter._id, c.tree_width._id}
    assert {t[1] for t in event.targets} == {"change"}  # the width's ↺ puts back 1 with a change alone
    assert event.trigger_mode == "always_last" and not event.queue and event.api_visibility == "private"
    assert event.show_progress == "hidden"  # gradio's spinner covered the drafter radio and took its next click
    assert event.inputs[:4] == [c.preset, c.drafter, c.tree_width, c.confidence]
    assert event.outputs[:4] == [c.k, c.drafter, c.confidence, c.about] and event.outputs[4] is event.inputs[4]
    triggers = {c.preset._id, c.drafter._id, c.tree_width._id}
    assert [f for f in page.demo.fns.values() if f.fn and {t[0] for t in f.targets} & triggers] == [event]


def test_the_chat_tabs_confidence_slider_shows_the_floor_a_tree_takes_as_generate_does():
    """At Tree width 2 the Chat tab's confidence slider kept the chat preset's chain floor (EAGLE's 0.6), which the
    tree run took and pruned its trees with, where /generate and python -m specui give a tree none unless one is
    named. The slider now moves to a tree's (0) as the width crosses 1 and back to the chain's at 1, and a preset or
    drafter chosen at width 2 brings a tree's; a floor the user set stays (the run honours it, as the API one named)."""
    from types import SimpleNamespace

    from specui.drafters import LABELS
    from specui.ui.api import own_settings
    from specui.ui.preset_view import on_chat_drafter

    page = ChatPage()
    c, config = page.c, page.config
    preset = config.get(None)
    assert "Tree width 2 or more sets it to 0 unless set by hand" in c.confidence.info  # its help says so

    def api(tree: bool) -> float:  # the floor /generate takes, none named
        return own_settings(SimpleNamespace(config=config), None, None, None, None, tree=tree)[2]

    chain = c.confidence.value
    assert chain == api(False) > 0 and page.values[c.preset] == preset.name  # the chat preset's EAGLE floor
    assert page.set(c.tree_width, 2) == api(True) == 0
    assert page.set(c.tree_width, 1) == chain
    for width, value in ((2, 0.3), (1, 0.3), (3, chain + 0.05), (4, chain + 0.05)):  # the user's own stays
        page.values[c.confidence] = value
        assert page.set(c.tree_width, width) == value
    page.values[c.confidence] = 0.0
    assert page.set(c.preset, "bundled") == 0 and page.set(c.preset, preset.name) == 0  # at width 4: a tree's
    assert page.set(c.tree_width, 1) == chain
    assert page.set(c.drafter, LABELS["model"]) == preset.confidence_for("model") > 0
    assert page.set(c.tree_width, 2) == 0 and page.values[c.drafter] == LABELS["model"]
    assert on_chat_drafter(config, preset.name, LABELS["model"], 2)[1]["value"] == 0
    assert on_chat_drafter(config, preset.name, LABELS["model"], 1)[1]["value"] == preset.confidence_for("model") > 0


def test_a_floor_set_by_hand_on_a_tree_stays_as_the_width_moves_between_trees():
    """The width's handler read a chain's floor as the one the slider came from whenever the new width was a tree: at
    width 2 a floor set by hand to the chain's (0.6, say with the slider's ↺, which gave a chain's) went to 0 as the
    width moved on to 3, a tree still. The page now keeps the shape the last answer was for, and only a move across
    1 moves the slider. Played as the page plays it: each width with the slider's value and the page's state by then."""
    page = ChatPage()
    c = page.c
    chain = c.confidence.value
    assert chain > 0 and page.set(c.tree_width, 2) == 0
    page.values[c.confidence] = chain  # set by hand on the tree
    assert page.set(c.tree_width, 3) == chain and page.set(c.tree_width, 4) == chain
    assert page.set(c.tree_width, 1) == chain
    page.values[c.confidence] = 0.2  # the user's own on a chain: kept through a tree and back
    assert page.set(c.tree_width, 2) == 0.2 and page.set(c.tree_width, 1) == 0.2
    page.values[c.confidence] = chain
    assert page.set(c.tree_width, 3) == 0 and page.set(c.tree_width, 1) == chain  # the preset's floor follows the shape


def test_a_preset_picked_as_the_width_moves_leaves_the_slider_at_the_widths_floor():
    """The preset menu's answer and Tree width's ran apart, each on the page's values as it was sent: a preset picked
    at width 1 (its answer: the chain's floor), then the width moved to 2 before that answer came (the width's answer:
    0, a tree's), the preset's answer landing last left the chain's 0.6 at width 2, which the tree run then pruned
    with. One event now: the width's call waits for the preset's answer and goes with the page's values by then
    (smollm2-chat, then its -hub twin: the same drafter, so no drafter change follows to set it again)."""
    page = ChatPage()
    c, config = page.c, page.config
    chain = c.confidence.value
    assert chain > 0 and config.get("smollm2-chat-hub").confidence_for() == chain
    page.values[c.preset] = "smollm2-chat-hub"
    picked = page.sent()  # sent at width 1
    page.values[c.tree_width] = 2  # the width moved while the preset's answer is on its way: its call waits
    page.land(picked)
    assert page.values[c.confidence] == chain  # the preset's answer: the chain's floor at width 1, as sent
    page.land(page.sent())  # then the width's
    assert page.values[c.confidence] == 0, "width 2 with the chain's floor"
    assert page.values[c.drafter] == "EAGLE" and page.values[c.k] == config.get("smollm2-chat-hub").k_for()


def test_a_width_answer_computed_with_the_last_preset_lands_after_the_new_presets_and_its_follow_up():
    """The other order: on smollm2-chat at width 2 (the slider 0, a tree's), the width moved to 1 (its answer,
    computed with smollm2-chat: EAGLE's chain floor 0.6), then bundled picked at width 1 (its answer: bundled's floor
    0). The width's answer landing last left 0.6 on bundled, and a follow-up reapplying the width rule with fresh values
    read 0.6 as a floor set by hand. One event now: the preset's call waits for the width's answer, and the answer
    knows the preset it followed (`Followed`), so bundled brings its own floor."""
    page = ChatPage()
    c, config = page.c, page.config
    chain, bundled = c.confidence.value, config.get("bundled")
    assert chain > 0 and bundled.confidence_for() == 0 and page.set(c.tree_width, 2) == 0
    page.values[c.tree_width] = 1
    moved = page.sent()  # sent at width 1 on smollm2-chat
    page.values[c.preset] = "bundled"  # picked while the width's answer is on its way: its call waits
    page.land(moved)
    assert page.values[c.confidence] == chain  # the width's answer: smollm2-chat's chain floor
    page.land(page.sent())  # then the preset's, and the drafter's change it brings
    assert page.values[c.confidence] == 0, "bundled at width 1 with smollm2-chat's chain floor, which no one set"
    assert page.values[c.drafter] == "draft model" and page.values[c.k] == bundled.k_for()


def test_a_drafter_chosen_as_the_width_moves_leaves_the_slider_at_the_widths_floor():
    """The drafter radio was a third event beside the two: the draft model chosen at width 1 on smollm2-chat (its own
    chain floor, 0.5), the width moved to 2 while that answer was on its way. One event: the width's call goes after,
    with the drafter the page holds by then, and gives a tree's none."""
    from specui.drafters import LABELS

    page = ChatPage()
    c, preset = page.c, page.config.get(None)
    assert preset.confidence_for("model") > 0
    page.values[c.drafter] = LABELS["model"]
    chosen = page.sent()
    page.values[c.tree_width] = 2
    page.land(chosen)
    assert page.values[c.confidence] == preset.confidence_for("model")  # the drafter's answer, at width 1 as sent
    page.land(page.sent())
    assert page.values[c.confidence] == 0 and page.values[c.k] == preset.k_for("model")
    assert page.set(c.tree_width, 1) == preset.confidence_for("model")  # back on a chain: the draft model's floor
