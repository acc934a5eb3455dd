"""The EAGLE head's decoder layer: one pre-norm layer with its own rotary attention and SwiGLU MLP.

`HeadLayer` holds the weights and the pieces a step is made of (`project`: q, k and v, q and k rotated; `finish`:
the residual adds around attention and the MLP), so that `specui.heads.eagle` can run them over its own KV cache,
in torch or in native code, and train them unrolled. `rms_norm` is the RMSNorm the head and its layer share.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from specui import native
from specui.products import linear


class HeadLayer(nn.Module):
    """One pre-norm decoder layer with its own rotary attention: x [T, D] at `positions` -> [T, D]."""

    def __init__(self, width: int, *, heads: int, ffn: int, theta: float, eps: float):
        super().__init__()
        self.heads, self.head_dim, self.theta, self.eps = heads, width // heads, theta, eps
        self.norm1 = nn.Parameter(torch.ones(width))
        self.qkv = nn.Linear(width, 3 * width, bias=False)
        self.o = nn.Linear(width, width, bias=False)
        self.norm2 = nn.Parameter(torch.ones(width))
        self.gate_up = nn.Linear(width, 2 * ffn, bias=False)
        self.down = nn.Linear(ffn, width, bias=False)

    def rope(self, x: torch.Tensor, positions: torch.Tensor, angles=None) -> torch.Tensor:
        """x [..., T, head_dim] rotated by `positions` [T] (the rotate-half convention of Llama); angles:
        `_rotation(positions, x.dtype)`, when the caller has it already."""
        half = self.head_dim // 2
        cos, sin = angles or self._rotation(positions, x.dtype, x.device)  # [T, head_dim]: sin's first half negated
        return x * cos + torch.cat([x[..., half:], x[..., :half]], dim=-1) * sin  # x1 cos - x2 sin, x2 cos + x1 sin

    def _rotation(self, positions: torch.Tensor | range, dtype, device) -> tuple[torch.Tensor, torch.Tensor]:
        """cos and sin [T, head_dim] at `positions` (a range: rows of the table, no gather)."""
        if isinstance(positions, range):
            cos, sin = self._angles(positions.stop, device)
            return cos[positions.start:positions.stop].to(dtype), sin[positions.start:positions.stop].to(dtype)
        cos, sin = self._angles(int(positions.max()) + 1, positions.device)
        return cos[positions].to(dtype), sin[positions].to(dtype)

    def _angles(self, length: int, device) -> tuple[torch.Tensor, torch.Tensor]:
        """cos and sin [>= length, head_dim] of every position's angles, each half once (sin's first half
        negated: the rotation in one product, exactly as the halves' own), kept (grown by doubling)."""
        table = getattr(self, "_table", None)
        if table is None or table[0].shape[0] < length or table[0].device != torch.device(device):
            half = self.head_dim // 2
            freq = self.theta ** (-torch.arange(half, device=device, dtype=torch.float32) / half)
            angle = torch.arange(max(2 * length, 256), device=device, dtype=torch.float32)[:, None] * freq[None]
            table = (torch.cat([angle.cos()] * 2, dim=-1), torch.cat([-angle.sin(), angle.sin()], dim=-1))
            object.__setattr__(self, "_table", table)  # not a buffer: never saved
        return table

    def qkv_rows(self, x: torch.Tensor) -> torch.Tensor:
        """q, k and v of x [.., T, D] side by side, before rotation: [.., T, 3 D]."""
        return linear(rms_norm(x, self.norm1, self.eps), self.qkv.weight)

    def project(self, x: torch.Tensor, positions: torch.Tensor | range):
        """q, k, v [.., heads, T, head_dim] of x [.., T, D], q and k rotated."""
        qkv = self.qkv_rows(x)
        width = qkv.shape[-1] // 3
        qk, v = (t.unflatten(-1, (-1, self.head_dim)).transpose(-3, -2) for t in (qkv[..., :2 * width], qkv[..., 2 * width:]))
        qk = self.rope(qk, positions, self._rotation(positions, x.dtype, x.device))  # q's heads and k's at once
        return qk[..., :self.heads, :, :], qk[..., self.heads:, :, :], v

    def finish(self, x: torch.Tensor, attended: torch.Tensor, *, flat: bool = False) -> torch.Tensor:
        """The residual adds around attention's output [.., heads, T, head_dim] (flat: [.., T, heads *
        head_dim]) and the MLP."""
        x = x + linear(attended if flat else attended.transpose(-3, -2).flatten(-2), self.o.weight)
        gate, up = linear(rms_norm(x, self.norm2, self.eps), self.gate_up.weight).chunk(2, dim=-1)
        return x + linear(F.silu(gate) * up, self.down.weight)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm in float32: `specui.native`'s while drafting (inference mode, float32 rows on a CPU: a head's q
    only sets acceptance, and the kernel's call costs a tenth of these ops'), else torch's (training)."""
    kernel = native.kernel() if torch.is_inference_mode_enabled() else None
    if kernel is not None and kernel.norms(x, weight):
        return kernel.rms_norm(x, weight, eps)
    h = x.float()
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return (weight * h).to(x.dtype)
