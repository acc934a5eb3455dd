"""The EAGLE head as a drafter: greedy output equals transformers' greedy `generate`, sampled output
follows the target's exact law (chi-square, and a broken drafter that the test catches), the head's
cache follows every verify outcome, a saved head loads back, and training lowers its loss."""

import copy

import pytest
import torch

from specui import SpeculativeEngine, native
from specui.drafters.base import Draft
from specui.heads import common, eagle, load
from specui.sampling import Sampling
from tests.engine.head_helpers import halved, path_of, sticky_target
from tests.engine.test_engine_sampling import exact_first_two, observed_first_two, p_value
from tests.helpers import chi_square_target, make_model


def trained_head(target, *, token_ids, steps: int = 60, seed: int = 0, prompts: list[list[int]] = ()):
    """A head fitted briefly to the target's own greedy continuations, so that its drafts are often right: of 8
    random prompts, and of `prompts` (a test's own: a head fitted to random prompts alone is right about once in
    a hundred rounds on others, too seldom to take accepted blocks)."""
    torch.manual_seed(seed)
    head = eagle.build(target, token_ids=token_ids, train_steps=2)
    vocab = target.config.vocab_size
    starts = torch.randint(0, vocab, (8, 4), generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        ids = target.generate(starts, max_new_tokens=28, do_sample=False)
        for prompt in prompts:  # windows of 32 tokens of each prompt's continuation, 8 apart
            run = target.generate(torch.tensor([prompt]), max_new_tokens=64, do_sample=False)[0]
            ids = torch.cat([ids, run.unfold(0, ids.shape[1], 8)])
        out = copy.deepcopy(target)(ids, output_hidden_states=True)  # keep transformers' hooks off the target
    logp = out.logits.float().log_softmax(-1)[..., token_ids]
    batch = {"ids": ids, "hidden": {i: out.hidden_states[i] for i in head.fuse_layers}, "target_logp": logp,
             "mask": torch.ones(ids.shape, dtype=torch.bool)}
    opt = torch.optim.Adam(head.parameters(), lr=3e-3)
    first = None
    for _ in range(steps):
        loss = head.training_loss(batch)
        first = first if first is not None else float(loss.detach())
        opt.zero_grad()
        loss.backward()
        opt.step()
    head.first_loss, head.last_loss = first, float(loss.detach())
    return head.eval()


@pytest.fixture(scope="module")
def target():
    return make_model("llama", vocab_size=96, layers=3, seed=4)


@pytest.fixture(scope="module")
def head(target):
    return trained_head(target, token_ids=torch.arange(96))


def test_training_lowers_the_loss(head):
    assert head.last_loss < 0.8 * head.first_loss


@pytest.mark.parametrize("k", [1, 2, 4, 7])
@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_greedy_equals_generate(arch, k):
    target = make_model(arch, vocab_size=96, layers=3, seed=7)
    prompts = ([5, 17, 3, 88, 41], [9])
    head = trained_head(target, token_ids=torch.arange(96), steps=40, prompts=prompts)
    engine = SpeculativeEngine(target, heads={"eagle": head})
    paths = set()
    for prompt in prompts:
        result = engine.generate(prompt, max_new_tokens=48, num_draft_tokens=k, drafter="eagle")
        expected = target.generate(torch.tensor([prompt]), max_new_tokens=48, do_sample=False)[0, len(prompt):]
        assert result.token_ids == expected.tolist()
        paths |= {path_of(r) for r in result.rounds}
    assert {"all rejected", "partly accepted" if k > 2 else "all accepted"} <= paths, paths  # accepted blocks too


SAMPLED = {"temperature": 0.8, "seed": 3}


@pytest.mark.parametrize("tree", [{}, {"draft_confidence": 0.3}, {"tree_width": 2}, {"tree_width": 3, "tree_nodes": 7},
                                  SAMPLED, {**SAMPLED, "draft_confidence": 0.3}, {**SAMPLED, "top_p": 0.9},
                                  {**SAMPLED, "top_k": 5, "top_p": 0.8}, {**SAMPLED, "tree_width": 2, "tree_nodes": 5},
                                  {"repetition_penalty": 1.5}, {**SAMPLED, "repetition_penalty": 0.7}],
                         ids=["chain", "chain-confidence", "static-tree", "dynamic-tree", "sampled",
                              "sampled-confidence", "sampled-top-p", "sampled-top-k-top-p", "sampled-tree",
                              "chain-penalty", "sampled-penalty"])
def test_native_and_torch_steps_draft_alike(tree):
    """On a CPU in float32 a chain's whole round runs in one native call (`HeadChain`, native_head.c), greedy or
    sampled (top-k and top-p too), and a token tree's depths one native call each; otherwise a drafting step's
    rotary embeddings, cache writes and attention run in native code (`EagleDrafter._step`), for chains and trees
    (each node seeing the cache before the tree, its ancestors and itself). The torch ops they stand for (the path
    on a GPU) draft the same tokens, with q equal to float rounding, round after round (stopping where the draft's
    confidence falls alike; a sampled round draws by the same uniforms), and all keep plain greedy output, or,
    sampled, the same output."""
    if native.kernel() is None:
        pytest.skip("no native kernels here")
    target = make_model("llama", vocab_size=96, layers=3, seed=7)
    head = trained_head(target, token_ids=torch.arange(96), steps=40, prompts=[[5, 17, 3, 88, 41]])
    runs, tree_steps = [], []
    for mode in ("round", "steps", "torch"):
        drafter = head.make_drafter(target)
        begin = drafter.start

        def start(*args, mode=mode, drafter=drafter, begin=begin, **kwargs):
            begin(*args, **kwargs)
            assert drafter.native is not None and drafter.chain is not None
            drafter.chain = drafter.chain if mode == "round" else None
            drafter.native = None if mode == "torch" else drafter.native
            if drafter.chain is not None:  # a tree's depths in one native call each (`HeadChain.tree_step`)
                step = drafter.chain.tree_step
                drafter.chain.tree_step = lambda *a, **k: tree_steps.append(1) or step(*a, **k)

        drafter.start = start
        engine = SpeculativeEngine(target, heads={"eagle": head})
        runs.append(engine.generate([5, 17, 3, 88, 41], max_new_tokens=40, num_draft_tokens=3, drafter=drafter,
                                    **tree))
    expected = runs[2].token_ids if tree.get("temperature") else target.generate(
        torch.tensor([[5, 17, 3, 88, 41]]), max_new_tokens=40, do_sample=False,
        repetition_penalty=tree.get("repetition_penalty", 1.0))[0, 5:].tolist()
    assert all(run.token_ids == expected for run in runs)
    assert bool(tree_steps) == (tree.get("tree_width", 1) > 1)
    assert [r.drafted for r in runs[0].rounds] == [r.drafted for r in runs[1].rounds] == \
        [r.drafted for r in runs[2].rounds]
    assert any(r.num_accepted for r in runs[0].rounds)  # alike in accepted blocks too, not only in rejected ones
    if tree.get("draft_confidence"):  # the confidence stop cut some rounds short, the same ones
        assert any(0 < r.num_drafted < 3 for r in runs[0].rounds)
    q = [torch.tensor([p for r in run.rounds for p in r.draft_probs]) for run in runs]
    torch.testing.assert_close(q[0], q[2], atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(q[1], q[2], atol=1e-5, rtol=1e-4)


def copycat_head(target):
    """A head that drafts the token it is given again (fc passes the embedding through, the layer adds
    nothing): right whenever the sticky target repeats itself, wrong when it does not."""
    head = eagle.build(target, token_ids=torch.arange(target.config.vocab_size))
    width = target.config.hidden_size
    with torch.no_grad():
        head.fc.weight.zero_()
        head.fc.weight[:, width:] = torch.eye(width)
        head.layer.o.weight.zero_()
        head.layer.down.weight.zero_()
    return head.eval()


def test_rounds_see_every_outcome_and_the_cache_follows():
    """All rejected, partly accepted and all accepted rounds all occur, and output stays plain greedy."""
    target = sticky_target(seed=3, vocab_size=96, layers=3)
    head = copycat_head(target)
    engine = SpeculativeEngine(target, heads={"eagle": head})
    prompt = [3, 14, 15, 92, 65, 35]
    result = engine.generate(prompt, max_new_tokens=120, num_draft_tokens=3, drafter="eagle")
    outcomes = {("none" if r.num_accepted == 0 else "all" if r.num_accepted == r.num_drafted else "part")
                for r in result.rounds if r.num_drafted}
    assert outcomes == {"none", "part", "all"}
    assert result.token_ids == engine.generate(prompt, max_new_tokens=120, speculative=False).token_ids


def test_reduced_vocabulary_and_the_head_cache(target):
    """A head over a few ids drafts only those; after each round its cache holds the real pairs only."""
    ids = torch.tensor([0, 3, 5, 8, 13, 21, 34, 55])
    head = trained_head(target, token_ids=ids, steps=10)
    drafter = head.make_drafter(target)
    engine = SpeculativeEngine(target, heads={"eagle": head})
    result = engine.generate([1, 2, 3, 4], max_new_tokens=30, num_draft_tokens=4, drafter=drafter)
    assert all(t in ids.tolist() for r in result.rounds for t in r.drafted)
    assert drafter.keys.shape[1] == drafter.length <= 4 + 30  # the draft steps were forgotten


@pytest.mark.slow
@pytest.mark.parametrize("settings", [{"temperature": 1.0}, {"temperature": 0.7, "top_k": 3, "top_p": 0.8},
                                      {"temperature": 1.5, "top_p": 0.9}])
def test_sampling_is_exact(settings):
    target = chi_square_target()
    head = eagle.build(target, token_ids=torch.arange(5))
    engine = SpeculativeEngine(target, heads={"eagle": head})
    counts = observed_first_two(engine, [1, 2, 4], num_draft_tokens=2, drafter="eagle", **settings)
    assert p_value(counts, exact_first_two(target, [1, 2, 4], Sampling(**settings))) > 1e-3


class MisreportingDrafter(eagle.EagleDrafter):
    """A broken drafter: it reports a flattened q, not the one its tokens were drawn from."""

    def propose(self, context, k):
        draft = super().propose(context, k)
        if draft.probs is None or not len(draft.tokens):
            return draft
        flat = (draft.probs + 0.5).clamp(max=1.0)
        return Draft(draft.tokens, flat / flat.sum(-1, keepdim=True))


@pytest.mark.slow
def test_a_misreporting_drafter_is_caught():
    target = chi_square_target()
    head = eagle.build(target, token_ids=torch.arange(5))
    with torch.no_grad():
        head.fc.weight.mul_(4.0)  # a peaked q, far from the flattened one it reports
    counts = torch.zeros(5, 5)
    engine = SpeculativeEngine(target, heads={"eagle": head})
    for seed in range(2000):
        t1, t2 = engine.generate([1, 2, 4], max_new_tokens=3, seed=seed, num_draft_tokens=2, temperature=1.0,
                                 drafter=MisreportingDrafter(head)).token_ids[:2]
        counts[t1, t2] += 1
    assert p_value(counts, exact_first_two(target, [1, 2, 4], Sampling(temperature=1.0))) < 1e-6


def test_save_and_load_round_trip(tmp_path, target, head):
    head = halved(head)  # a head is saved in half precision: compare with the rounded one
    common.save(head, tmp_path / "eagle", facts={"note": "test"})
    loaded = load(tmp_path / "eagle", target)
    engine = SpeculativeEngine(target, heads={"eagle": loaded})
    original = SpeculativeEngine(target, heads={"eagle": head})
    a = engine.generate([7, 8, 9], max_new_tokens=30, num_draft_tokens=3, drafter="eagle")
    b = original.generate([7, 8, 9], max_new_tokens=30, num_draft_tokens=3, drafter="eagle")
    assert a.token_ids == b.token_ids and [r.num_accepted for r in a.rounds] == [r.num_accepted for r in b.rounds]
    other = make_model("llama", vocab_size=96, layers=4, seed=4)
    with pytest.raises(ValueError, match="trained for a target"):
        load(tmp_path / "eagle", other)


def test_engine_lists_and_refuses_heads(target, head):
    assert SpeculativeEngine(target, heads={"eagle": head}).drafters == ("eagle", "prompt_lookup")
    with pytest.raises(ValueError, match="needs a trained eagle head"):
        SpeculativeEngine(target).generate([1, 2], drafter="eagle")


def test_a_large_head_is_saved_in_shards(tmp_path, monkeypatch, target, head):
    monkeypatch.setattr(common, "SHARD_BYTES", 20_000)
    common.save(head, tmp_path / "eagle")
    shards = sorted(p.name for p in (tmp_path / "eagle").glob("*.safetensors"))
    assert len(shards) > 2 and "head.safetensors" not in shards
    loaded = load(tmp_path / "eagle", target)
    for key, value in head.state_dict().items():
        assert torch.equal(loaded.state_dict()[key], value.half().float() if value.is_floating_point() else value), key
