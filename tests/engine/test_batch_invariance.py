"""Batch invariance of the lean forward (specui.lean.DecoderStack): a token's logits are the same bits
whether it is computed alone (plain decoding's one-token forward) or among the K+1 tokens of a verify
forward, in float32 and bfloat16, with one or two threads, on both kinds of products (small weights as
x @ W^T, large ones through MKL's packed GEMM) and across the attention's key blocks. With it, greedy
speculative decoding emits plain greedy decoding's tokens by construction, whatever the near-ties.
Float32 products run on both backends: the native kernels (specui/rowgemm.c) and MKL's."""

import pytest
import torch

from specui import SpeculativeEngine, native
from specui.kv import CachedLM
from specui.lean import KEY_BLOCK
from specui.products import SMALL_WEIGHT
from tests.helpers import make_config, noisy_copy


def _model(arch: str, *, hidden: int, heads: int, kv_heads: int, vocab: int, dtype=torch.float32, seed: int = 0):
    from transformers import AutoModelForCausalLM

    config = make_config(arch, vocab_size=vocab, layers=2, hidden=hidden, max_positions=1024, init_range=0.1)
    config.num_attention_heads, config.num_key_value_heads = heads, kv_heads
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config).eval()
    if arch == "qwen2":
        with torch.no_grad():  # give the q/k/v biases values, so they are tested
            for layer in model.model.layers:
                for proj in (layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj):
                    proj.bias.normal_(0, 0.3)
    model.generation_config.eos_token_id = model.generation_config.pad_token_id = None
    return model.to(dtype)


SHAPES = {  # (arch, hidden, heads, kv_heads, vocab)
    "small grouped": ("llama", 64, 4, 2, 96),
    "small ungrouped": ("llama", 64, 2, 2, 96),
    "qwen2 biases": ("qwen2", 64, 4, 2, 96),
    "large products": ("llama", 192, 6, 2, 1024),  # gate/up and the output layer above SMALL_WEIGHT
}


@pytest.fixture(params=["native", "mkl"])
def backend(request, monkeypatch):
    """Which float32 products the lean forward takes (read when a stack is built)."""
    if request.param == "native" and native.kernel() is None:
        pytest.skip("no native build on this machine")
    if request.param == "mkl":
        monkeypatch.setenv("SPECUI_NATIVE", "0")
    return request.param


def _differing_rows(model, *, pasts, sizes) -> tuple[int, int]:
    """Rows of block forwards whose logits differ in any bit from one-token forwards at the same
    positions (each one-token forward after the previous ones, as plain decoding runs them)."""
    seq = torch.randint(0, model.config.vocab_size, (max(pasts) + max(sizes),), generator=torch.Generator().manual_seed(1)).tolist()
    lm, bad, total = CachedLM(model), 0, 0
    assert lm.stack is not None
    with torch.inference_mode():
        for past in pasts:
            for n in sizes:
                lm.trim(0)
                lm.extend(seq[:past], last_only=True)
                block = lm.extend(seq[past:past + n])
                lm.trim(past)
                for j in range(n):
                    one = lm.extend(seq[past + j:past + j + 1])
                    total += 1
                    bad += not torch.equal(one[0], block[j])
    return bad, total


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["float32", "bfloat16"])
@pytest.mark.parametrize("shape", list(SHAPES))
def test_verify_rows_equal_one_token_rows(shape, dtype, backend):
    arch, hidden, heads, kv_heads, vocab = SHAPES[shape]
    model = _model(arch, hidden=hidden, heads=heads, kv_heads=kv_heads, vocab=vocab, dtype=dtype)
    if shape == "large products":
        assert model.model.layers[0].mlp.gate_proj.weight.numel() * 2 > SMALL_WEIGHT
    # blocks inside the first key block, crossing a multiple of KEY_GRAIN, ending on and crossing the
    # block's end, and inside the second
    pasts = (1, 60, KEY_BLOCK - 9, KEY_BLOCK - 1, KEY_BLOCK + 40)
    assert _differing_rows(model, pasts=pasts, sizes=(2, 5, 9, 17)) == (0, 5 * 33)


def test_rows_are_invariant_with_two_threads(backend):
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        model = _model("llama", hidden=192, heads=6, kv_heads=2, vocab=1024)
        assert _differing_rows(model, pasts=(3, KEY_BLOCK - 2), sizes=(4, 8))[0] == 0
    finally:
        torch.set_num_threads(threads)


def test_an_edited_weight_is_repacked(backend):
    """Packed and transposed copies follow in-place edits of the model's weights (a trained or edited
    model) and conversions (`.to()` replaces a parameter's storage, not the parameter)."""
    model = _model("llama", hidden=192, heads=6, kv_heads=2, vocab=1024)
    ids = [5, 6, 7, 8]
    with torch.inference_mode():
        before = CachedLM(model).extend(ids)
        model.lm_head.weight.mul_(2.0)  # tied to the embeddings: both change
        after = CachedLM(model).extend(ids)
        reference = model(torch.tensor([ids])).logits[0]
    assert not torch.allclose(before, after)
    assert torch.allclose(after, reference, atol=1e-4 * reference.abs().max())
    model.to(torch.float64)  # a dtype the lean forward computes with its plain products
    with torch.inference_mode():
        converted = CachedLM(model).extend(ids)
    assert converted.dtype == torch.float64 and torch.allclose(converted.float(), reference, atol=1e-4 * reference.abs().max())


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["float32", "bfloat16"])
def test_greedy_speculative_equals_plain_by_construction(dtype, backend):
    """bfloat16 included: near-ties are everywhere in half precision, and still no token differs."""
    target = _model("llama", hidden=192, heads=6, kv_heads=2, vocab=1024, dtype=dtype)
    engine = SpeculativeEngine(target, noisy_copy(target, noise=0.3, seed=2))
    gen = torch.Generator().manual_seed(4)
    for length in (1, 7, 30):
        prompt = torch.randint(0, 1024, (length,), generator=gen).tolist()
        plain = engine.generate(prompt, max_new_tokens=24, speculative=False).token_ids
        for k in (1, 3, 8):
            for drafter in ("model", "prompt_lookup"):
                spec = engine.generate(prompt, max_new_tokens=24, num_draft_tokens=k, drafter=drafter)
                assert spec.token_ids == plain, (dtype, length, k, drafter)


TREE = [9, 10, 11, 12, 13, 14]  # cur = 9, then five nodes
TREE_PARENTS = [-1, 0, 0, 1, 3, 2]
TREE_PATHS = {0: [9], 1: [9, 10], 2: [9, 11], 3: [9, 10, 12], 4: [9, 10, 12, 13], 5: [9, 11, 14]}


@pytest.mark.parametrize("prefix_length", [5, 60, KEY_BLOCK + 3])  # across a grain and a key block
@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_tree_rows_equal_chain_rows_bit_for_bit(arch, prefix_length):
    """A token tree's row sees its ancestors at scattered cache slots, a chain's at consecutive ones: the
    native attention sums by the rank of each seen key, not its slot, so both rows are the same bits,
    and so greedy tree decoding equals plain greedy decoding by construction too. Fed at once and level
    by level (a dynamic tree), where the second call's rows see the first call's nodes."""
    if native.kernel() is None:
        pytest.skip("no native build on this machine")
    model = _model(arch, hidden=192, heads=6, kv_heads=2, vocab=1024)  # head size 48 (llama) and 32 (qwen2)
    assert CachedLM(model).stack.native is not None, "attention must run natively for this test to mean anything"
    prefix = torch.randint(0, 1024, (prefix_length,), generator=torch.Generator().manual_seed(3)).tolist()
    with torch.inference_mode():
        chains = {}
        for node, path in TREE_PATHS.items():
            lm = CachedLM(model)
            lm.extend(prefix, last_only=True)
            chains[node] = lm.extend(path)[-1]
        at_once = CachedLM(model)
        at_once.extend(prefix, last_only=True)
        rows = at_once.extend_tree(TREE, parents=TREE_PARENTS)
        by_level = CachedLM(model)
        by_level.extend(prefix, last_only=True)
        levels = [by_level.extend_tree(TREE[:3], parents=TREE_PARENTS[:3]),
                  by_level.extend_tree(TREE[3:], parents=TREE_PARENTS[3:])]
    leveled = torch.cat(levels)
    for node in TREE_PATHS:
        assert torch.equal(rows[node], chains[node]), node
        assert torch.equal(leveled[node], chains[node]), node
