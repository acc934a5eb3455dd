"""Row-invariant matrix products for the lean forward (`specui.lean`): y = x W^T + b whose rows do not
depend on how many rows are computed together.

Large float32 weights take `specui.native`'s kernels (or MKL's packed GEMM where those cannot be built);
small weights and other dtypes run as x @ W^T with W^T stored, a GEMM of at least two rows (the lean
forward runs one token as two identical rows). Each weight is prepared once, while it lives.

That a GEMM's rows do not depend on the row count is true of MKL on the Intel CPUs specui was built on,
but not everywhere (on an AMD EPYC, float32 rows of 5 differ from rows of 2 in the last bits). So it is
checked once per process (`rows_invariant`); where it fails, float32 weights of every size take the native
kernels, which are invariant by construction, and without those each row runs as its own two-row GEMM
(slow, but the bits of plain decoding's product). A draft model's products (`drafts=True`) need no invariance:
its small float32 weights take the native kernels wherever they build, so its rounds can run as one native call.

`linear` is the same machinery for the trained heads' matrices while they draft (no row invariance needed:
a head's q only sets acceptance): the native product where it can run, else F.linear.
"""

from __future__ import annotations

import functools
import logging
import os
import platform
import shutil
import weakref

import torch
import torch.nn.functional as F

from specui import native

# MKL's packed float32 GEMM (what inductor's freezing uses on x86): present in x86 PyTorch builds
_MKL_PACKED = torch.backends.mkl.is_available() and hasattr(torch.ops.mkl, "_mkl_linear")
SMALL_WEIGHT = 1 << 17  # weights of at most this many elements run as x @ W^T with W^T stored; larger ones packed
_PACK_ROWS = 16  # the row count MKL is told to expect when packing (the rows' results do not depend on it)
_prepared_cache: dict[tuple, tuple] = {}  # ids of joined weights -> (weakrefs to them, their stamp, prepared matrix)
_mkl_linear = torch.ops.mkl._mkl_linear.default if _MKL_PACKED else None
log = logging.getLogger(__name__)


class RowLinear:
    """y = x [W_1; W_2; ...]^T + b for x [n, in]: one product for several linears of the same input
    (q, k, v; gate, up), each row's bits independent of n."""

    def __init__(self, modules: list[torch.nn.Linear], *, drafts: bool = False, kernel=False):
        """drafts: the product serves a draft model, whose rows need not be invariant (its q only sets acceptance),
        so small float32 weights take the native kernels too wherever they build: with every product native, a
        draft's round runs in one native call (`specui.native_chain.DecoderChain`). kernel: `native.kernel()` where
        the caller has asked it already (a stack asks once for its 129 products), False to ask here."""
        self.sizes = [m.out_features for m in modules]
        self.parts = [(m.weight, m.bias) for m in modules]  # the model's own parameters, for `whole`
        self.out, width = sum(self.sizes), modules[0].in_features
        float32 = modules[0].weight.dtype == torch.float32
        self.large = large = float32 and self.out * width > SMALL_WEIGHT
        kernel = (native.kernel() if kernel is False else kernel) if float32 else None
        self.native = kernel if kernel is not None and (large or drafts or not rows_invariant("transposed")) else None
        self.packed = self.native is None and large and _MKL_PACKED and rows_invariant("packed")
        # no kernel and a GEMM whose rows depend on the row count: each row its own two-row product
        self.by_row = float32 and self.native is None and not self.packed and not rows_invariant("transposed")
        if self.by_row:
            slow_rows_warning()
        # large float32 weights: a `native.Product` (W in panels for native.c, the bias inside), else MKL's
        # packed copy (MKL reads only the shape of the `ghost`, a weight of no memory); small ones and other
        # dtypes: W^T stored, as a plain GEMM on it has less overhead per call (measured faster than
        # either for the stdlib target's 96-wide matrices, whose products are all overhead)
        how = "native" if self.native is not None else "packed" if self.packed else "transposed"
        self.matrix, self.bias = _prepared([m.weight for m in modules], [m.bias for m in modules], how=how,
                                           kernel=self.native)
        self.ghost = modules[0].weight.new_zeros(()).expand(self.out, width) if self.packed else None

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if self.native is not None:
            return self.matrix(x)
        if self.packed:
            return _mkl_linear(x, self.matrix, self.ghost, self.bias, x.shape[0])
        if self.by_row:
            y = torch.cat([torch.mm(x[i:i + 1].repeat(2, 1), self.matrix)[:1] for i in range(x.shape[0])])
        else:
            y = torch.mm(x, self.matrix)
        return y if self.bias is None else y.add_(self.bias)

    def whole(self, x: torch.Tensor) -> torch.Tensor:
        """The same product through F.linear on the model's own weights (MKL's GEMM over all rows at once,
        on torch's threads): faster for a prompt's many rows, but a row's bits may depend on the row count,
        so only for blocks that plain and speculative decoding compute alike (`DecoderStack.forward(prompt=)`).
        Small weights too: from 16 rows on MKL beats the few-row kernels on them as well (1.2-1.5x for the
        stdlib target's 96-wide matrices on an AMD EPYC). Small weights whose every block already takes MKL's GEMM
        (`x @ Wᵀ`, where it is row-invariant) keep it: F.linear is the same GEMM with more per call (a 128-token
        prompt of the stdlib target on an Intel Xeon: 30 ms against 25)."""
        if self.native is None and not self.large and not self.by_row:
            return self(x)
        if len(self.parts) == 1:
            return F.linear(x, *self.parts[0])
        if not self.large:  # one product over a joined copy (small: a few hundred KB)
            weights, biases = zip(*self.parts)
            return F.linear(x, *_prepared(list(weights), list(biases), how="joined"))
        return torch.cat([F.linear(x, w, b) for w, b in self.parts], dim=-1)

    def split(self, y: torch.Tensor) -> list[torch.Tensor]:
        """The output of each linear, as views of one product's output."""
        return list(y.split(self.sizes, dim=-1))


@functools.cache
def slow_rows_warning(why: str | None = None) -> None:
    """Say once per process (and reason) that rows run one by one (exact, several times slower), why, and what would
    avoid it where anything would (`rows_alone_why`)."""
    log.warning("specui: this CPU's float32 matrix products give a row other bits among more rows, so the lean "
                "forward computes each row of a verify alone: exact, but slower. %s", why or rows_alone_why())


@functools.cache
def attention_rows_warning(kernel, dtype: torch.dtype, head_dim: int) -> None:
    """`slow_rows_warning` for attention's rows computed alone, its reason (`rows_alone_why`, which reads the
    environment and searches PATH for a compiler) worked out once per case: the lean forward asks it on a verify's
    hot path, each layer."""
    slow_rows_warning(rows_alone_why(kernel=kernel, dtype=dtype, head_dim=head_dim))


def rows_alone_why(*, kernel=None, dtype: torch.dtype = torch.float32, head_dim: int | None = None) -> str:
    """Why specui's native kernels, which compute all rows at once with the same bits, do not take this product or
    attention, and what would change that, if anything: a compiler helps only where it is what is missing. `kernel`:
    the native build where there is one (`native.kernel()`); `dtype`: the model's; `head_dim`: attention's."""
    if dtype != torch.float32:
        return (f"specui's native kernels take float32 only, and this model runs in {str(dtype).removeprefix('torch.')}"
                " (float32 weights would take them).")
    if kernel is not None:
        return (f"specui's native kernels are on, but their attention does not take heads of {head_dim} dimensions; "
                "nothing to change here.")
    wanted = os.environ.get("SPECUI_NATIVE", "").strip()
    if wanted.lower() in ("0", "off", "no", "false"):
        return f"SPECUI_NATIVE={wanted} turns specui's native kernels off: unset it to compute all rows at once."
    if native.best_isa() is None:
        return "specui's native kernels need an x86 CPU with AVX2 and FMA, which this one is not."
    compiler = os.environ.get("CC") or "cc"
    if shutil.which(compiler) is None:
        return (f"specui's native kernels are built with a C compiler, and there is none on PATH ({compiler}): with "
                "one (cc, or $CC) they compute all rows at once with the same bits.")
    return "specui's native kernels did not build here (the reason was logged once: 'the native row-invariant ...')."


@functools.cache
def mkl_fast() -> bool:
    """Whether MKL's float32 GEMM takes its fast code paths on this CPU: MKL picks them by the CPU's vendor, and on
    others (an AMD EPYC) a prompt block of SmolLM2 ran 2-3x slower through it than through specui's native kernels
    (docs/forward.md)."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            return any(line.startswith("vendor_id") and "GenuineIntel" in line for line in f)
    except OSError:
        return "intel" in platform.processor().lower()


@functools.cache
def rows_invariant(how: str) -> bool:
    """Whether this machine's float32 GEMM (`how`: "transposed", torch.mm on W^T; "packed", MKL's packed
    GEMM; "batched", torch.bmm) gives every row the bits it gets in a product of two rows, for 3 to 17 rows."""
    if how == "packed" and not _MKL_PACKED:
        return False
    gen = torch.Generator().manual_seed(0)
    with torch.inference_mode():
        for k, n in ((96, 288), (576, 1536)):
            w, x = torch.randn(n, k, generator=gen), torch.randn(17, k, generator=gen)
            if how == "packed":
                packed, ghost = torch.ops.mkl._mkl_reorder_linear_weight(w, _PACK_ROWS), w.new_zeros(()).expand(n, k)
                product = lambda rows, packed=packed, ghost=ghost: _mkl_linear(rows, packed, ghost, None, rows.shape[0])
            elif how == "batched":
                heads = w.t().contiguous().view(3, k // 3, n)[:, :, : n // 3]  # three heads of [k/3, n/3]
                product = lambda rows, k=k, heads=heads: torch.bmm(rows.view(-1, 3, k // 3).transpose(0, 1),
                                                                   heads).transpose(0, 1)
            else:
                wt = w.t().contiguous()
                product = lambda rows, wt=wt: torch.mm(rows, wt)
            alone = [product(x[i:i + 1].repeat(2, 1)) for i in range(17)]
            for m in (3, 5, 9, 17):
                together = product(x[:m])
                if not all(torch.equal(together[i], alone[i][0]) for i in range(m)):
                    return False
    return True


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """F.linear(x, weight, bias); in inference mode on a CPU in float32 with the native kernels built, through
    the weight's `native.Product`, prepared once (`_prepared`): how the trained heads draft. No row-invariance
    promise is needed there (a head's q only sets acceptance); the product reads each weight once for all rows,
    half the bytes where its values are float16 values, as heads are saved. Autograd takes F.linear, and so do
    small weights (at most SMALL_WEIGHT elements, as the stdlib heads'), whose products are all per-call
    overhead: F.linear's call costs a fifth of this path's (5 against 23 us for 96 x 288, one row)."""
    if (x.device.type != "cpu" or x.dtype != torch.float32 or weight.dtype != torch.float32 or weight.dim() != 2
            or weight.numel() <= SMALL_WEIGHT or not torch.is_inference_mode_enabled()):
        return F.linear(x, weight, bias)
    kernel = native.kernel()
    if kernel is None:
        return F.linear(x, weight, bias)
    product, _ = _prepared([weight], [bias], how="native", kernel=kernel)
    return product(x.reshape(-1, x.shape[-1])).view(*x.shape[:-1], weight.shape[0])


def _prepared(weights: list[torch.Tensor], biases: list[torch.Tensor | None], *, how: str, kernel=None):
    """(matrix, bias) of the joined linears (weights [n_i, k], their biases or None) as `how` wants them (a
    `native.Product`, which holds the bias too; MKL's packed copy; W^T; or W, "joined"), made once and kept while the
    weights live, remade when a weight or bias is edited in place (its version) or replaced (`.to()`: its
    storage)."""
    params = weights + [b for b in biases if b is not None]
    key = (how, *(id(w) for w in weights))
    versions = tuple(-1 if p.is_inference() else p._version for p in params)  # inference tensors keep no count
    stamp = (how, kernel and kernel.isa, native.HALF_PANELS, native.BLOCK_PANELS, versions,
             tuple(p.data_ptr() for p in params), weights[0].dtype)
    cached = _prepared_cache.get(key)
    if cached is not None and all(r() is w for r, w in zip(cached[0], weights)) and cached[1] == stamp:
        return cached[2]
    with torch.inference_mode():
        # one weight as it is (every way below reads it, or copies it anyway): a copy first was the load's peak, the
        # chat model's output layer held three times at once while its panels were packed (+109 MB)
        joined = weights[0].detach().contiguous() if len(weights) == 1 else torch.cat([w.detach() for w in weights])
        bias = None if len(params) == len(weights) else torch.cat(
            [(b if b is not None else w.new_zeros(w.shape[0])).detach() for w, b in zip(weights, biases)])
        if how == "native":
            prepared = kernel.product(joined, bias), bias
        elif how == "packed":
            prepared = torch.ops.mkl._mkl_reorder_linear_weight(joined, _PACK_ROWS), bias
        elif how == "joined":
            prepared = joined, bias
        else:
            prepared = joined.t().contiguous(), bias
    if cached is None:
        weakref.finalize(weights[0], _prepared_cache.pop, key, None)
    _prepared_cache[key] = (tuple(weakref.ref(w) for w in weights), stamp, prepared)
    return prepared
