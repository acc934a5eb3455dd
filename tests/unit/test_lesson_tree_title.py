"""The token tree's chart heading, as the Teach tab's tree step-through and the Chat tab show it: a round of one token
(every child of the root rejected, the round's own token drawn from what was left of p) reads "1 token", where it
read "· 1 tokens" on a projector."""

from __future__ import annotations

from specui.events import TreeNode
from specui.tree_steps import TreeRecord
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
