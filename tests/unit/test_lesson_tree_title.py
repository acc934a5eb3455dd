"""The token tree's words in the Teach tab's tree step-through: the chart's heading (the Chat tab's too) for a round of
one token (every child of the root rejected, the round's own token drawn from what was left of p) reads "1 token",
where it read "· 1 tokens" on a projector; the step view names the root as the chart beside it does, the last token
so far, where it called it "the round's first token" (which a class read as a token the round emits)."""

from __future__ import annotations

from specui.events import TreeNode
from specui.tree_steps import TreeRecord, tree_steps
from specui.ui.teach_tree_view import render_tree_step
from specui.ui.tree_chart import tree_figure


def _record(*, path: tuple[int, ...]) -> TreeRecord:
    """Root -> 0, root -> 1 -> 2: node 0 accepted where `path` holds it, else every child of the root rejected."""
    verdict = "accepted" if path else "rejected"
    nodes = (TreeNode(0, 10, -1, 0.6, 0.7, 0.6, 0.3, verdict), TreeNode(1, 11, -1, 0.2, 0.2, 0.2, 0.9, "rejected"),
             TreeNode(2, 12, 1, 0.4, 0.5, None, None, "unvisited"))
    return TreeRecord(round_index=0, nodes=nodes, path=path, texts=(" a", " b", " c"), root_text="x", greedy=False,
                      sampled=False, final_id=14, final_text="z", final_kind="resampled", final_p=0.25,
                      residual=((14, "z", 0.5),))


def test_a_tree_round_of_one_token_says_one_token():
    assert tree_figure(_record(path=())).layout.title.text.endswith("0 accepted · 1 token")
    assert tree_figure(_record(path=(0,))).layout.title.text.endswith("1 accepted · 2 tokens")


def test_the_step_view_names_the_root_as_the_chart_does():
    record = _record(path=())
    steps = tree_steps(record)
    legend = next(t.name for t in tree_figure(record).data if (t.name or "").startswith("root"))
    assert legend == "root (the last token so far)"
    said = [render_tree_step(record, steps, i) for i in range(len(steps))]
    assert any("the last token so far" in text for text in said)
    assert not any("the round's first token" in text for text in said)
