"""The early-exit and Medusa heads' rounds in one native call each (native_adapters.c), on a CPU in float32.

Early exit (`ExitChain`, `exit_draft`): the Python steps (`EarlyExitDrafter.propose`) run cur and each draft token
but the last through the target's first E layers on its own cache (`CachedLM.extend_early`), then the head's norm,
block and MLP, the target's final norm and the head's output rows, and draw: some twenty calls a token, each dearer
once the verify forward has swept Python's own code and data from the caches. `ExitChain` runs the same round from C:
the target's layers as its native forward runs them (`native_chain.StackLayers`: the same structs, cache and bits,
which the verify forward relies on, since it starts those tokens at layer E), the head's products on the panels its
Python steps use (`specui.products`), and the chain's argmax or draw (native_chain.h's `chain_pick`). The draft
equals the Python steps' to float rounding (the head's norms and SiLU round on their own); the states entering layer
E are the Python steps' bit for bit.

Medusa (`MedusaChain`, `medusa_draft`): head i's residual blocks on the target's last normed state, its output rows
and the pick, for the first K heads, where the Python steps ran every head's blocks and output and then drew row by
row; the drafts equal theirs to float rounding.
"""

from __future__ import annotations

import ctypes
import functools

import torch

from specui import native
from specui.native_chain import GREEDY, _Chain, _Decoder, _Matrix, _float32, _matrix, _packed, _ptr, _run, _Sampler
from specui.native_chain import _sampler
from specui.sampling import Sampling


class _Exit(ctypes.Structure):
    _fields_ = [("block", _Matrix), ("gate_up", _Matrix), ("down", _Matrix), ("norm", _ptr), ("mlp_norm", _ptr),
                ("eps", ctypes.c_float), ("stop", ctypes.c_int), ("chain", _Chain)]


class _Medusa(ctypes.Structure):
    _fields_ = [("blocks", ctypes.POINTER(_Matrix)), ("heads", ctypes.c_int), ("per_head", ctypes.c_int),
                ("chain", _Chain)]


@functools.cache
def _calls(kernel: native.Kernel) -> tuple:
    """The library's exit_draft and medusa_draft, their arguments declared once per build."""
    exit_draft, medusa_draft = kernel.library.exit_draft, kernel.library.medusa_draft
    sampler = ctypes.POINTER(_Sampler)
    exit_draft.argtypes = [ctypes.POINTER(_Exit), ctypes.POINTER(_Decoder), ctypes.c_longlong, ctypes.c_longlong,
                           ctypes.c_int, sampler, _ptr, _ptr, _ptr]
    medusa_draft.argtypes = [ctypes.POINTER(_Medusa), _ptr, ctypes.c_int, sampler, _ptr, _ptr]
    exit_draft.restype = medusa_draft.restype = ctypes.c_int
    return exit_draft, medusa_draft


def _float_cpu(weight: torch.Tensor) -> bool:
    return native.kernel() is not None and weight.device.type == "cpu" and weight.dtype == torch.float32


class ExitChain:
    """An early-exit head's rounds over a target's lean forward (`exit_draft`); built per drafter run."""

    @staticmethod
    def serves(head, target) -> bool:
        """Whether the head's rounds on `target` (a `CachedLM`) can run natively: the target's layers as native
        structs (`native_chain.StackLayers`), the head and its output rows float32 on the CPU."""
        return (getattr(target.stack, "native_layers", None) is not None and _float_cpu(head.norm_weight)
                and _float_cpu(head.output._rows))

    def __init__(self, head, target, kernel: native.Kernel):
        self.head, self._call = head, _calls(kernel)[0]
        block = _packed(head.block.linear.weight, kernel, head.block.linear.bias)
        out = _packed(head.output._rows, kernel)
        mlp = head.mlp
        packed = [block, out, *((_packed(mlp.gate_up.weight, kernel), _packed(mlp.down.weight, kernel)) if mlp else ())]
        final = head.output._norm  # the target's final norm
        norms = [_float32(w) for w in (head.norm_weight, final.weight, *((mlp.norm_weight,) if mlp else ()))]
        ids, embed = head.output.token_ids.to(torch.int64).contiguous(), target.stack.embed.weight.detach()
        self.kept = [*packed, *norms, ids, embed]
        self.vocab, self.width = out.n, embed.shape[1]
        gate_up, down = (_matrix(packed[2]), _matrix(packed[3])) if mlp else (_Matrix(), _Matrix())  # n 0: no MLP
        self.struct = _Exit(
            block=_matrix(block), gate_up=gate_up, down=down, norm=norms[0].data_ptr(),
            mlp_norm=norms[2].data_ptr() if mlp else None, eps=head.eps, stop=head.exit_layer,
            chain=_Chain(out=_matrix(out), norm=norms[1].data_ptr(), embed=embed.data_ptr(), ids=ids.data_ptr(),
                         eps=final.variance_epsilon, width=self.width, embed_rows=embed.shape[0]))

    def run(self, target, token: int, k: int, stop_below: float, sampling: Sampling = GREEDY,
            draws: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One round (greedy, or sampled by `draws`, k uniforms) from cur = `token`, the token after the target's
        cache: (rows of the head's vocabulary [n], the distributions they came from [n, vocabulary], the states
        entering the exit layer of cur and the first n - 1 drafts [n, width]), 1 <= n <= k. Their keys and values
        of layers 0..E-1 are in the target's cache at its next n slots; the caller records them
        (`CachedLM.ran_early`)."""
        stack, position = target.stack, target.length
        target._stack_cache()
        cache = target.cache
        cache.reserve(position + k)
        stack._rotary(torch.empty(1), position, position + k)  # the rotary table, grown to hold these positions
        stack.native_layers.bind(stack, cache)
        index, probs = torch.empty(k, dtype=torch.int64), torch.empty(k, self.vocab)
        states = torch.empty(k, self.width)
        drafted = _run(self._call, ctypes.byref(self.struct), ctypes.byref(stack.native_layers.struct), token,
                       position, k, ctypes.byref(_sampler(sampling, stop_below, draws)), index.data_ptr(),
                       probs.data_ptr(), states.data_ptr())
        return index[:drafted], probs[:drafted], states[:drafted]


class MedusaChain:
    """Medusa heads' rounds (`medusa_draft`); built per drafter run."""

    @staticmethod
    def serves(heads) -> bool:
        """Whether the heads' rounds can run natively: their blocks and output rows float32 on the CPU."""
        return _float_cpu(heads.blocks[0][0].linear.weight) and _float_cpu(heads.output._rows)

    def __init__(self, heads, kernel: native.Kernel):
        self._call = _calls(kernel)[1]
        blocks = [_packed(block.linear.weight, kernel, block.linear.bias) for head in heads.blocks for block in head]
        out = _packed(heads.output._rows, kernel)
        ids = heads.output.token_ids.to(torch.int64).contiguous()
        self.matrices = (_Matrix * len(blocks))(*map(_matrix, blocks))
        self.kept = [*blocks, out, ids]
        self.vocab, width = out.n, heads.blocks[0][0].linear.weight.shape[0]
        self.struct = _Medusa(blocks=self.matrices, heads=len(heads.blocks), per_head=len(heads.blocks[0]),
                              chain=_Chain(out=_matrix(out), norm=None, ids=ids.data_ptr(), width=width))

    def run(self, state: torch.Tensor, k: int, stop_below: float, sampling: Sampling = GREEDY,
            draws: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """One round (greedy, or sampled by `draws`, k uniforms) from the target's final normed state [width]: (rows
        of the heads' vocabulary [n], the distributions they came from [n, vocabulary]), 1 <= n <= min(k, heads)."""
        state = _float32(state)
        index, probs = torch.empty(k, dtype=torch.int64), torch.empty(k, self.vocab)
        drafted = _run(self._call, ctypes.byref(self.struct), state.data_ptr(), k,
                       ctypes.byref(_sampler(sampling, stop_below, draws)), index.data_ptr(), probs.data_ptr())
        return index[:drafted], probs[:drafted]
