"""The native RMSNorm and rotary step of the lean forward (specui/native_layer.c `rowrmsnorm`, `rowrope`). The norm
equals transformers' LlamaRMSNorm to float32 rounding, each row's bits independent of the rows computed with
it, of their stride and of the instruction set, and the lean forward normalises through it. The rotary step
gives the bits of the torch ops it replaces, the cache writes included."""

import pytest
import torch
from transformers import LlamaForCausalLM
from transformers.models.llama.modeling_llama import LlamaRMSNorm

from specui import native
from specui.kv import CachedLM
from tests.helpers import make_config

pytestmark = pytest.mark.skipif(native.best_isa() is None, reason="no x86 CPU with AVX2 and FMA")


def _case(rows: int, n: int, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(rows, n, generator=gen) * 3, torch.randn(n, generator=gen)


@pytest.mark.parametrize("n", [1, 7, 8, 9, 96, 97, 576])
def test_it_is_transformers_rmsnorm(kernel, n):
    x, weight = _case(6, n)
    module = LlamaRMSNorm(n, eps=1e-5)
    with torch.no_grad():
        module.weight.copy_(weight)
        expected = module(x)
    got = kernel.rms_norm(x, weight, 1e-5)
    assert got.dtype == torch.float32 and got.shape == (6, n)
    torch.testing.assert_close(got, expected, rtol=2e-6, atol=1e-6)


def test_rows_do_not_depend_on_the_rows_beside_them(kernel):
    x, weight = _case(19, 97)
    alone = torch.cat([kernel.rms_norm(x[r:r + 1], weight, 1e-6) for r in range(19)])
    for rows in range(1, 20):
        assert torch.equal(kernel.rms_norm(x[:rows], weight, 1e-6), alone[:rows])
    wide = torch.zeros(19, 200)
    wide[:, 50:147] = x  # rows 200 floats apart
    assert torch.equal(kernel.rms_norm(wide[:, 50:147], weight, 1e-6), alone)


def test_a_zero_row_stays_zero(kernel):
    x, weight = _case(3, 96)
    x[1] = 0
    out = kernel.rms_norm(x, weight, 1e-6)
    assert torch.equal(out[1], torch.zeros(96)) and out.isfinite().all()


def test_instruction_sets_give_the_same_bits():
    if native.best_isa() != "avx512":
        pytest.skip("this CPU has no AVX-512")
    x, weight = _case(7, 577)
    assert torch.equal(native.kernel("avx512").rms_norm(x, weight, 1e-6), native.kernel("avx2").rms_norm(x, weight, 1e-6))


def test_the_lean_forward_normalises_through_it(kernel, monkeypatch):
    torch.manual_seed(0)
    model = LlamaForCausalLM(make_config("llama", vocab_size=97, layers=2)).eval()
    calls = []
    original = native.Kernel.rms_norm
    monkeypatch.setattr(native.Kernel, "rms_norm", lambda self, *a: calls.append(1) or original(self, *a))
    lm = CachedLM(model)
    lm.stack.native_forward = False  # its Python steps (native layers call rowrmsnorm from C: test_native_layers.py)
    ids = torch.randint(0, 97, (12,))
    with torch.inference_mode():
        logits = lm.extend(ids)
        expected = model(ids[None]).logits[0]
    assert len(calls) == 2 * 2 + 1  # two per layer and the final norm
    torch.testing.assert_close(logits, expected, rtol=1e-4, atol=1e-4)


def _rope_by_torch(qkv, n, heads, kv_heads, hd, cos, sin, keys, values, past):
    """`DecoderStack._run`'s torch ops for the same step."""
    rows, half, width = qkv.shape[0], hd // 2, (heads + kv_heads) * hd
    qk, v = qkv[:, :width].view(rows, -1, hd), qkv[:, width:].view(rows, -1, hd)
    cos, sin = cos[:, None], sin[:, None]
    qk = (qk * cos) + (torch.cat((qk[..., half:], qk[..., :half]), dim=-1) * sin)
    keys[:, :, past:past + n] = qk[:n, heads:].permute(1, 2, 0)
    values[:, past:past + n] = v[:n].transpose(0, 1)
    return qk[:, :heads]


@pytest.mark.parametrize("heads,kv_heads,hd", [(3, 3, 32), (9, 3, 64), (4, 1, 16)])
@pytest.mark.parametrize("rows,n", [(2, 1), (5, 5), (13, 13), (40, 40)])
def test_rope_is_the_torch_ops_bit_for_bit(kernel, heads, kv_heads, hd, rows, n):
    gen = torch.Generator().manual_seed(rows * hd)
    qkv = torch.randn(rows, (heads + 2 * kv_heads) * hd, generator=gen) * 4
    if n == 1:
        qkv[1] = qkv[0]  # one token runs as two identical rows
    table = torch.rand(n, 2, hd, generator=gen) * 2 - 1
    cos, sin = table[:, 0].expand(rows, -1), table[:, 1].expand(rows, -1)  # one row of n = 1 serves both
    past, cap = 7, 48
    caches = [(torch.randn(kv_heads, hd, cap, generator=gen), torch.randn(kv_heads, cap, hd, generator=gen))]
    caches.append(tuple(t.clone() for t in caches[0]))
    q = kernel.rope(qkv, n, heads, kv_heads, cos, sin, *caches[0], past)
    expected = _rope_by_torch(qkv, n, heads, kv_heads, hd, cos, sin, *caches[1], past)
    assert torch.equal(q, expected)
    assert torch.equal(caches[0][0], caches[1][0]) and torch.equal(caches[0][1], caches[1][1])
