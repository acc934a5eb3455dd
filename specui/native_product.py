"""A weight packed for specui's native product (`specui.native.Kernel.product`): x -> x W^T + b, row by row.

`Product` holds the packed weight (float32, half-width or int8 panels, or GGUF blocks) and the pointers a call
passes, and chooses per call which panels the rows read (`BLOCK_ROWS`) and whether the product is split over the
product threads (`product_threads`, `SPLIT_WORK`, `BLOCK_SPLIT_ROWS`; native_pool.c). Each row's bits are the same
whatever the choice (see `specui.native`'s docstring). `specui.native` imports every name here.
"""

from __future__ import annotations

import functools
import logging
import os

import torch

log = logging.getLogger("specui.native")  # as before this module was split from specui.native (its loggers' name)

# rows up to which a product reads GGUF blocks, not float32 panels (SmolLM2: AVX-512 1-12 rows took 0.49-0.96 of
# float32's time, stop 56; AVX2 prompts of 16-512 rows 0.82-0.93 on Zen 3, stop 69: every row, and no float32 panels)
ALL_ROWS = 2**31 - 1  # every row count (a C int)
BLOCK_ROWS = {"avx512": 12, "avx2": ALL_ROWS}
SPLIT_WORK = 1 << 18  # multiply-adds a row from which a product is split over the product threads
BLOCK_SPLIT_ROWS = 16  # ... or, for a block of at least this many rows (a prompt), multiply-adds in all its rows


class Product:
    """x [m, k] float32 -> x W^T + b [m, n] for one packed W, each row's bits independent of m (see
    `specui.native`'s docstring); the pointers and sizes a call passes are read once, here. few: the same W as GGUF
    blocks (`specui.blocks.panels`, "q4" or "q8"), read by products of at most `BLOCK_ROWS` rows: reading
    fewer bytes pays where rebuilding the weights costs less than reading them (one token, a short verify),
    float32 panels' multiply-adds past that; the same bits. panels None (then `k` given): blocks for every row.
    kernel: the `specui.native.Kernel` that computes it (not imported here: specui.native imports this module)."""

    def __init__(self, kernel, panels: torch.Tensor | None, n: int, bias: torch.Tensor | None, *,
                 few: tuple[torch.Tensor, str] | None = None, k: int | None = None):
        self.panels, self.bias, self.blocks = panels, bias, few and few[0]  # kept alive for the pointers below
        self.n, self.k, self.count = n, k if panels is None else panels.shape[1], -(-n // kernel.width)
        self.kernel = kernel
        self._call, self._split = kernel.rowgemm, kernel.rowgemm_split
        self._w, self._b = None if panels is None else panels.data_ptr(), None if bias is None else bias.data_ptr()
        self._kind = _KINDS[torch.float32 if panels is None else panels.dtype]
        self._narrow, self._narrow_kind = (few[0].data_ptr(), _KINDS[few[1]]) if few else (None, 0)
        # rows that read the blocks (every row count where there are no float32 panels)
        self.few = 0 if not few else ALL_ROWS if panels is None else BLOCK_ROWS.get(kernel.isa, 1)
        self._work = n * self.k  # multiply-adds per row

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if x.stride(-1) != 1 or x.dtype != torch.float32 or x.shape[-1] != self.k:
            if x.dtype != torch.float32 or x.shape[-1] != self.k:
                raise ValueError(f"expected float32 rows of {self.k}, got {x.dtype} {tuple(x.shape)}")
            x = x.contiguous()
        m = x.shape[0]
        y = torch.empty(m, self.n)
        w, kind = (self._narrow, self._narrow_kind) if m <= self.few else (self._w, self._kind)
        args = (x.data_ptr(), m, x.stride(0), w, self.n, self.k, self._b, y.data_ptr(), self.n, 0, self.count, kind)
        whole = self._work * m if m >= BLOCK_SPLIT_ROWS else 0  # a prompt's block counts all its rows
        threads = product_threads() if max(self._work, whole) >= SPLIT_WORK else 1
        if threads > 1:  # panels in contiguous shares, this thread's and the workers' (native_pool.c)
            self._split(*args, threads)
        else:
            self._call(*args)
        return y


_KINDS = {torch.float32: 0, torch.float16: 1, torch.bfloat16: 2, torch.int8: 3, "q4": 4, "q8": 5}  # native.h's kinds


def product_threads() -> int:
    """Threads a large product is split over: $SPECUI_PRODUCT_THREADS, else 2 where this process may run on
    two cores or more (1: never split)."""
    return _threads_for(os.environ.get("SPECUI_PRODUCT_THREADS", "").strip())


@functools.cache
def _threads_for(wanted: str) -> int:
    if wanted:
        try:
            count = int(wanted)
        except ValueError:
            count = 0
        if count >= 1:
            return count
        log.warning("specui: SPECUI_PRODUCT_THREADS=%r is not a positive integer; using the default", wanted)
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # no affinity on this system
        cores = os.cpu_count() or 1
    return min(2, cores)
