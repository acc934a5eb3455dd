"""specui's own drafters in int8: each row of a weight rounded to integers in [-127, 127] times a power of two.

A drafting step on a CPU reads its drafter's weights from memory (the target's forward between steps evicts them),
so its cost is their bytes: 8-bit integers read a quarter of float32's and half of float16's. The scale of a row
is a power of two, so the integers times it are float32 values exactly: the rounded weights stay ordinary float32
tensors (the torch ops and a GPU use them as they are), and the native products detect them
(`exact_scales`), pack the integers and scale each output at the end, which is exact, so their bits
are those of float32 products of the rounded weights. Only drafters are rounded, never a target: the target
verifies whatever is proposed, so rounding moves acceptance, never the output. Measured on the chat preset's EAGLE
head (teacher-forced step-1 agreement on 16 held-out prompts, scored as `tools.eagle_agreement` scores): its layer
and output rows rounded, 0.637 both ways; its fuse and fc rounded too, 0.631, so those stay as they are.
"""

from __future__ import annotations

import torch
from torch import nn


def scales(weight: torch.Tensor) -> torch.Tensor:
    """Each row's scale [n, 1] of a float32 weight [n, k]: the smallest power of two that holds the row's largest
    magnitude in 127 steps (1 for a row of zeros)."""
    top = weight.abs().amax(dim=1, keepdim=True)
    scale = torch.exp2(torch.ceil(torch.log2(top.clamp_min(torch.finfo(torch.float32).tiny) / 127)))
    return torch.where(top > 0, scale, torch.ones_like(scale))


def rounded(weight: torch.Tensor) -> torch.Tensor:
    """weight [n, k] rounded row by row to integers in [-127, 127] times the row's `scales`, in float32."""
    w = weight.detach().float()
    scale = scales(w)
    return (w / scale).round().clamp(-127, 127) * scale


@torch.no_grad()
def round_linears(modules: list[nn.Module]) -> int:
    """Round the weight of each of these modules in place; returns how many weights were rounded."""
    for module in modules:
        module.weight.copy_(rounded(module.weight))
    return len(modules)


@torch.no_grad()
def round_drafter(drafter) -> int:
    """Round a drafter of specui's own in place: an EAGLE head's layer and output rows (`specui.heads.eagle`), or
    a chat draft's layers and output rows (`specui.chat_draft`); other heads and models are left as they are.
    Returns how many weights were rounded."""
    layer = getattr(drafter, "layer", None)
    if layer is not None and hasattr(drafter, "fc") and hasattr(drafter, "output"):  # an EAGLE head
        count = round_linears([layer.qkv, layer.o, layer.gate_up, layer.down])
        drafter.output.round_rows()
        return count + 1
    if getattr(drafter, "token_ids", None) is not None and hasattr(drafter, "model"):  # a chat draft
        embed = drafter.get_input_embeddings()
        linears = [m for m in drafter.modules() if isinstance(m, nn.Linear) and m.weight is not embed.weight]
        return round_linears(linears)
    return 0


def exact_scales(weight: torch.Tensor) -> torch.Tensor | None:
    """Each row's scale (float32 [n]) when every row of the float32 `weight` [n, k] is exactly integers in
    [-127, 127] times its `scales` (as `rounded` leaves it), else None: how the native products know int8 rows."""
    if weight.dtype != torch.float32 or weight.dim() != 2 or weight.shape[0] == 0:
        return None
    if _exact_scales(weight[:1]) is None:  # the first row says no: spare a large float weight the passes below
        return None
    return _exact_scales(weight)


def _exact_scales(weight: torch.Tensor) -> torch.Tensor | None:
    if not bool(torch.isfinite(weight).all()):
        return None
    scale = scales(weight)
    values = weight / scale
    if not torch.equal(values.round(), values) or bool((values.abs() > 127).any()) or \
            not torch.equal(values * scale, weight):
        return None
    return scale[:, 0]
