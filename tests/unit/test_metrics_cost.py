"""c, the draft's cost over the target's (`specui.runstats.cost_ratio`), from hand-made rounds: seconds per draft
forward over seconds of one target forward. A token tree's round drafts one forward per level, and its `drafted`
lists only the path the target walked (its accepted nodes and the child rejected where it stopped), so dividing the
round's drafting seconds by that path made c of a tree whose walk stopped early several times too large (a tree of
3 levels whose first child was rejected: 3 times)."""

from __future__ import annotations

from specui.events import GenerationResult, Round, TreeNode
from specui.runstats import cost_ratio, draft_forwards


def _round(*, drafted, accepted, draft_s, verify_s, tree=None):
    emitted = accepted + 1
    return Round(index=0, token_ids=list(range(emitted)), kinds=["accepted"] * accepted + ["resampled"],
                 drafted=list(range(drafted)), num_accepted=accepted, target_probs=[0.5] * drafted,
                 draft_probs=[0.5] * drafted, accept_probs=[1.0] * accepted, uniforms=[],
                 token_target_probs=[0.5] * emitted, token_draft_probs=[None] * emitted, residual_top=[],
                 num_draft_tokens=3, draft_s=draft_s, verify_s=verify_s, elapsed_s=0.0, tree=tree,
                 tree_path=() if tree else None)


def _node(index, parent):
    return TreeNode(index=index, token_id=index, parent=parent, target_prob=0.5, draft_prob=0.5, accept_prob=0.0,
                    uniform=None, verdict="rejected" if parent < 0 else "unvisited")


def _result(*rounds):
    result = GenerationResult()
    for r in rounds:
        result.add(r)
    return result


def test_a_chains_c_is_seconds_per_drafted_token_over_a_target_forward():
    chain = _round(drafted=3, accepted=1, draft_s=0.03, verify_s=0.05)
    plain = _round(drafted=0, accepted=0, draft_s=0.0, verify_s=0.02)
    assert draft_forwards(chain) == 3
    assert abs(cost_ratio(_result(chain), _result(plain)) - 0.01 / 0.02) < 1e-12


def test_a_trees_c_is_seconds_per_level_whatever_path_the_target_walked():
    """Width 2, 3 levels (2 + 4 + 8 nodes, 3 draft forwards) in 0.03 s; the target rejected the first child at the
    root, so the round's walked path holds 1 node: c is 0.01 s a forward over 0.02 s, 0.5 (it read 1.5)."""
    nodes, parents = [], [-1, -1, 0, 0, 1, 1, *[2 + i // 2 for i in range(8)]]
    nodes = tuple(_node(i, p) for i, p in enumerate(parents))
    tree = _round(drafted=1, accepted=0, draft_s=0.03, verify_s=0.05, tree=nodes)
    plain = _round(drafted=0, accepted=0, draft_s=0.0, verify_s=0.02)
    assert draft_forwards(tree) == 3
    assert abs(cost_ratio(_result(tree), _result(plain)) - 0.5) < 1e-12
