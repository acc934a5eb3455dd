"""An EAGLE head's greedy round of drafting in one native call (`head_draft` in specui/native_head.c).

`EagleDrafter.propose` first feeds the head the target's states of the tokens just verified, then drafts
step by step: the head's logits, their argmax, and one more pass of its decoder layer on the token just
drafted. On a CPU in float32 each step was some thirty calls from Python, whose per-call costs were a
third of the drafting time; `NativeChain.run` makes the whole round one call, on the same packed matrices
(`specui.products`), the same norm, rotary and attention kernels and the same cache. It serves greedy chains only: a sampled draft draws
from the head's q with the run's generators, and a tree drafts several rows a depth (both stay in Python).
The drafts equal the Python steps' to float rounding (the SiLU and softmax round on their own), which only
ever moves acceptance: the target verifies whatever is proposed.
"""

from __future__ import annotations

import ctypes

import torch

from specui import native
from specui.products import _prepared


class _Matrix(ctypes.Structure):
    _fields_ = [("w", ctypes.c_void_p), ("bias", ctypes.c_void_p), ("n", ctypes.c_int), ("k", ctypes.c_int),
                ("count", ctypes.c_int), ("kind", ctypes.c_int), ("threads", ctypes.c_int)]


class _Head(ctypes.Structure):
    _fields_ = [*[(name, _Matrix) for name in ("fuse", "fc", "qkv", "o", "gate_up", "down", "out")],
                *[(name, ctypes.c_void_p) for name in ("norm1", "norm2", "norm", "embed", "ids", "cos", "sin",
                                                      "keys", "values")],
                ("cap", ctypes.c_longlong), ("eps", ctypes.c_float), ("eps_out", ctypes.c_float),
                ("scale", ctypes.c_float), ("width", ctypes.c_int), ("heads", ctypes.c_int), ("hd", ctypes.c_int),
                ("ffn", ctypes.c_int)]


class NativeChain:
    """The head's matrices, norms and vocabulary as `head_chain` reads them, prepared once per drafter."""

    def __init__(self, head, kernel: native.Kernel):
        layer = head.layer
        self.kernel, self.head = kernel, head
        self._call = kernel.library.head_draft
        self._call.argtypes = [ctypes.POINTER(_Head), ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_longlong,
                               ctypes.c_int, ctypes.c_float, ctypes.c_void_p, ctypes.c_void_p]
        self._call.restype = ctypes.c_int
        # the same packed matrices `specui.products.linear` uses while the head drafts in Python
        weights = {"fuse": head.fuse.weight, "fc": head.fc.weight, "qkv": layer.qkv.weight, "o": layer.o.weight, "gate_up": layer.gate_up.weight,
                   "down": layer.down.weight, "out": head.output._rows}
        products = {name: _prepared([w], [None], how="native", kernel=kernel)[0] for name, w in weights.items()}
        self.keep = [*products.values(), *weights.values()]  # alive while the pointers below are used
        threads = native.product_threads()
        matrices = {name: _Matrix(p.panels.data_ptr(), None, p.n, p.k, p.count, p._kind,
                                  threads if p._work >= native.SPLIT_WORK else 1) for name, p in products.items()}
        self.norms = [t.detach().float().contiguous() for t in (layer.norm1, layer.norm2, head.norm)]
        self.ids = head.output.token_ids.to(torch.int64).contiguous()
        self.embed = head._embed.weight.detach()
        self.vocab = products["out"].n
        self.struct = _Head(**matrices, norm1=self.norms[0].data_ptr(), norm2=self.norms[1].data_ptr(),
                            norm=self.norms[2].data_ptr(), embed=self.embed.data_ptr(), ids=self.ids.data_ptr(),
                            eps=layer.eps, eps_out=head.eps, scale=layer.head_dim ** -0.5, width=head.fc.weight.shape[0],
                            heads=layer.heads, hd=layer.head_dim, ffn=layer.down.weight.shape[1])

    @staticmethod
    def serves(head) -> bool:
        """Whether this head's chain can run natively: float32 on the CPU, its target's embeddings float32 and
        contiguous, and a head size the native attention computes."""
        kernel = native.kernel()
        embed = head._embed.weight
        return (kernel is not None and head.fc.weight.device.type == "cpu" and head.fc.weight.dtype == torch.float32
                and embed.dtype == torch.float32 and embed.is_contiguous() and kernel.attends(head.layer.head_dim))

    def run(self, states: torch.Tensor, follow: torch.Tensor, position: int, k: int, stop_below: float,
            cache) -> tuple[torch.Tensor, torch.Tensor]:
        """One greedy round: the target's fused-layer states [m, F] not yet fed, with the tokens after them [m],
        go into the head's cache (keys [heads, hd, capacity], values [heads, capacity, hd]) at slots
        position.., then up to k tokens are drafted (step i > 0 writes slot position + m + i - 1; the capacity
        must hold position + m + k - 1). Returns (indices into the head's vocabulary [n], their softmax rows
        [n, vocabulary]), 1 <= n <= k."""
        keys, values = cache
        rows = states.shape[0]
        cos, sin = self.head.layer._angles(position + rows + k, states.device)
        states = states.detach().float().contiguous()
        follow = follow.to(torch.int64).contiguous()
        index = torch.empty(k, dtype=torch.int64)
        probs = torch.empty(k, self.vocab)
        s = self.struct
        s.cos, s.sin, s.keys, s.values, s.cap = cos.data_ptr(), sin.data_ptr(), keys.data_ptr(), values.data_ptr(), \
            keys.shape[2]
        drafted = self._call(ctypes.byref(s), states.data_ptr(), follow.data_ptr(), rows, position, k, stop_below,
                             index.data_ptr(), probs.data_ptr())
        if drafted < 0:
            raise MemoryError("native EAGLE round: out of memory")
        return index[:drafted], probs[:drafted]
