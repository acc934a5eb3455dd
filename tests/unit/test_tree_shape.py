"""`specui.drafters.tree.grow`: the shapes of static and dynamic token trees, on hand-written q rows."""

from __future__ import annotations

import pytest
import torch

from specui.drafters.tree import grow

V = 12


def q(**probs) -> torch.Tensor:
    """A q row over V tokens: t3=0.5 etc., the rest of the mass spread evenly (and below every named one)."""
    row = torch.zeros(V)
    for name, p in probs.items():
        row[int(name[1:])] = p
    rest = [i for i in range(V) if row[i] == 0]
    row[rest] = (1 - row.sum()) / len(rest)
    return row


# the draft's q after the root (-1) and after each token: the top-1 path is 1 -> 3 -> 7
ROWS = {-1: q(t1=0.5, t2=0.45), 1: q(t3=0.3, t4=0.29), 2: q(t5=0.9, t6=0.05), 3: q(t7=0.2, t8=0.19),
        4: q(t9=0.5), 5: q(t10=0.9, t11=0.05), 6: q(t0=0.5)}


def expand(frontier, tokens, parents):
    return torch.stack([ROWS[-1 if i < 0 else tokens[i]] for i in frontier])


def path(tree, node):
    out = []
    while node >= 0:
        out.append(int(tree.tokens[node]))
        node = tree.parents[node]
    return out[::-1]


def test_the_dynamic_tree_holds_the_chain_even_where_siblings_score_higher():
    # by cumulative q alone the best 4 are 1 (.5), 2 (.45), 2->5 (.405), 2->5->10 (.36): 1->3 (.15) and
    # 1->3->7 (.03) would be dropped, and the tree would accept less than the chain wherever 1->3 is right
    tree, _ = grow(expand, depth=3, width=2, nodes=4)
    paths = [path(tree, i) for i in range(tree.size)]
    assert [1] in paths and [1, 3] in paths and [1, 3, 7] in paths  # the chain of 3
    assert tree.size == 4 and [2] in paths  # and the best other node
    for i, parent in enumerate(tree.parents):  # parents first
        assert parent < i


def test_a_budget_below_the_depth_keeps_the_chains_first_nodes():
    tree, _ = grow(expand, depth=3, width=2, nodes=2)
    assert sorted(path(tree, i) for i in range(tree.size)) == [[1], [1, 3]]


def test_the_static_tree_is_every_top_w_child_to_depth_k():
    tree, kept = grow(expand, depth=2, width=2, nodes=0)
    assert tree.size == 2 + 4 and kept == list(range(6))
    assert sorted(path(tree, i) for i in range(tree.size)) == [[1], [1, 3], [1, 4], [2], [2, 5], [2, 6]]


def test_a_confidence_floor_prunes_a_dynamic_tree_to_its_likely_paths():
    """`floor` (draft_confidence): no node whose path probability is below it is expanded or kept, the root's top
    child always is, every kept node's ancestors are kept, and a static tree is left as it is."""
    tree, _ = grow(expand, depth=3, width=2, nodes=8, floor=0.14)
    paths = sorted(path(tree, i) for i in range(tree.size))
    assert paths == [[1], [1, 3], [1, 4], [2], [2, 5], [2, 5, 10]]  # 1->3 .15, 1->4 .145; 1->3->7 .03 is not
    for i, parent in enumerate(tree.parents):
        assert parent < i
    alone, _ = grow(expand, depth=3, width=2, nodes=8, floor=0.99)  # nothing is that sure: the top child alone
    assert [path(alone, i) for i in range(alone.size)] == [[1]]
    static, _ = grow(expand, depth=2, width=2, nodes=0, floor=0.99)
    assert static.size == 6


def test_a_static_tree_too_big_says_so_in_readable_numbers():
    from specui.settings import MAX_TREE_NODES, DecodeSettings, SettingsError

    with pytest.raises(SettingsError, match=r"width 3 and depth K=8 has 9,840 nodes, more than"):
        DecodeSettings(drafter="model", tree_width=3, num_draft_tokens=8)
    with pytest.raises(SettingsError, match=r"width 8 and depth K=64 has about 8\^64 nodes, more than"):
        DecodeSettings(drafter="model", tree_width=8, num_draft_tokens=64)
    assert MAX_TREE_NODES < 9_840
