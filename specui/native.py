"""specui's native CPU kernels (specui/native*.c) for the lean forward, through ctypes.

- `Kernel.product(W, b)`: y = x W^T + b for the few rows of a decode or verify forward, every output one
  fused multiply-add chain over the inner dimension in order, so a row's bits never depend on how many
  rows come with it, on threads, or on AVX2 versus AVX-512; each weight is read from memory once for all
  the rows, so an 8-row verify costs little more than a one-row forward (the memory-bound case). A weight
  whose every value is exactly a bfloat16 (or float16) value, as in a model saved in half precision and
  loaded as float32, is packed in that type and widened in registers: half the bytes, the same bits; one
  whose every value is exactly GGUF's Q4_1 or Q8_0 blocks (a GGUF model dequantized) as those blocks
  (`specui.blocks`): 6 or 9 bits a weight instead of 32, each weight rebuilt exactly, the same bits.
- `Kernel.attend(q, keys, values, seen, scale)`: attention over a float32 KV cache, each row's bits a
  function of the sequence of keys it sees (`Seen`), so a token tree's rows equal the chain's.
- `Kernel.argmax(logits)`: torch.argmax's answer, bit for bit, vectorised.
- `Kernel.rms_norm(x, weight, eps)`: RMSNorm of rows, one summation order per row (batch-invariant).
- `Kernel.rope(...)`: rotary embeddings of q and k and the cache writes of a layer, the torch ops' bits.
- Product threads (native_pool.c): a product of at least SPLIT_WORK multiply-adds a row (in all, for a block
  of BLOCK_SPLIT_ROWS rows or more: a prompt, whose small products then split too) is split over
  `product_threads()` threads (2 where the process may use two cores; SPECUI_PRODUCT_THREADS=N sets it, 1
  never splits), this one and native workers that wait for the next share: a one-token forward of SmolLM2
  reads its weights 1.65 times as fast on two cores of a 2-vCPU VM. They give way: where the splits of the
  last 0.1 s cost more than they saved (another program, say a browser on the same two cores, took a
  worker's core mid-share), products run alone for a while; and a product of under 4 MiB of weights (GGUF
  blocks at their float32 size; times the rows in a block of 16 rows or more) does not wake workers that went
  to sleep. The bits are the unsplit product's. Independent of torch's threads.

The library is compiled once per machine (`specui.native_build`: about 10 s on 2 cores, as a preset loads).
With no compiler, no x86 CPU with AVX2 and FMA, or a failed build, `kernel()` returns None and the lean
forward keeps MKL's products and torch's attention (also row-invariant, slower for a few rows); the reason
is logged once.

    SPECUI_NATIVE=0        never use it
    SPECUI_NATIVE=avx2     use the AVX2 build even where AVX-512 is available (tests compare the two)
    SPECUI_PRODUCT_THREADS=N   split large products over N threads (default: 2 where two cores are usable;
                               1: never split)
    SPECUI_BLOCK_PANELS=0  keep GGUF-block weights in float32 panels (to compare: the same bits, more bytes)
"""

from __future__ import annotations

import ctypes
import functools
import logging
import os
import subprocess
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

import torch

from specui import blocks, int8, native_build
from specui.blocks import half_kind
from specui.native_build import FLAGS
from specui.native_product import (  # noqa: F401 (the names callers and tests read here)
    _KINDS, ALL_ROWS, BLOCK_ROWS, BLOCK_SPLIT_ROWS, SPLIT_WORK, Product, _threads_for, product_threads)

HALF_PANELS = True  # half-precision-valued weights packed at half width (False: float32 panels, to compare)
BLOCK_PANELS = os.environ.get("SPECUI_BLOCK_PANELS", "").strip().lower() not in ("0", "off", "no", "false")
log = logging.getLogger(__name__)
_lock = threading.Lock()
_kernels: dict[str, Kernel | None] = {}
_workers: list[ThreadPoolExecutor] = []
ATTEND_ROWS = 128  # rows per native attention call in a long block (a prompt): the scratch holds rows x keys
PARALLEL_WORK = 1 << 20  # multiply-adds below which one thread is faster than handing out shares (attention)
_ptr = ctypes.c_void_p
_int = ctypes.c_int


def _bound(function, argtypes: list, restype=None):
    """A function of the native library with its argument and result types set."""
    function.argtypes, function.restype = argtypes, restype
    return function


class Kernel:
    """One build of native.c: `product(W, b)` packs a weight once and returns the x -> x W^T + b it
    computes for any number of rows; `attend` and `argmax` as the module docstring says."""

    def __init__(self, library: ctypes.CDLL, isa: str):
        self.isa = isa
        self.library = library  # for kernels bound where they are used (`specui.native_chain`)
        self.width = library.rowgemm_panel_width()  # NR: output columns per panel
        self.rowgemm = _bound(library.rowgemm, [_ptr, _int, _int, _ptr, _int, _int, _ptr, _ptr, _int, _int, _int, _int])
        # rowgemm's arguments, then the threads to use
        self.rowgemm_split = _bound(library.rowgemm_split, [*self.rowgemm.argtypes, _int], _int)
        # (alone, took, at) seconds -> rest until (see native_pool.c)
        self.pool_account = _bound(library.pool_account, [ctypes.c_double] * 3, ctypes.c_double)
        self._pool_state = _bound(library.pool_state, [_ptr, _int, _int])
        self._pool_yield = _bound(library.pool_yield, [ctypes.c_double], ctypes.c_double) \
            if hasattr(library, "pool_yield") else None  # (absent from builds of older sources: `tools.build_ab`)
        self._argmax = _bound(library.rowargmax, [_ptr, _int, _int, _int, _ptr])
        # (absent from builds of older sources, which `tools.build_ab` loads: `sorted_values` then says None)
        has_sort = hasattr(library, "rowsort")
        self._sort = _bound(library.rowsort, [_ptr, _int, _int, _int, _ptr, _ptr], _int) if has_sort else None
        self.has_draw = hasattr(library, "rowdraw")
        self._draw = _bound(library.rowdraw, [_ptr, _int, ctypes.c_double, _ptr], ctypes.c_long) \
            if self.has_draw else None
        self._attend = _bound(library.rowattend, [_ptr, _int, _int, _int, _int, _int, _ptr, _ptr, ctypes.c_longlong,
                                                  _ptr, _ptr, _ptr, ctypes.c_float, _ptr, _ptr, _int], _int)
        self.attends = library.rowattend_supports  # head size -> whether `attend` computes it
        library.blockfind.restype = _int  # called by `specui.blocks.find`
        self._rms_norm = _bound(library.rowrmsnorm, [_ptr, _int, _int, _int, _ptr, ctypes.c_float, _ptr])
        self._rope = _bound(library.rowrope, [_ptr, _int, _int, _int, _int, _int, _int, _ptr, _ptr, _int, _ptr, _ptr,
                                              _ptr, ctypes.c_longlong, ctypes.c_longlong])

    def product(self, weight: torch.Tensor, bias: torch.Tensor | None = None, *, half: bool | None = None) -> Product:
        """weight [n, k] float32 (and bias [n]) packed into panels [ceil(n / NR), k, NR], the bias zero-padded to
        whole panels. half (default: `HALF_PANELS`): where every row is exactly integers in [-127, 127] times a power
        of two (`specui.int8`), the panels hold the integers (int8) and the scales follow them; else, where every
        weight is exactly a bfloat16 (else a float16) value, the panels hold that type: a quarter or half the bytes
        to read, the same products bit for bit. Weights that are exactly GGUF blocks are also packed as such
        (`specui.blocks`, unless BLOCK_PANELS is off), for `BLOCK_ROWS` rows (ALL_ROWS: as blocks alone)."""
        n, k = weight.shape
        padded = -(-n // self.width) * self.width
        narrow = HALF_PANELS if half is None else half
        scales = int8.exact_scales(weight) if narrow else None
        found = blocks.find(weight, self.library) if narrow and scales is None and BLOCK_PANELS else None
        bias = None if bias is None else torch.nn.functional.pad(bias.detach().float(), (0, padded - n)).contiguous()
        few = found and (blocks.panels(found, self.width), found.kind)
        if found and BLOCK_ROWS.get(self.isa, 1) >= ALL_ROWS:  # every row reads the blocks: no float32 panels
            return Product(self, None, n, bias, few=few, k=k)
        full = weight.new_zeros(padded, k)
        full[:n] = weight if scales is None else weight / scales[:, None]  # the integers: exact, powers of two
        panels = full.view(padded // self.width, self.width, k).transpose(1, 2).contiguous()
        if scales is not None:  # int8 panels, then one float32 scale per output column (native.c's I8)
            column_scales = torch.cat([scales, scales.new_ones(padded - n)])
            packed = torch.cat([panels.to(torch.int8).flatten().view(torch.uint8), column_scales.view(torch.uint8)])
            panels = packed[:panels.numel()].view(torch.int8).view(panels.shape)
        elif narrow and not found and (kind := half_kind(weight)) is not None:  # blocks: rarely halves too
            panels = panels.to(kind)
        return Product(self, panels, n, bias, few=few)

    def pool_state(self, give_way: bool | None = None, clear: bool = False) -> dict[str, int]:
        """The product threads' counts (splits, products computed alone while resting, rests, products too
        small to wake sleeping workers, computed alone); turns giving way (resting after splits that cost more
        than they saved) on or off; clears the counts and any rest."""
        out = (ctypes.c_long * 4)()
        self._pool_state(out, -1 if give_way is None else int(give_way), int(clear))
        return dict(zip(("splits", "alone_resting", "rests", "alone_asleep"), out))

    def pool_yield(self, seconds: float | None = None) -> float:
        """How long an idle product thread yields its core before it sleeps (seconds, native_pool.c's
        YIELD_SECONDS), set to `seconds` where given; returns the setting before."""
        if self._pool_yield is None:
            raise RuntimeError("this build of the native kernels has no pool_yield")
        return self._pool_yield(-1.0 if seconds is None else float(seconds))

    def argmax(self, logits: torch.Tensor) -> torch.Tensor:
        """`logits.argmax(-1)` for float32 logits [V] or [rows, V] on the CPU: the first of equal
        maxima, the first NaN if there is one; int64. Other tensors go to torch.argmax."""
        if logits.dtype != torch.float32 or logits.device.type != "cpu" or logits.dim() > 2 or logits.stride(-1) != 1:
            return logits.argmax(-1)
        shape = logits.shape  # one row: a 0-d result written in place (an index of a [1] result costs a call more)
        out = torch.empty(shape[:-1], dtype=torch.int64)
        self._argmax(logits.data_ptr(), shape[0] if len(shape) == 2 else 1, shape[-1], logits.stride(0), out.data_ptr())
        return out

    def draw(self, probs: torch.Tensor, u: float) -> int | None:
        """The token `specui.sampling.sample` draws from float32 probabilities [V] (CPU, contiguous) with the uniform
        u: the first whose running sum in float64 exceeds u times the total, the zeros skipped (30 us over a top-p
        row of SmolLM2's vocabulary where torch's running sum and searches took 150). None where the total is not
        positive and finite, or the build has no draw."""
        scratch = torch.empty(probs.shape[-1], dtype=torch.int32)
        token = -1 if self._draw is None else self._draw(probs.data_ptr(), probs.shape[-1], u, scratch.data_ptr())
        return None if token < 0 else token

    def sorted_values(self, x: torch.Tensor) -> torch.Tensor | None:
        """float32 rows x [n] or [rows, n] on the CPU (last dimension contiguous) sorted ascending: np.sort's values,
        by a radix sort of their bits (0.25 ms over SmolLM2's 49,152 scores where np.sort took 1 ms on an AMD EPYC);
        None where a row holds a NaN (or the build has no sort)."""
        rows = x.view(1, -1) if x.dim() == 1 else x
        out, scratch = torch.empty(rows.shape), torch.empty(2 * rows.shape[1], dtype=torch.int32)
        if self._sort is None or self._sort(rows.data_ptr(), rows.shape[0], rows.shape[1], rows.stride(0),
                                            out.data_ptr(), scratch.data_ptr()):
            return None
        return out.view(x.shape)

    @staticmethod
    def norms(x: torch.Tensor, weight: torch.Tensor) -> bool:
        """Whether `rms_norm` computes rows x with this weight: float32 on the CPU, x [n] or [rows, n] with its
        last dimension contiguous, the weight contiguous."""
        return (x.dtype == weight.dtype == torch.float32 and x.device.type == "cpu" and x.dim() in (1, 2)
                and x.stride(-1) == 1 and weight.is_contiguous())

    def rms_norm(self, x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
        """transformers' RMSNorm of float32 rows x [rows, n] or [n] (row stride free, last dim contiguous: see
        `norms`) with a float32 weight [n]: each row's bits its own (one summation order), equal to torch's to
        rounding."""
        rows = x.view(1, -1) if x.dim() == 1 else x
        out = torch.empty(rows.shape)
        self._rms_norm(rows.data_ptr(), rows.shape[0], rows.shape[1], rows.stride(0), weight.data_ptr(), eps,
                       out.data_ptr())
        return out.view(x.shape)

    def rope(self, qkv: torch.Tensor, n: int, heads: int, kv_heads: int, cos: torch.Tensor, sin: torch.Tensor,
             keys: torch.Tensor, values: torch.Tensor, past: int) -> torch.Tensor:
        """Rotary embeddings of q and k in float32 rows qkv [rows, (heads + 2 kv_heads) * hd] (q, k, v heads) at
        cos, sin [rows, hd] (sin's first half negated; rows may be one row expanded): returns q [rows, heads,
        hd] and writes rows 0..n-1's keys and values at slots past.. of one layer's keys [kv_heads, hd, cap]
        and values [kv_heads, cap, hd] (contiguous). The bits of the torch ops `DecoderStack._run` uses."""
        rows, hd = qkv.shape[0], keys.shape[1]
        if qkv.stride(-1) != 1 or cos.stride(-1) != 1 or sin.stride(-1) != 1 or cos.stride(0) != sin.stride(0):
            raise ValueError("rope needs rows with a contiguous last dimension, cos and sin alike")
        q = torch.empty(rows, heads, hd)
        self._rope(qkv.data_ptr(), rows, n, qkv.stride(0), heads, kv_heads, hd, cos.data_ptr(), sin.data_ptr(),
                   cos.stride(0), q.data_ptr(), keys.data_ptr(), values.data_ptr(), keys.shape[2], past)
        return q

    def attend(self, q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, seen: Seen,
               scale: float) -> torch.Tensor:
        """Attention of q [rows, heads, hd] (float32, heads hd apart) over one layer's keys [kv_heads, hd,
        capacity] and values [kv_heads, capacity, hd] (contiguous; capacity a multiple of 16) -> [rows,
        heads * hd]. Each row sees the keys `seen` names; its bits depend only on the sequence of those
        keys (not their slots, the row count or the build), so a token tree's row equals the chain's.
        A long block of rows that see a prefix each (a prompt) runs in calls of ATTEND_ROWS rows, which bounds
        the scratch (rows x keys scores), shared over torch's thread count: the same bits, row by row."""
        rows, heads, hd = q.shape
        if q.stride(2) != 1 or q.stride(1) != hd or q.dtype != torch.float32:
            raise ValueError("q must be float32 rows of heads, each head contiguous")
        out = torch.empty(rows, heads * hd)
        if rows <= ATTEND_ROWS or seen.extra is not None:
            self._attend_rows(q, keys, values, seen, scale, out, 0, rows)
            return out
        blocks = [(start, min(start + ATTEND_ROWS, rows)) for start in range(0, rows, ATTEND_ROWS)]
        threads = min(torch.get_num_threads(), len(blocks))
        # every thread-th block to each thread: rows late in a prompt see more keys, so the shares interleave
        _share([functools.partial(self._attend_blocks, blocks[i::threads], q, keys, values, seen, scale, out)
                for i in range(threads)])
        return out

    def _attend_blocks(self, blocks, q, keys, values, seen, scale, out) -> None:
        for start, stop in blocks:
            self._attend_rows(q, keys, values, seen, scale, out, start, stop)

    def _attend_rows(self, q, keys, values, seen: Seen, scale: float, out, start: int, stop: int) -> None:
        """Rows start..stop-1 of `attend` (all of them when `seen` has extra keys), into out."""
        heads, hd = q.shape[1], q.shape[2]
        kv_heads, capacity = keys.shape[0], keys.shape[2]
        rows, whole = stop - start, start == 0 and stop == q.shape[0]
        longest = seen.longest if whole else int(seen.prefix[start:stop].max())
        stride = -(-longest // 16) * 16 + 48  # a query's scores, padding and its sum (see native.c)
        scratch = torch.empty((rows * (heads // kv_heads) + 8 + 16) * stride)
        failed = self._attend(q[start].data_ptr(), rows, q.stride(0), heads, kv_heads, hd, keys.data_ptr(),
                              values.data_ptr(), capacity, seen.prefix[start].data_ptr(),
                              None if seen.extra is None else seen.extra.data_ptr(),
                              None if seen.slots is None else seen.slots.data_ptr(), scale, out[start].data_ptr(),
                              scratch.data_ptr(), stride)
        if failed:
            raise MemoryError(f"native attention: no memory for {rows} rows")


class Seen(NamedTuple):
    """Which cached keys each query row sees: prefix[r] (int32) keys from slot 0, then extra[r] more at
    the next entries of slots (int32, increasing per row; None: no extra keys); longest: the most keys
    a row sees."""

    prefix: torch.Tensor
    extra: torch.Tensor | None
    slots: torch.Tensor | None
    longest: int


def tree_seen(visible: torch.Tensor) -> Seen:
    """The `Seen` of token-tree rows from `visible` [n, width] (bool: row r sees key slot j): the prefix every
    row sees, then each row's own further slots (its ancestors and itself)."""
    n, width = visible.shape
    unseen = visible.all(0).logical_not().nonzero()
    base = int(unseen[0]) if len(unseen) else width  # the first slot some row does not see
    tail = visible[:, base:].cpu()
    return Seen(torch.full((n,), base, dtype=torch.int32), tail.sum(1, dtype=torch.int32),
                (tail.nonzero()[:, 1] + base).to(torch.int32), width)


def _share(calls: list) -> None:
    """Run calls[0] on this thread and the rest on specui's pool at the same time (ctypes lets go of the GIL
    during each native call), then wait for all of them."""
    shares = [_pool(len(calls) - 1).submit(call) for call in calls[1:]]
    calls[0]()
    for share in shares:
        share.result()


def _pool(workers: int) -> ThreadPoolExecutor:
    """A pool of at least `workers` threads, kept for the process (grown when torch's count grows)."""
    with _lock:
        if not _workers or _workers[0]._max_workers < workers:
            if _workers:
                _workers[0].shutdown(wait=False)  # its threads end once idle
            _workers[:] = [ThreadPoolExecutor(max_workers=workers, thread_name_prefix="specui-native")]
        return _workers[0]


def kernel(isa: str | None = None) -> Kernel | None:
    """The build for this CPU (or for `isa`), compiled on first use; None where it cannot run here."""
    isa = isa or _chosen_isa()
    if isa is None or isa in _kernels:  # none here, or built (or refused) already: no lock needed to read it
        return _kernels.get(isa)
    with _lock:
        if isa not in _kernels:
            _kernels[isa] = _load(isa)
        return _kernels[isa]


def _chosen_isa() -> str | None:
    """The build `kernel()` uses: $SPECUI_NATIVE's, else this CPU's best; None when turned off or none runs here."""
    wanted = os.environ.get("SPECUI_NATIVE", "").strip().lower()
    return None if wanted in ("0", "off", "no", "false") else wanted if wanted in FLAGS else best_isa()


def needs_compiling() -> bool:
    """Whether `kernel()` would compile the library now: the first time on this machine (about 10 s)."""
    isa = _chosen_isa()
    return isa is not None and isa not in _kernels and not native_build.is_built(isa)


@functools.cache
def best_isa() -> str | None:
    """'avx512' or 'avx2' as torch detected this CPU (AVX2 there implies FMA); None elsewhere."""
    capability = torch.backends.cpu.get_cpu_capability().upper()
    return "avx512" if capability.startswith("AVX512") else "avx2" if capability.startswith("AVX2") else None


def _load(isa: str) -> Kernel | None:
    try:
        return Kernel(ctypes.CDLL(str(native_build.build(isa))), isa)
    except (OSError, subprocess.SubprocessError) as error:
        reason = str(error)
        if isinstance(error, subprocess.CalledProcessError):  # the compiler's own first lines
            reason = " / ".join(error.stderr.decode(errors="replace").strip().splitlines()[:3]) or reason
        log.warning("specui: the native row-invariant products are off (%s); using MKL's instead", reason)
        return None
