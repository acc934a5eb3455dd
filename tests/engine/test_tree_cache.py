"""The tree forward and the path compaction of `CachedLM`, on the lean stack and on transformers'
forward (and the GPU's graph stack, run eagerly): every node's logits equal a full forward of its path, and after `keep_path` the cache
continues exactly as one that was fed the path alone (root rejected, partial path, full depth)."""

import pytest
import torch

from specui.graphs import GraphStack
from specui.kv import CachedLM
from tests.helpers import make_model

PREFIX = [5, 17, 3, 88, 41]
TOKENS = [9, 10, 11, 12, 13, 14]  # cur = 9, then five nodes
PARENTS = [-1, 0, 0, 1, 3, 2]  # 10 and 11 follow cur; 12 follows 10; 13 follows 12; 14 follows 11
PATHS = {0: [9], 1: [9, 10], 2: [9, 11], 3: [9, 10, 12], 4: [9, 10, 12, 13], 5: [9, 11, 14]}


def target(kind):
    model = make_model("gpt2" if kind == "gpt2" else "llama", seed=1)
    if kind == "eager":
        model.config._attn_implementation = "eager"
    if kind == "graphs":
        GraphStack.attach(model, graphs=False)
    return model


@pytest.mark.parametrize("kind", ["lean", "graphs", "gpt2", "eager"])
def test_tree_rows_equal_their_paths(kind):
    model = target(kind)
    lm = CachedLM(model)
    assert (lm.stack is not None) == (kind in ("lean", "graphs"))
    with torch.no_grad():
        lm.extend(PREFIX)
        out = lm.extend_tree(TOKENS, parents=PARENTS)
        for i, path in PATHS.items():
            full = model(torch.tensor([PREFIX + path])).logits[0, -1]
            torch.testing.assert_close(out[i], full, atol=1e-4, rtol=1e-4)
            assert int(out[i].argmax()) == int(full.argmax())


@pytest.mark.parametrize("kind", ["lean", "graphs", "gpt2", "eager"])
@pytest.mark.parametrize("node", [0, 3, 4, 5])  # only cur kept (root rejected), partial paths, full depth
def test_keep_path_continues_like_the_path(kind, node):
    model = target(kind)
    lm = CachedLM(model)
    path = PATHS[node]
    slots = {5: 0, 6: 1, 7: 2, 8: 3, 9: 4, 10: 5}  # absolute slot -> tree slot
    keep = [s for s, t in slots.items() if s > 5 and TOKENS[t] in path[1:] and t in _ancestry(node)]
    with torch.no_grad():
        lm.extend(PREFIX)
        lm.extend_tree(TOKENS, parents=PARENTS)
        lm.keep_path(len(PREFIX) + 1, keep)
        assert lm.length == len(PREFIX) + len(path) and lm.cache.get_seq_length() == lm.length
        nxt = lm.extend([7, 8])
        full = model(torch.tensor([PREFIX + path + [7, 8]])).logits[0, -2:]
    torch.testing.assert_close(nxt, full, atol=1e-4, rtol=1e-4)


def _ancestry(node):
    out = []
    while node >= 0:
        out.append(node)
        node = PARENTS[node]
    return out


def test_extend_tree_refuses_a_later_parent():
    lm = CachedLM(make_model("llama", seed=1))
    lm.extend(PREFIX)
    with pytest.raises(ValueError, match="parent"):
        lm.extend_tree([1, 2], parents=[1, -1])
