"""Drafts that borrow the target's embeddings and draft over a reduced vocabulary (specui.chat_draft)."""

from __future__ import annotations

import json

import pytest
import torch

from specui import chat_draft


def tiny_target(seed: int = 0, vocab: int = 120, *, hidden: int = 64, layers: int = 4, heads: int = 4):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=vocab, hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=layers,
                         num_attention_heads=heads, num_key_value_heads=2, max_position_embeddings=256,
                         tie_word_embeddings=True, initializer_range=0.3, bos_token_id=None, eos_token_id=None,
                         pad_token_id=None)
    model = LlamaForCausalLM(config).eval()
    model.generation_config.eos_token_id = None
    return model


def test_build_borrows_embeddings_and_output_rows():
    target = tiny_target()
    token_ids = torch.tensor([0, 3, 7, 50, 119])
    draft = chat_draft.build(target, num_layers=2, token_ids=token_ids, init_layers=[0, 3])
    assert draft.model.embed_tokens is target.model.embed_tokens
    assert torch.equal(draft.lm_head.weight, target.lm_head.weight[token_ids])
    assert not draft.lm_head.weight.requires_grad
    assert torch.equal(draft.model.layers[1].mlp.up_proj.weight, target.model.layers[3].mlp.up_proj.weight)
    with torch.inference_mode():
        logits = draft(input_ids=torch.tensor([[1, 2, 118]])).logits
    assert logits.shape == (1, 3, 5)


def test_a_full_copy_computes_the_target():
    target = tiny_target()
    every = torch.arange(120)
    draft = chat_draft.build(target, num_layers=4, token_ids=every, init_layers=[0, 1, 2, 3]).eval()
    ids = torch.tensor([[5, 9, 11, 100, 7]])
    with torch.inference_mode():
        assert torch.equal(draft(input_ids=ids).logits, target(input_ids=ids).logits)


def test_save_and_load_round_trip(tmp_path):
    target = tiny_target()
    token_ids = torch.tensor([1, 2, 4, 8, 16, 32, 64])
    draft = chat_draft.build(target, num_layers=2, token_ids=token_ids, init_layers=[0, 1]).eval()
    with torch.no_grad():
        for p in [*draft.model.layers.parameters(), draft.lm_head.weight]:
            p.copy_(p.half().float())  # what survives the float16 files exactly, and the rows as loaded
    chat_draft.save(draft, tmp_path / "d", facts={"note": "test"}, shard_bytes=20_000)
    meta = json.loads((tmp_path / "d" / chat_draft.META).read_text())
    assert len(meta["files"]) > 1 and meta["note"] == "test"  # sharded under the size given
    assert chat_draft.is_draft_folder(tmp_path / "d")
    loaded = chat_draft.load(tmp_path / "d", target)
    assert torch.equal(loaded.token_ids, token_ids)
    ids = torch.tensor([[3, 1, 4, 1, 5, 9, 2, 6]])
    with torch.inference_mode():
        assert torch.equal(loaded(input_ids=ids).logits, draft(input_ids=ids).logits)


def test_a_loaded_drafts_layers_run_from_half_width_panels(tmp_path, monkeypatch):
    """The draft's layers come from float16 files: where the native kernels compute them, their panels
    are float16 (half the bytes a step reads) and the lean forward gives the float32 panels' bits."""
    from specui import native
    from specui.kv import CachedLM

    if native.kernel() is None:
        pytest.skip("no native kernels here")
    target = tiny_target(hidden=192, layers=2)
    draft = chat_draft.build(target, num_layers=2, token_ids=torch.arange(0, 120, 3), init_layers=[0, 1]).eval()
    chat_draft.save(draft, tmp_path / "d")
    loaded = chat_draft.load(tmp_path / "d", target)
    ids = list(range(5, 17))

    def run():
        lm = CachedLM(loaded)
        gate_up = lm.stack.params[0][4]  # 2 x 384 x 192 weights: above SMALL_WEIGHT, so native on every CPU
        with torch.inference_mode():
            return gate_up, lm.extend(ids)

    gate_up, half = run()
    assert gate_up.native is not None and gate_up.matrix.panels.dtype == torch.float16
    rows = target.lm_head.weight[loaded.token_ids]  # the output rows: the target's, in float16
    assert torch.equal(loaded.lm_head.weight, rows.half().float()) and not torch.equal(loaded.lm_head.weight, rows)
    monkeypatch.setattr(native, "HALF_PANELS", False)  # the same forward from float32 panels
    gate_up, full = run()
    assert gate_up.matrix.panels.dtype == torch.float32
    assert torch.equal(half, full)


def test_load_refuses_another_target(tmp_path):
    draft = chat_draft.build(tiny_target(), num_layers=1, token_ids=torch.arange(10), init_layers=[0])
    chat_draft.save(draft, tmp_path / "d")
    with pytest.raises(ValueError, match="made for a target of width 64 and 120 tokens"):
        chat_draft.load(tmp_path / "d", tiny_target(vocab=200))


# -- in the engine -------------------------------------------------------------------------------


def test_greedy_identity_with_a_reduced_vocabulary():
    from specui import SpeculativeEngine

    target = tiny_target(seed=3)
    every = torch.arange(120)
    # the draft knows half the vocabulary: the target's greedy tokens outside it are never proposed
    draft = chat_draft.build(target, num_layers=2, token_ids=every[::2], init_layers=[0, 3]).eval()
    engine = SpeculativeEngine(target, draft)
    for prompt in ([5, 9, 11], [100, 7, 7, 7, 2], [1]):
        plain = engine.generate(prompt, max_new_tokens=40, speculative=False).token_ids
        spec = engine.generate(prompt, max_new_tokens=40, num_draft_tokens=4)
        assert spec.token_ids == plain
        assert all(t % 2 == 0 for r in spec.rounds for t in r.drafted)  # only ids the draft has
        with torch.inference_mode():
            hf = target.generate(torch.tensor([prompt]), max_new_tokens=40, do_sample=False)[0, len(prompt):]
        assert hf.tolist() == plain


def _five_token_pair():
    from tests.helpers import chi_square_target

    target = chi_square_target()
    draft = chat_draft.build(target, num_layers=1, token_ids=torch.tensor([0, 2, 4]), init_layers=[1]).eval()
    with torch.no_grad():
        draft.lm_head.weight.mul_(0.5)  # a draft that disagrees with the target
    return target, draft


class UnmappedQ:
    """Broken on purpose: proposes the right ids but reports q on rows 0..N-1 (no scatter onto ids)."""

    name = "unmapped"
    trusted_q = True  # past the engine's check of q (it refuses this drafter: below), for the chi-square to judge

    def __init__(self, draft):
        from specui.drafters import ModelDrafter

        self.inner = ModelDrafter(draft)

    def start(self, prompt, *, sampling, seed):
        self.inner.start(prompt, sampling=sampling, seed=seed)

    def propose(self, context, k):
        from specui.drafters import Draft

        draft = self.inner.propose(context, k)
        if k == 0:
            return draft
        rows = draft.probs[:, self.inner.token_ids]  # q per draft row
        wrong = torch.zeros_like(draft.probs)
        wrong[:, : rows.shape[1]] = rows
        return Draft(draft.tokens, wrong)

    def observe(self, num_accepted):
        self.inner.observe(num_accepted)


@pytest.mark.parametrize("temperature,top_k,top_p", [(1.0, 0, 1.0), (0.8, 2, 0.9)])
def test_sampling_is_exact_with_a_reduced_vocabulary(temperature, top_k, top_p):
    from specui import SpeculativeEngine
    from specui.sampling import Sampling
    from tests.engine.test_engine_sampling import exact_first_two, observed_first_two, p_value

    target, draft = _five_token_pair()
    settings = dict(temperature=temperature, top_k=top_k, top_p=top_p)
    counts = observed_first_two(SpeculativeEngine(target, draft), [1, 2], num_draft_tokens=2, **settings)
    assert p_value(counts, exact_first_two(target, [1, 2], Sampling(**settings))) > 1e-3


def _unmapped_q_is_caught(target, draft):
    """UnmappedQ is caught twice: by the chi-square test (past the engine's check of q), and by that check."""
    from specui import SpeculativeEngine
    from specui.sampling import Sampling
    from tests.engine.test_engine_sampling import exact_first_two, observed_first_two, p_value

    counts = observed_first_two(SpeculativeEngine(target, draft), [1, 2], num_draft_tokens=2, temperature=1.0,
                                drafter=UnmappedQ(draft))
    assert p_value(counts, exact_first_two(target, [1, 2], Sampling(temperature=1.0))) < 1e-6
    untrusted = UnmappedQ(draft)
    untrusted.trusted_q = False  # as a custom drafter: the engine's check finds a token its q gives no chance
    with pytest.raises(ValueError, match="drafter 'unmapped' proposed token .* with q = 0 there"):
        for seed in range(20):
            SpeculativeEngine(target, draft).generate([1, 2], max_new_tokens=8, num_draft_tokens=2, temperature=1.0,
                                                      seed=seed, drafter=untrusted)


def test_unmapped_q_is_caught():
    target, draft = _five_token_pair()
    _unmapped_q_is_caught(target, draft)


def test_full_vocabulary_keeps_greedy_choices():
    target = tiny_target()
    token_ids = torch.tensor([0, 3, 7, 50, 119])
    draft = chat_draft.build(target, num_layers=2, token_ids=token_ids, init_layers=[0, 1]).eval()
    full = chat_draft.full_vocabulary(draft)
    ids = torch.tensor([[1, 2, 118, 7, 3]])
    with torch.inference_mode():
        small, big = draft(input_ids=ids).logits, full(input_ids=ids).logits
    assert big.shape[-1] == 120 and draft.lm_head.out_features == 5  # the original is untouched
    assert torch.equal(token_ids[small.argmax(-1)], big.argmax(-1))
    assert torch.allclose(big.softmax(-1)[..., token_ids], small.softmax(-1), atol=1e-6)


# -- an ordinary transformers draft kept to a reduced vocabulary (specui_vocabulary.json) ---------------


def _ordinary_draft(seed: int = 5, vocab: int = 120):
    return tiny_target(seed, vocab, hidden=32, layers=1, heads=2)


def test_restrict_vocabulary_keeps_rows_and_whole_input_embeddings():
    draft = _ordinary_draft()
    weight = draft.lm_head.weight.detach().clone()
    token_ids = torch.tensor([0, 3, 7, 50, 119])
    ids = torch.tensor([[1, 2, 118, 7, 3]])
    with torch.inference_mode():
        before = draft(input_ids=ids).logits
    chat_draft.restrict_vocabulary(draft, token_ids.tolist())
    assert draft.get_input_embeddings().num_embeddings == 120  # every id still embeds
    assert torch.equal(draft.lm_head.weight, weight[token_ids]) and torch.equal(draft.token_ids, token_ids)
    assert torch.equal(draft.get_input_embeddings().weight, weight)  # untied: the input side is untouched
    with torch.inference_mode():
        after = draft(input_ids=ids).logits
    assert torch.allclose(after, before[..., token_ids], atol=1e-5)  # a product of 5 rows, not 120: rounding


@pytest.mark.parametrize("bad", [[], [1, 1], [-1, 2], [3, 120], [[1, 2]]])
def test_restrict_vocabulary_refuses_bad_ids(bad):
    with pytest.raises(ValueError, match="distinct token ids in \\[0, 120\\)"):
        chat_draft.restrict_vocabulary(_ordinary_draft(), bad)


def test_vocabulary_file_is_read_and_checked(tmp_path):
    (tmp_path / chat_draft.VOCABULARY).write_text(json.dumps({"token_ids": [4, 2, 9], "picked": "test"}))
    assert chat_draft.has_vocabulary(tmp_path) and chat_draft.load_vocabulary(tmp_path) == [4, 2, 9]
    (tmp_path / chat_draft.VOCABULARY).write_text(json.dumps({"token_ids": ["4"]}))
    with pytest.raises(ValueError, match="expected"):
        chat_draft.load_vocabulary(tmp_path)
    assert not chat_draft.has_vocabulary(tmp_path / "elsewhere")


def test_greedy_identity_with_an_ordinary_draft_kept_to_some_ids():
    from specui import SpeculativeEngine

    target = tiny_target(seed=3)
    draft = _ordinary_draft()
    chat_draft.restrict_vocabulary(draft, list(range(0, 120, 3)))
    engine = SpeculativeEngine(target, draft)
    full = chat_draft.full_vocabulary(draft)  # what transformers' assisted generation is given
    for prompt in ([5, 9, 11], [100, 7, 7, 7, 2]):
        plain = engine.generate(prompt, max_new_tokens=30, speculative=False).token_ids
        spec = engine.generate(prompt, max_new_tokens=30, num_draft_tokens=3)
        assert spec.token_ids == plain
        assert all(t % 3 == 0 for r in spec.rounds for t in r.drafted)
        with torch.inference_mode():
            hf = target.generate(torch.tensor([prompt]), max_new_tokens=30, do_sample=False,
                                 assistant_model=full)[0, len(prompt):]
        assert hf.tolist() == plain


def test_sampling_is_exact_with_an_ordinary_draft_kept_to_some_ids():
    from specui import SpeculativeEngine
    from specui.sampling import Sampling
    from tests.engine.test_engine_sampling import exact_first_two, observed_first_two, p_value
    from tests.helpers import five_token_pair

    target, draft = five_token_pair()
    chat_draft.restrict_vocabulary(draft, [1, 3, 4])
    counts = observed_first_two(SpeculativeEngine(target, draft), [1, 2], num_draft_tokens=2, temperature=1.0)
    assert p_value(counts, exact_first_two(target, [1, 2], Sampling(temperature=1.0))) > 1e-3
    # the same draft with q left on its own rows (not scattered onto the ids) is caught
    _unmapped_q_is_caught(target, draft)


def test_a_grown_draft_computes_what_it_did_and_then_learns_with_its_new_layers():
    target = tiny_target()
    token_ids = torch.tensor([0, 3, 7, 50, 119])
    draft = chat_draft.build(target, num_layers=2, token_ids=token_ids, init_layers=[0, 1]).eval()
    grown = chat_draft.grow(draft, target, [2, 3]).eval()
    assert grown.config.num_hidden_layers == 4 and torch.equal(grown.token_ids, token_ids)
    assert torch.equal(grown.model.layers[2].mlp.up_proj.weight, target.model.layers[2].mlp.up_proj.weight)
    assert not grown.model.layers[3].self_attn.o_proj.weight.any()
    ids = torch.tensor([[5, 9, 11, 100, 7]])
    with torch.inference_mode():
        assert torch.equal(grown(input_ids=ids).logits, draft(input_ids=ids).logits)
    grown.train()  # a step moves the new layers: their zero products get gradients
    grown(input_ids=ids).logits.logsumexp(-1).sum().backward()
    assert grown.model.layers[3].mlp.down_proj.weight.grad.abs().sum() > 0
    with pytest.raises(ValueError, match="at least one"):
        chat_draft.grow(draft, target, [])
