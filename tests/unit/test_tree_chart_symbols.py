"""A token tree's node kinds differ by marker symbol as well as by colour: accepted and rejected nodes were both filled
circles told apart by green against red alone, which a colour-blind student cannot tell apart (a deuteranope sees two
olive dots). Each kind the chart draws (root, accepted, rejected, never judged, the round's own token resampled or
bonus, the step's ring) now has a symbol and fill of its own, in the Chat tab's tree view and the Teach tab's
step-through alike, and the legend, which draws each entry's marker, keeps naming the kind. The root's hover names it
as the legend does, the last token so far, not "the round's first token"."""

from __future__ import annotations

from specui.events import TreeNode
from specui.tree_steps import TreeRecord, tree_steps
from specui.ui.tree_chart import tree_figure


def _record(**changes) -> TreeRecord:
    """Root -> 0 (accepted) -> 2 (rejected); root -> 1 (never judged); then the round's own token after 0."""
    nodes = (TreeNode(0, 10, -1, 0.6, 0.7, 0.6, 0.3, "accepted"),
             TreeNode(1, 11, -1, 0.2, 0.2, None, None, "unvisited"), TreeNode(2, 12, 0, 0.4, 0.5, 0.4, 0.8, "rejected"))
    base = dict(round_index=0, nodes=nodes, path=(0,), texts=(" a", " b", " c"), root_text="x", greedy=False,
                sampled=False, final_id=14, final_text="z", final_kind="resampled", final_p=0.25,
                residual=((14, "z", 0.5),))
    return TreeRecord(**{**base, **changes})


def _marks(fig) -> dict:
    """legend name -> (symbol, filled) of every trace drawn with markers."""
    return {t.name: (t.marker.symbol, t.marker.color != "white") for t in fig.data if "markers" in (t.mode or "")}


def test_accepted_rejected_and_never_judged_nodes_differ_by_symbol_not_colour_alone():
    marks = _marks(tree_figure(_record()))
    kinds = ["accepted", "rejected", "never judged", "root (the last token so far)", "round's own token (resampled)"]
    assert set(kinds) <= set(marks)
    assert marks["accepted"][0] != marks["rejected"][0]  # both "circle" before: green against red only
    assert marks["rejected"] == ("x", True)
    assert len({marks[k] for k in kinds}) == len(kinds)  # no two kinds share a symbol and a fill


def test_the_round_own_tokens_two_kinds_and_the_steps_ring_differ_by_symbol():
    resampled = _marks(tree_figure(_record()))["round's own token (resampled)"]
    bonus = _marks(tree_figure(_record(final_kind="bonus")))["round's own token (bonus)"]
    assert resampled[0] != bonus[0]
    record = _record()
    steps = tree_steps(record)
    marks = _marks(tree_figure(record, step=steps[-1]))  # the step-through's last step: every kind coloured
    step = next(_marks(tree_figure(record, step=s)) for s in steps if s.node is not None)
    assert step["this step"][0] not in {m[0] for name, m in step.items() if name != "this step"}
    assert marks["rejected"] == ("x", True) and marks["accepted"] == ("circle", True)
    assert marks["never judged"] == ("circle", False)  # hollow: white inside its grey ring


def test_the_roots_hover_names_it_as_the_legend_does():
    (root,) = [t for t in tree_figure(_record()).data if (t.name or "").startswith("root")]
    assert "the last token so far" in root.hovertext[0] and "the round's first token" not in root.hovertext[0]
