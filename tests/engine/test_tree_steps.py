"""A tree round told in order (`specui.tree_steps`): on tiny models, the steps replay the engine's own
verdicts (every judged child once, parents before children, the accepted path, the deterministic rule's
residual mass), the texts are the tokenizer's, and hand-made rounds cover the resample, the bonus, an
EOS cut, greedy and the sampled rule."""

from __future__ import annotations

import pytest

from specui import SpeculativeEngine
from specui.events import Round, TreeNode
from specui.tree_steps import DRAFT, END, TRY, depth_of, tree_record, tree_steps
from tests.helpers import char_tokenizer, make_model, noisy_copy


@pytest.fixture(scope="module")
def engine():
    target = make_model("llama", layers=2, seed=3)
    return SpeculativeEngine(target, noisy_copy(target, noise=0.3, seed=1))


def records(engine, *, temperature, width=2, nodes=0, k=3):
    prompt = [40, 41, 42, 43, 44]
    result = engine.generate(prompt, max_new_tokens=30, num_draft_tokens=k, temperature=temperature, seed=1,
                             tree_width=width, tree_nodes=nodes, ignore_eos=True)
    tokenizer, out, context = char_tokenizer(), [], list(prompt)
    for r in result.rounds:
        out.append((r, tree_record(r, tokenizer=tokenizer, context_ids=context, greedy=temperature == 0)))
        context += r.token_ids
    return out


@pytest.mark.parametrize("temperature,nodes", [(0.0, 0), (1.0, 0), (1.0, 5)])
def test_the_steps_replay_the_engines_verdicts(engine, temperature, nodes):
    seen_rejection = False
    for rnd, record in records(engine, temperature=temperature, nodes=nodes):
        steps = tree_steps(record)
        assert steps[0].kind == DRAFT and steps[-1].kind == END and [s.index for s in steps] == list(range(len(steps)))
        judged = [i for i, n in enumerate(rnd.tree) if n.verdict != "unvisited"]
        tries = [s for s in steps if s.kind == TRY]
        assert sorted(s.node for s in tries) == judged and steps[-1].tried == tuple(s.node for s in tries)
        assert steps[-1].path == rnd.tree_path == record.path
        for s in tries:
            node = rnd.tree[s.node]
            assert s.parent == node.parent and (s.parent == -1 or s.parent in s.path)  # parents first
            if temperature > 0:  # the deterministic rule: accepted with p(x) / the mass still in play
                assert node.accept_prob == pytest.approx(node.target_prob / s.mass_left, rel=1e-4, abs=1e-6)
                if node.verdict == "rejected":
                    seen_rejection = True
                    assert s.mass_after == pytest.approx(s.mass_left - node.target_prob, abs=1e-6)
            else:
                assert s.mass_left is None and node.accept_prob in (0.0, 1.0)
        assert record.final_id == rnd.token_ids[-1] and record.final_kind == rnd.kinds[-1]
        assert record.final_kind == ("resampled" if any(n.parent == steps[-1].parent for n in rnd.tree) else "bonus")
        assert len(record.texts) == len(rnd.tree) and 0 <= depth_of(record) <= rnd.num_draft_tokens
    assert seen_rejection or temperature == 0


def test_texts_are_the_tokenizers():
    tok = char_tokenizer()
    ids = tok("ab")["input_ids"]
    x, y = tok("x")["input_ids"][0], tok("<")["input_ids"][0]
    nodes = (TreeNode(0, x, -1, 0.5, 0.6, 0.5, 0.2, "accepted"), TreeNode(1, y, 0, 0.3, 0.4, 0.3, 0.9, "rejected"))
    rnd = Round(index=4, token_ids=[x, tok("z")["input_ids"][0]], kinds=["accepted", "resampled"], drafted=[x, y],
                num_accepted=1, target_probs=[0.5, 0.3], draft_probs=[0.6, 0.4], accept_probs=[0.5, 0.3],
                uniforms=[0.2, 0.9], token_target_probs=[0.5, 0.4], token_draft_probs=[0.6, None],
                residual_top=[(tok("z")["input_ids"][0], 0.57)], num_draft_tokens=2, draft_s=0, verify_s=0,
                elapsed_s=0, tree=nodes, tree_path=(0,))
    record = tree_record(rnd, tokenizer=tok, context_ids=ids, greedy=False)
    strip = lambda texts: tuple(t.strip() for t in texts)  # noqa: E731 - this tokenizer joins tokens with spaces
    assert strip(record.texts) == ("x", "<") and record.root_text.strip() == "b" and record.final_text.strip() == "z"
    (residual,) = record.residual
    assert residual[0] == tok("z")["input_ids"][0] and residual[1].strip() == "z" and residual[2] == 0.57
    assert record.round_index == 4
    steps = tree_steps(record)
    assert [s.kind for s in steps] == [DRAFT, TRY, TRY, END]
    assert steps[2].mass_left == 1.0 and steps[2].mass_after == pytest.approx(0.7) and steps[-1].parent == 0
    sampled = tree_steps(tree_record(Round(**{**rnd.__dict__, "tree_sampled": True}), tokenizer=tok,
                                     context_ids=ids, greedy=False))
    assert all(s.mass_left is None and s.mass_after is None for s in sampled)
    cut = tree_record(Round(**{**rnd.__dict__, "token_ids": [x], "kinds": ["accepted"]}), tokenizer=tok,
                      context_ids=ids, greedy=False)  # EOS at x ended the generation
    assert cut.final_id is None and cut.final_kind == "" and cut.final_text == ""
    empty = tree_record(Round(**{**rnd.__dict__, "tree": (), "tree_path": (), "token_ids": [x], "kinds": ["bonus"]}),
                        tokenizer=tok, context_ids=ids, greedy=True)
    assert [s.kind for s in tree_steps(empty)] == [DRAFT, END] and empty.final_kind == "bonus"
    assert depth_of(empty) == 0 and depth_of(record) == 2
