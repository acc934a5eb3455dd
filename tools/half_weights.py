"""How much half-width panels save on a checkpoint whose weights are bfloat16 values run in float32.

    python -m tools.half_weights [--preset NAME] [--threads 1]

Rounds a copy of the preset's target to bfloat16 values (still float32 tensors: a stand-in for a bfloat16
checkpoint loaded as float32, such as the Hub's SmolLM2 in the smollm2-chat-hub preset), then times the lean
forward's one-token and 8-token forwards at a 128-token cache with the panels in bfloat16 (what specui does)
and in float32 (forced), medians of 25 each. Both give the same bits (tests/engine/test_native.py).
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time

import torch

from specui import load_engine, native
from specui.kv import CachedLM


def forward_ms(model, rows: int, *, cache: int = 128, samples: int = 25) -> float:
    lm = CachedLM(model)
    times = []
    with torch.inference_mode():
        lm.extend(list(range(100, 100 + cache)))
        for _ in range(samples):
            lm.trim(cache)
            start = time.perf_counter()
            lm.extend(list(range(5, 5 + rows)))
            times.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--preset", default=None, help="a preset of models.yaml (default: its default)")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    model = copy.deepcopy(load_engine(args.preset).target_model)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.to(torch.bfloat16).float())
    if native.kernel() is None:
        raise SystemExit("no native kernels on this machine: nothing to compare")
    half = [forward_ms(model, rows) for rows in (1, 8)]
    native.HALF_PANELS = False  # part of each prepared product's stamp: they are remade in float32
    try:
        full = [forward_ms(model, rows) for rows in (1, 8)]
    finally:
        native.HALF_PANELS = True
    print(f"bfloat16 values in float32, {args.threads} thread(s), 128-token cache:")
    print(f"  bfloat16 panels: one token {half[0]:.1f} ms, 8 tokens {half[1]:.1f} ms ({half[1] / half[0]:.2f}x)")
    print(f"  float32 panels:  one token {full[0]:.1f} ms, 8 tokens {full[1]:.1f} ms ({full[1] / full[0]:.2f}x)")


if __name__ == "__main__":
    main()
