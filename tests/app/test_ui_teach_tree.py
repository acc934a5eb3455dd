"""The Teach tab's token-tree stepper without a server: each step in words (escaped model text, the rule's
numbers, the residual update, the round's own token), the panel in the Teach tab, and its handlers on the
bundled pair (decode with a tree, pick a round, step forward and back within it)."""

from __future__ import annotations


import pytest

from specui.tree_steps import tree_steps
from specui.ui.teach_keys import Shown
from specui.ui.teach_tree_view import render_tree_step
from tests.app.test_ui_tree import record


def test_each_step_in_words():
    r = record()
    steps = tree_steps(r)
    words = [render_tree_step(r, steps, i) for i in range(len(steps))]
    assert "4 nodes to depth 2" in words[0] and "5 rows of p" in words[0]
    assert "try child 1: node 0" in words[1] and "accepted" in words[1] and "its children are tried next" in words[1]
    assert "p(x) = 0.4000, q(x) = 0.5000" in words[2] and "r ≥ 0.4000, rejected" in words[2]
    assert "mass in play falls from 1.0000 to 0.6000" in words[2]
    assert "try child 2: node 3" in words[3] and "p(x) / 0.6000 = 0.5000" in words[3]
    assert "Every child of node 0" in words[4] and "(id 14; the target's p there = 0.2500)" in words[4]
    assert "emits 2 tokens: <code>&#x27; a&#x27;</code> (accepted), then <code>&#x27;z&#x27;</code>" in words[4]
    assert render_tree_step(r, steps, 99) == words[-1]  # clamped
    assert "Decode with a tree" in render_tree_step(None, [], 0)


def test_model_text_is_escaped_in_the_words():
    r = record(path=(1,), nodes=tuple(n if n.index != 1 else n.__class__(1, 11, -1, 0.2, 0.2, 1.0, None, "accepted")
                                      for n in record().nodes))
    html = "".join(render_tree_step(r, tree_steps(r), i) for i in range(len(tree_steps(r))))
    assert "<img" not in html and "&lt;img" in html
    bonus = record(path=(), final_kind="bonus", nodes=(), texts=())
    assert "has no children: the target adds a bonus token" in render_tree_step(bonus, tree_steps(bonus), 1)


def test_greedy_and_sampled_rules_are_named():
    greedy = record(greedy=True)
    assert "not the target's top token here: rejected" in render_tree_step(greedy, tree_steps(greedy), 2)
    sampled = record(sampled=True)
    assert "p ← norm(max(0, p − q))" in render_tree_step(sampled, tree_steps(sampled), 2)
    cut = record(final_id=None, final_text="", final_kind="", final_p=None)
    assert "end-of-text token" in render_tree_step(cut, tree_steps(cut), len(tree_steps(cut)) - 1)


def test_the_first_step_says_how_the_trees_children_are_judged_and_why_q_is_not_read():
    """A top-w tree's children are judged by p over the mass in play, a chain's by min(1, p/q): a student saw q(x)
    beside each child and no word of why no min(1, p/q) was taken. The first step says how the children came and are
    judged, and a try's q is said to be read by no draw; a sampled tree's rule is a chain's, greedy's needs neither."""
    top = record()
    words = [render_tree_step(top, tree_steps(top), i) for i in range(3)]
    assert "chosen, not drawn from q" in words[0] and "q plays no part in their check" in words[0]
    assert "over the mass of p still in play" in words[0] and "follow p exactly" in words[0]
    assert "q(x) = 0.5000 at its parent (q chose the children, no draw reads it)" in words[2]
    sampled = record(sampled=True)
    first, second = (render_tree_step(sampled, tree_steps(sampled), i) for i in (0, 1))
    assert "drawn from the draft's q" in first and "min(1, p/q)" in first and "no draw reads it" not in second
    greedy = record(greedy=True)
    assert "q plays no part" not in render_tree_step(greedy, tree_steps(greedy), 0)


# -- the panel on the bundled pair ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def teach():
    import gradio as gr

    from specui.loading import PairCache
    from specui.ui import teach_layout, teaching
    from specui.ui.session import Showcase
    from specui.ui.teach_tree import tree_panel
    from tests.helpers import ui_config

    showcase = Showcase(ui_config(), PairCache())
    work = teaching.TeachState(showcase).work  # the tab's model work, one call each decode
    with gr.Blocks() as demo:
        controls = teach_layout.controls(showcase.config)
        panel = tree_panel(controls, work=work)
    return controls, panel, work, demo


def test_the_teach_tab_has_the_tree_stepper(tmp_path):
    import gradio as gr

    from specui.presets import load_config
    from specui.ui.teaching import teaching_tab

    (tmp_path / "models.yaml").write_text("default: tiny\npresets:\n  tiny:\n    target: ./nowhere\n"
                                          "    drafter: prompt_lookup\n")
    showcase = type("Showcase", (), {"config": load_config(tmp_path / "models.yaml")})()
    with gr.Blocks() as demo:
        teaching_tab(showcase)
    ids = {c.get("props", {}).get("elem_id") for c in demo.config["components"]}
    assert {"teach-tree", "tree-step-width", "tree-step-nodes", "tree-step-start", "tree-step-round",
            "tree-step-prev", "tree-step-next", "tree-step-chart", "tree-step-view"} <= ids


def test_decode_pick_and_step_through_a_tree_round(teach):
    import gradio as gr

    from specui.ui import teach_tree

    c, panel, work, _ = teach
    data = {c.prompt: "def main(argv):\n    ", c.preset: "bundled", c.drafter: "draft model", c.k: 3, c.confidence: 0.0,
            c.temperature: 0.8, c.penalty: 1.0, c.max_new: 16, c.seed: 1, panel.width: 2, panel.nodes: 0,
            panel.step: Shown()}
    shown = Shown()
    out = teach_tree.decode(panel, c, work, {**data, panel.step: shown})
    trees = out[panel.trees]
    assert trees and shown.index == 0 and "with trees of width 2 (static)" in out[panel.status]
    first = out[panel.pick]["value"]
    assert first in trees and trees[first].nodes and "nodes to depth" in out[panel.view]
    assert shown.what is trees[first]
    state = {panel.step: shown}
    steps = tree_steps(trees[first])
    for i in range(1, len(steps) + 2):  # forward to the end (and one past it: clamped)
        moved = teach_tree.pressed(panel, "+", state)
        assert shown.index == min(i, len(steps) - 1)
    assert 'data-kind="end"' in moved[panel.view] and len(moved[panel.chart].data) >= 4
    back = teach_tree.pressed(panel, "-", state)
    assert shown.index == len(steps) - 2 and 'data-kind="try"' in back[panel.view]
    # the round on show picked (the list's change as a Decode sets it, which shows that round): the step stays
    again = teach_tree.pick(panel, {panel.trees: trees, panel.pick: first, panel.step: shown})
    assert shown.index == len(steps) - 2 and list(again) == [panel.chart]
    teach_tree.pick(panel, {panel.trees: trees, panel.pick: max(trees), panel.step: shown})
    assert shown.index == 0 and shown.what is trees[max(trees)]
    with pytest.raises(gr.Error, match="cannot draft trees"):
        teach_tree.decode(panel, c, work, {**data, c.drafter: "prompt lookup"})
    with pytest.raises(gr.Error, match="static tree of width 8"):
        teach_tree.decode(panel, c, work, {**data, c.k: 8, panel.width: 8})


def test_a_refused_tree_setting_says_why_in_the_panel_not_as_an_error(teach):
    """Decode with a tree, refused (prompt lookup drafts no trees; too wide a static tree), as the page wires it:
    a calm line in the panel's status and a warning toast, not gradio's red error state over every output."""
    c, panel, _, demo = teach
    start = next(f.fn for f in demo.fns.values() if (panel.start._id, "click") in f.targets)
    data = {c.prompt: "def main(argv):\n    ", c.preset: "bundled", c.drafter: "prompt lookup", c.k: 3,
            c.confidence: 0.0, c.temperature: 0.8, c.penalty: 1.0, c.max_new: 16, c.seed: 1, panel.width: 2,
            panel.nodes: 0, panel.step: Shown()}
    with pytest.warns(UserWarning, match="cannot draft trees"):
        out = start(data)
    assert list(out) == [panel.status] and out[panel.status].startswith("⚠ Not decoded:")
    assert "cannot draft trees" in out[panel.status]
    with pytest.warns(UserWarning, match="static tree of width 8"):
        out = start({**data, c.drafter: "draft model", c.k: 8, panel.width: 8})
    assert list(out) == [panel.status] and "static tree of width 8" in out[panel.status]


def test_the_tree_nodes_start_at_a_dynamic_tree_the_size_its_help_says_pays():
    """The Teach tab's Tree nodes began at 0, the static tree: at width 2 and K 6 a tree of 126 nodes (its chart about
    2,400 px tall), 254 at K 7, refused at the tab's K 8 (510), where its own help says 7 to 11 pay on a CPU."""
    import gradio as gr

    from specui.settings import DecodeSettings
    from specui.ui import teach_tree
    from specui.ui.chat_tree import NODES_HELP
    from specui.ui.teach_view import TEACH_K_MAX

    with gr.Blocks():
        panel = teach_tree._layout()
    assert 7 <= panel.nodes.value <= 11 and "7 to 11 pay" in NODES_HELP, panel.nodes.value
    for k in range(1, TEACH_K_MAX + 1):  # a tree every K of the tab's slider takes, at the width's first value
        DecodeSettings(num_draft_tokens=k, tree_width=panel.width.value, tree_nodes=panel.nodes.value)


def test_the_status_line_names_the_seed_that_replays_the_trees(teach):
    """The tree stepper's status line named no seed: a tree lesson decoded with -1 could not be decoded again."""
    import re

    from specui.ui import teach_tree

    c, panel, work, _ = teach
    data = {c.prompt: "def main(argv):\n    ", c.preset: "bundled", c.drafter: "draft model", c.k: 3, c.confidence: 0.0,
            c.temperature: 0.8, c.penalty: 1.0, c.max_new: 16, c.seed: -1, panel.width: 2, panel.nodes: 7}
    drawn = teach_tree.decode(panel, c, work, {**data, panel.step: Shown()})
    seed = int(re.search(r"\(seed (\d+)\)", drawn[panel.status]).group(1))
    again = teach_tree.decode(panel, c, work, {**data, c.seed: seed, panel.step: Shown()})
    assert f"(seed {seed})" in again[panel.status] and again[panel.trees] == drawn[panel.trees]
    greedy = teach_tree.decode(panel, c, work, {**data, c.temperature: 0.0, panel.step: Shown()})
    assert "(greedy: the seed plays no part)" in greedy[panel.status]
