"""Token trees with EAGLE and Medusa heads: greedy output equals plain greedy decoding for several
widths and budgets (a copycat EAGLE head and perturbed Medusa heads on a sticky target, so rounds see
every outcome; a random EAGLE head on a qwen2 target), the EAGLE head's cache keeps only real pairs,
and sampled trees follow the target's law (chi-square, slow)."""

import pytest
import torch

from specui import SpeculativeEngine
from specui.heads import eagle, medusa
from specui.sampling import Sampling
from tests.engine.head_helpers import perturb, sticky_target
from tests.engine.test_engine_greedy import hf_greedy
from tests.engine.test_engine_sampling import exact_first_two, observed_first_two, p_value
from tests.engine.test_head_eagle import copycat_head
from tests.engine.test_repetition_penalty import hf_greedy as hf_penalised
from tests.engine.test_trees import outcome
from tests.helpers import chi_square_target, make_model

SHAPES = [(2, 0), (3, 0), (2, 5), (4, 12)]
PROMPT = [3, 14, 15, 92, 65, 35]


@pytest.fixture(scope="module")
def sticky():
    target = sticky_target(seed=3, vocab_size=96, layers=3)
    return target, copycat_head(target), perturb(medusa.build(target, num_heads=4), scale=0.01, seed=1)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("kind", ["eagle", "medusa"])
def test_greedy_trees_equal_plain_greedy(sticky, kind, shape):
    target, eagle_head, medusa_heads = sticky
    engine = SpeculativeEngine(target, heads={"eagle": eagle_head, "medusa": medusa_heads})
    expected = hf_greedy(target, PROMPT, 60)
    seen = set()
    for k in (2, 4):
        result = engine.generate(PROMPT, max_new_tokens=60, num_draft_tokens=k, drafter=kind, tree_width=shape[0],
                                 tree_nodes=shape[1])
        assert result.token_ids == expected, (kind, shape, k)
        seen |= {outcome(r) for r in result.rounds if r.tree}
    assert {"root rejected", "partial"} <= seen


def test_greedy_eagle_trees_with_a_repetition_penalty_equal_plain(sticky):
    """The head picks each node's children with the penalty of the target's row there (the context and the path)."""
    target, eagle_head, _ = sticky
    engine = SpeculativeEngine(target, heads={"eagle": eagle_head})
    expected = hf_penalised(target, PROMPT, 40, 1.4)
    for shape in ((2, 0), (3, 6)):
        result = engine.generate(PROMPT, max_new_tokens=40, num_draft_tokens=4, drafter="eagle", tree_width=shape[0],
                                 tree_nodes=shape[1], repetition_penalty=1.4)
        assert result.token_ids == expected, shape


@pytest.mark.parametrize("shape", [(2, 0), (3, 6)])
def test_random_eagle_head_on_qwen2(shape):
    target = make_model("qwen2", vocab_size=96, layers=3, seed=7)
    head = perturb(eagle.build(target, token_ids=torch.arange(96)), scale=0.02, seed=2)
    drafter = head.make_drafter(target)
    engine = SpeculativeEngine(target, heads={"eagle": head})
    for prompt in ([5, 17, 3, 88, 41], [9]):
        result = engine.generate(prompt, max_new_tokens=30, num_draft_tokens=3, drafter=drafter,
                                 tree_width=shape[0], tree_nodes=shape[1])
        assert result.token_ids == hf_greedy(target, prompt, 30)
        assert drafter.keys.shape[1] == drafter.length  # the tree's steps were forgotten


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["eagle", "medusa"])
def test_sampled_trees_are_exact(kind):
    target = chi_square_target()
    if kind == "eagle":
        heads = {"eagle": eagle.build(target, token_ids=torch.arange(5))}
    else:
        heads = {"medusa": perturb(medusa.build(target, token_ids=torch.tensor([0, 1, 2, 4]), num_heads=2),
                                   scale=0.3, seed=2)}
    settings = dict(temperature=0.9, top_p=0.95)
    counts = observed_first_two(SpeculativeEngine(target, heads=heads), [1, 2, 4], num_draft_tokens=2, drafter=kind,
                                tree_width=2, **settings)
    assert p_value(counts, exact_first_two(target, [1, 2, 4], Sampling(**settings))) > 1e-3
