"""The drafters' rounds in one native call each (specui/native_head.c), on a CPU in float32.

A chain drafts one token a step: the drafter's logits, their argmax (greedy) or a draw from their softmax at the
run's temperature, and one more pass of its layers on the token just drafted. In Python each step was some thirty
calls, whose per-call costs were a third of the drafting time. Two drafters run their rounds natively instead, on
the same packed matrices (`specui.products`), the same norm, rotary and attention kernels and the same KV caches as
their Python steps:
- `HeadChain`: an EAGLE head's round (`EagleDrafter.propose`): the target's fresh states fed, then the chain;
- `DecoderChain`: a draft model's round (`ModelDrafter.propose`): the context's new tokens, then the chain, over
  the lean forward's cache (`specui.lean`).
The same structs run any lean forward's layers (`StackLayers`: a target's verify and plain decoding too), with the
bits of its Python steps.
A sampled round draws its K uniforms from the drafter's generator first (`uniforms`), as the Python steps do,
and draws each token from the very q it reports, by the inverse of its distribution function
(`specui.sampling.sample`): exact whatever q's rounding. Top-k and top-p are applied in C too (`rownucleus`, the
cut of `specui.sampling` from the sorted scores). An EAGLE head's token tree runs a depth in one call
(`HeadChain.tree_step`: the rows' states and logits), its nodes picked in Python (`specui.drafters.tree`). The drafts
equal the Python steps' to float rounding (an EAGLE head's SiLU, the softmax and top-p's running sum round on their
own), which only ever moves acceptance: the target verifies whatever is proposed.
"""

from __future__ import annotations

import ctypes
import functools
import os

import torch

from specui import native
from specui.products import _prepared
from specui.sampling import Sampling

_ptr = ctypes.c_void_p
GREEDY = Sampling()


class _Matrix(ctypes.Structure):
    _fields_ = [("w", _ptr), ("bias", _ptr), ("n", ctypes.c_int), ("k", ctypes.c_int), ("count", ctypes.c_int),
                ("kind", ctypes.c_int), ("threads", ctypes.c_int), ("narrow", _ptr), ("narrow_kind", ctypes.c_int),
                ("few", ctypes.c_int)]


class _Layer(ctypes.Structure):
    _fields_ = [*[(name, _Matrix) for name in ("qkv", "o", "gate_up", "down")],
                *[(name, _ptr) for name in ("norm1", "norm2", "keys", "values")], ("cap", ctypes.c_longlong),
                ("eps", ctypes.c_float), ("scale", ctypes.c_float),
                *[(name, ctypes.c_int) for name in ("heads", "kv_heads", "hd", "ffn")]]


class _Chain(ctypes.Structure):
    _fields_ = [("out", _Matrix), *[(name, _ptr) for name in ("norm", "embed", "ids", "cos", "sin")],
                ("eps", ctypes.c_float), ("width", ctypes.c_int), ("embed_rows", ctypes.c_int)]


class _Sampler(ctypes.Structure):
    _fields_ = [("temperature", ctypes.c_float), ("stop_below", ctypes.c_float), ("uniforms", _ptr),
                ("top_k", ctypes.c_int), ("nucleus", ctypes.c_int), ("floor", ctypes.c_float),
                ("penalty", ctypes.c_float), ("seen", _ptr)]


class _Head(ctypes.Structure):
    _fields_ = [("fuse", _Matrix), ("fc", _Matrix), ("layer", _Layer), ("chain", _Chain)]


class _Tree(ctypes.Structure):
    _fields_ = [(name, _ptr) for name in ("cos", "sin", "prefix", "extra", "slots")]


class TreeRows:
    """A token tree's rows for `StackLayers.run`: each row's rotary entries, gathered from the tables at its
    position, and the keys it sees (`native.Seen`: the prefix, then its ancestors and itself)."""

    def __init__(self, cos_table: torch.Tensor, sin_table: torch.Tensor, positions: torch.Tensor, seen: native.Seen):
        self.cos, self.sin = cos_table[positions].contiguous(), sin_table[positions].contiguous()
        self.seen = seen  # kept alive for the pointers below
        self.struct = _Tree(cos=self.cos.data_ptr(), sin=self.sin.data_ptr(), prefix=seen.prefix.data_ptr(),
                            extra=seen.extra.data_ptr(), slots=seen.slots.data_ptr())


class _Decoder(ctypes.Structure):
    _fields_ = [("layers", ctypes.POINTER(_Layer)), ("count", ctypes.c_int), ("chain", _Chain)]


@functools.cache
def _rounds(kernel: native.Kernel) -> tuple:
    """The library's head_draft, decoder_draft and head_tree_step, their arguments declared once per build."""
    head, decoder, tree = kernel.library.head_draft, kernel.library.decoder_draft, kernel.library.head_tree_step
    tree.argtypes = [ctypes.POINTER(_Head), _ptr, _ptr, ctypes.c_int, ctypes.c_longlong, ctypes.c_int,
                     ctypes.POINTER(_Tree), _ptr, _ptr]
    tree.restype = ctypes.c_int
    sampler = ctypes.POINTER(_Sampler)
    head.argtypes = [ctypes.POINTER(_Head), _ptr, _ptr, ctypes.c_int, ctypes.c_longlong, ctypes.c_int, sampler, _ptr,
                     _ptr]
    decoder.argtypes = [ctypes.POINTER(_Decoder), _ptr, ctypes.c_int, ctypes.c_longlong, ctypes.c_int, sampler, _ptr,
                        _ptr]
    head.restype = decoder.restype = ctypes.c_int
    return head, decoder, tree


def _matrix(product: native.Product) -> _Matrix:
    threads = native.product_threads() if product._work >= native.SPLIT_WORK else 1  # as `Product.__call__`
    bias = None if product.bias is None else product.bias.data_ptr()
    return _Matrix(product._w, bias, product.n, product.k, product.count, product._kind, threads,
                   product._narrow, product._narrow_kind, product.few)


def _packed(weight: torch.Tensor, kernel: native.Kernel, bias: torch.Tensor | None = None) -> native.Product:
    """The weight's packed panels (with the bias inside), the very ones `specui.products.linear` computes with
    (prepared once)."""
    return _prepared([weight], [bias], how="native", kernel=kernel)[0]


def _float32(t: torch.Tensor) -> torch.Tensor:
    return t.detach().float().contiguous()


def picks(sampling: Sampling) -> bool:
    """Whether a native round picks tokens the way `sampling` does (greedy, or sampled with any temperature, top-k
    and top-p): unless SPECUI_NATIVE_ROUNDS=0, which keeps every round in the Python steps (`tools.native_ab`
    races the two)."""
    return os.environ.get("SPECUI_NATIVE_ROUNDS", "").strip() != "0"


def nucleus(kernel: native.Kernel, scores: torch.Tensor, sampling: Sampling) -> torch.Tensor:
    """float32 scores [n] (already divided by the temperature) with `sampling`'s top-k and top-p applied by the native
    rounds' own code (`rownucleus`): the removed ones at -inf."""
    out, scratch = scores.float().contiguous().clone(), torch.empty(2 * scores.numel(), dtype=torch.int32)
    s = _sampler(sampling, 0.0, None)
    _rownucleus(kernel)(out.data_ptr(), out.numel(), s.top_k, s.nucleus, s.floor, scratch.data_ptr())
    return out


@functools.cache
def _rownucleus(kernel: native.Kernel):
    """The library's rownucleus, its arguments declared once per build."""
    call = kernel.library.rownucleus
    call.argtypes, call.restype = [_ptr, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_float, _ptr], None
    return call


def uniforms(sampling: Sampling, k: int, generator: torch.Generator) -> torch.Tensor | None:
    """A sampled round's draws, one uniform a step (float64), taken from the drafter's generator before drafting;
    None when greedy."""
    return None if sampling.greedy else torch.rand(k, dtype=torch.float64, generator=generator, device=generator.device)


def _sampler(sampling: Sampling, stop_below: float, draws: torch.Tensor | None,
             seen: torch.Tensor | None = None) -> _Sampler:
    """seen: None, or the ids the round's first step has seen (a bool mask over the target's ids, `seen_mask`),
    penalised by sampling's repetition penalty; each drafted token is marked in it as the chain goes on."""
    # the top-p floor rounded to float as torch rounds the scalar `logits_to_probs` compares its running sums with
    return _Sampler(sampling.temperature, stop_below, None if draws is None else draws.data_ptr(), sampling.top_k,
                    int(sampling.top_p < 1.0), 1.0 - sampling.top_p, sampling.repetition_penalty,
                    None if seen is None else seen.data_ptr())


def _run(call, *args) -> int:
    drafted = call(*args)
    if drafted < 0:
        raise MemoryError("a native drafting round ran out of memory")
    return drafted


class HeadChain:
    """An EAGLE head's rounds (`head_draft`); built per drafter run."""

    @staticmethod
    def serves(head) -> bool:
        """Whether the head's rounds can run natively: float32 on the CPU, its target's embeddings float32 and
        contiguous, and a head size the native attention computes."""
        kernel, embed = native.kernel(), head._embed.weight
        return (kernel is not None and head.fc.weight.device.type == "cpu" and head.fc.weight.dtype == torch.float32
                and embed.dtype == torch.float32 and embed.is_contiguous() and kernel.attends(head.layer.head_dim))

    def __init__(self, head, kernel: native.Kernel):
        layer, self.head = head.layer, head
        self._call, _, self._tree = _rounds(kernel)
        packed = {name: _packed(w, kernel) for name, w in (
            ("fuse", head.fuse.weight), ("fc", head.fc.weight), ("qkv", layer.qkv.weight), ("o", layer.o.weight),
            ("gate_up", layer.gate_up.weight), ("down", layer.down.weight), ("out", head.output._rows))}
        self.kept = [*packed.values(), *(_float32(t) for t in (layer.norm1, layer.norm2, head.norm)),
                     head.output.token_ids.to(torch.int64).contiguous(), head._embed.weight.detach()]
        norm1, norm2, norm, ids, embed = self.kept[len(packed):]
        self.vocab = packed["out"].n
        self.struct = _Head(
            fuse=_matrix(packed["fuse"]), fc=_matrix(packed["fc"]),
            layer=_Layer(qkv=_matrix(packed["qkv"]), o=_matrix(packed["o"]), gate_up=_matrix(packed["gate_up"]),
                         down=_matrix(packed["down"]), norm1=norm1.data_ptr(), norm2=norm2.data_ptr(), eps=layer.eps,
                         scale=layer.head_dim ** -0.5, heads=layer.heads, kv_heads=layer.heads, hd=layer.head_dim,
                         ffn=layer.down.weight.shape[1]),
            chain=_Chain(out=_matrix(packed["out"]), norm=norm.data_ptr(), embed=embed.data_ptr(), ids=ids.data_ptr(),
                         eps=head.eps, width=head.fc.weight.shape[0], embed_rows=embed.shape[0]))

    def run(self, states: torch.Tensor, follow: torch.Tensor, position: int, k: int, stop_below: float,
            cache, sampling: Sampling = GREEDY, draws: torch.Tensor | None = None,
            seen: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """One round (greedy, or sampled by `draws`, k uniforms): the target's fused-layer states [m, F] not yet
        fed, with the tokens after them [m], go into the head's cache (keys [heads, hd, capacity], values [heads,
        capacity, hd]) at slots position.., then up to k tokens are drafted (step i > 0 writes slot position + m +
        i - 1; the capacity must hold position + m + k - 1). Returns (rows of the head's vocabulary [n], the
        distributions they came from [n, vocabulary]), 1 <= n <= k."""
        keys, values = cache
        rows = states.shape[0]
        cos, sin = self.head.layer._angles(position + rows + k, states.device)
        states, follow = _float32(states), follow.to(torch.int64).contiguous()
        index, probs = torch.empty(k, dtype=torch.int64), torch.empty(k, self.vocab)
        s = self.struct
        s.layer.keys, s.layer.values, s.layer.cap = keys.data_ptr(), values.data_ptr(), keys.shape[2]
        s.chain.cos, s.chain.sin = cos.data_ptr(), sin.data_ptr()
        drafted = _run(self._call, ctypes.byref(s), states.data_ptr(), follow.data_ptr(), rows, position,
                       k, ctypes.byref(_sampler(sampling, stop_below, draws, seen)), index.data_ptr(), probs.data_ptr())
        return index[:drafted], probs[:drafted]


    def tree_step(self, inputs: torch.Tensor, tokens: torch.Tensor, position: int, cache,
                  tree: tuple[torch.Tensor, native.Seen] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """One step of a token tree (`head_tree_step`) over the head's cache at slots position..: without `tree`, the
        target's fused-layer states [m, F] not yet fed with the tokens after them (-> every row's state [m, D] and
        the last row's logits [1, vocabulary]); with tree = (each row's position [m], the keys each sees), the
        parents' states [m, D] with the rows' tokens (-> states [m, D], logits [m, vocabulary])."""
        keys, values = cache
        rows = inputs.shape[0]
        cos, sin = self.head.layer._angles(position + rows, inputs.device)
        s = self.struct
        s.layer.keys, s.layer.values, s.layer.cap = keys.data_ptr(), values.data_ptr(), keys.shape[2]
        s.chain.cos, s.chain.sin = cos.data_ptr(), sin.data_ptr()
        rows_of = None
        if tree is not None:
            positions, seen = tree
            rows_of = TreeRows(cos, sin, positions, seen)
        inputs, tokens = _float32(inputs), tokens.to(torch.int64).contiguous()
        h, logits = torch.empty(rows, s.chain.width), torch.empty(rows if tree is not None else 1, self.vocab)
        if self._tree(ctypes.byref(s), inputs.data_ptr(), tokens.data_ptr(), rows, position, int(tree is None),
                      None if rows_of is None else ctypes.byref(rows_of.struct), h.data_ptr(), logits.data_ptr()):
            raise MemoryError("a native tree step ran out of memory")
        return h, logits


class StackLayers:
    """A lean `DecoderStack`'s layers as native_head.c's `decoder_t` (the same packed matrices, norms and KV cache):
    `run` computes a range of them on a block of rows in one native call (`stack_layers`), which is how the lean
    forward runs them on a CPU, and `DecoderChain` drafts with the same structs. Built with the stack."""

    @staticmethod
    def serves(stack) -> bool:
        """Whether the stack's layers can run natively: float32 weights whose products all take the native kernels,
        native attention and a rotary table."""
        if getattr(stack, "native", None) is None or not getattr(stack, "rope_table", False):
            return False
        return all(p.native is not None for p in _products(stack)) and \
            stack.embed.weight.dtype == torch.float32 and stack.embed.weight.is_contiguous()

    @staticmethod
    def forwards(stack) -> bool:
        """Whether the lean forward runs its layers natively too: where every product is a large matrix
        (`RowLinear.large`), a model whose weights are read from memory (SmolLM2, the chat draft), the Python steps'
        calls being a tenth of a forward. A small model's matrices take the native kernels only on CPUs whose GEMM
        rows depend on the row count (MKL's elsewhere), so its forward would run natively on some CPUs and not
        others; it keeps the Python steps on all of them (docs/forward.md: the stdlib pair, measured both ways)."""
        return StackLayers.serves(stack) and all(p.large for p in _products(stack))

    def __init__(self, stack, kernel: native.Kernel, ids: torch.Tensor | None = None):
        """ids: the target's id of each output row of a draft restricted to a vocabulary (None: the row's own)."""
        self._call = _layers(kernel)
        self.layers = (_Layer * len(stack.params))()
        self.kept, self._bound = [], None  # _bound: the cache and rotary table the structs point at
        for i, ((norm1, eps), qkv, o, (norm2, _), gate_up, down, scaling) in enumerate(stack.params):
            norm1, norm2 = _float32(norm1), _float32(norm2)  # the same tensors where they are float32 and dense
            self.kept += [norm1, norm2]
            self.layers[i] = _Layer(qkv=_matrix(qkv.matrix), o=_matrix(o.matrix), gate_up=_matrix(gate_up.matrix),
                                    down=_matrix(down.matrix), norm1=norm1.data_ptr(), norm2=norm2.data_ptr(), eps=eps,
                                    scale=scaling, heads=stack.kv_heads * stack.groups, kv_heads=stack.kv_heads,
                                    hd=stack.head_dim, ffn=down.matrix.k)
        self.ids = None if ids is None else ids.to(torch.int64).contiguous()
        embed, norm, self.vocab = stack.embed.weight.detach(), _float32(stack.norm.weight), stack.head.matrix.n
        self.kept += [embed, norm]
        self.struct = _Decoder(layers=self.layers, count=len(stack.params), chain=_Chain(
            out=_matrix(stack.head.matrix), norm=norm.data_ptr(), embed=embed.data_ptr(),
            ids=None if self.ids is None else self.ids.data_ptr(), eps=stack.norm.variance_epsilon,
            width=embed.shape[1], embed_rows=embed.shape[0]))

    def bind(self, stack, cache) -> None:
        """Point the structs at the cache's buffers and the stack's rotary table (both grow by reallocating)."""
        if self._bound != (cache.keys.data_ptr(), stack.cos_table.data_ptr()):
            cap = cache.keys.shape[3]
            for i in range(len(self.layers)):
                self.layers[i].keys, self.layers[i].values = cache.keys[i].data_ptr(), cache.values[i].data_ptr()
                self.layers[i].cap = cap
            self.struct.chain.cos, self.struct.chain.sin = stack.cos_table.data_ptr(), stack.sin_table.data_ptr()
            self._bound = (cache.keys.data_ptr(), stack.cos_table.data_ptr())

    def run(self, x: torch.Tensor, position: int, start: int, stop: int, tree: TreeRows | None = None) -> None:
        """Layers start..stop-1 on x [rows, width] (float32, contiguous) in place, at cache slots position.. (the
        rotary table and the cache must hold them and be bound: `bind`); tree: the rows are a token tree's, all
        of it (else a chain's, at positions position..)."""
        if self._call(ctypes.byref(self.struct), start, stop, x.data_ptr(), x.shape[0], position,
                      None if tree is None else ctypes.byref(tree.struct)):
            raise MemoryError(f"native layers: no memory for {x.shape[0]} rows")


def _products(stack) -> list:
    """A stack's `RowLinear`s: each layer's four and the output layer."""
    return [*(p for params in stack.params for p in (params[1], params[2], params[4], params[5])), stack.head]


@functools.cache
def _layers(kernel: native.Kernel):
    """The library's stack_layers, its arguments declared once per build."""
    call = kernel.library.stack_layers
    call.argtypes = [ctypes.POINTER(_Decoder), ctypes.c_int, ctypes.c_int, _ptr, ctypes.c_int, ctypes.c_longlong,
                     ctypes.POINTER(_Tree)]
    call.restype = ctypes.c_int
    return call


def swiglu(kernel: native.Kernel, gu: torch.Tensor) -> torch.Tensor:
    """SiLU(gate) * up of float32 rows gu = [gate | up] [rows, 2 * ffn] -> [rows, ffn], by `rowswiglu`: the bits
    `stack_layers` computes (torch's F.silu rounds otherwise)."""
    gu = gu.contiguous()
    rows, ffn = gu.shape[0], gu.shape[1] // 2
    out = torch.empty(rows, ffn)
    _swiglu(kernel)(gu.data_ptr(), rows, ffn, out.data_ptr())
    return out


@functools.cache
def _swiglu(kernel: native.Kernel):
    call = kernel.library.rowswiglu
    call.argtypes, call.restype = [_ptr, ctypes.c_int, ctypes.c_int, _ptr], None
    return call


class DecoderChain:
    """A draft model's rounds (`decoder_draft`) over its lean forward's cache and native layers (`StackLayers`);
    built per drafter run."""

    @staticmethod
    def serves(lm) -> bool:
        """Whether a `CachedLM`'s draft steps can run natively: the lean forward with native layers."""
        return lm.stack is not None and lm.log is None and getattr(lm.stack, "native_layers", None) is not None

    def __init__(self, lm, kernel: native.Kernel):
        self.lm, self.layers = lm, lm.stack.native_layers
        self._call = _rounds(kernel)[1]
        self.vocab = self.layers.vocab

    def run(self, tokens: list[int], k: int, stop_below: float, sampling: Sampling = GREEDY,
            draws: torch.Tensor | None = None, seen: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """One round (greedy, or sampled by `draws`, k uniforms): the context's tokens the draft has not read (ids it
        can embed), after those its cache holds, then up to k tokens from its logits at the last of them: (rows of
        its output [n], the distributions they came from [n, rows]), 1 <= n <= k. Its cache then holds the tokens
        read and n - 1 drafted ones (the last is fed only if the target accepts it, as in the Python steps)."""
        lm, stack = self.lm, self.lm.stack
        position, rows = lm.length, len(tokens)
        lm._stack_cache()
        lm.tree = None
        cache = lm.cache
        cache.reserve(position + rows + k)
        ids = torch.tensor(tokens, dtype=torch.int64)
        stack._rotary(ids.float(), position, position + rows + k)  # the rotary table, grown to hold these positions
        self.layers.bind(stack, cache)
        s = self.layers.struct
        index, probs = torch.empty(k, dtype=torch.int64), torch.empty(k, self.vocab)
        drafted = _run(self._call, ctypes.byref(s), ids.data_ptr(), rows, position, k,
                       ctypes.byref(_sampler(sampling, stop_below, draws, seen)), index.data_ptr(), probs.data_ptr())
        lm.length = cache.length = position + rows + drafted - 1
        return index[:drafted], probs[:drafted]
