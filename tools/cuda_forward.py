"""The GPU forward three ways: transformers' own, specui's CUDA graphs, and graphs of compiled layers.

`python -m tools.cuda_forward [--preset NAME ...]` times a KV-cached forward of 1, 4, 8 and 16 new tokens
after 128 cached ones (median of 30, each after a fresh cache of the same prompt) for a preset's target
and draft: `CachedLM(model, fast=False)` (transformers' forward and DynamicCache), the graph stack
(`specui.graphs.GraphStack`), and the same with each layer through torch.compile (`SPECUI_COMPILE=1`),
whose first forward, which compiles, is timed apart. Needs a CUDA device.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch

from specui import load_engine
from specui.graphs import COMPILE, GraphStack
from specui.kv import CachedLM

KINDS = ("transformers", "graphs", "compiled")


def forward_ms(model, kind: str, tokens: int, *, repeats: int = 30, cached: int = 128) -> float:
    """Median milliseconds of a forward of `tokens` new tokens after `cached` ones."""
    times = []
    for r in range(repeats + 3):
        lm = CachedLM(model, fast=kind != "transformers")
        lm.extend(list(range(5, 5 + cached)))
        torch.cuda.synchronize()
        t = time.perf_counter()
        lm.extend(list(range(7, 7 + tokens)))
        torch.cuda.synchronize()
        if r >= 3:  # three untimed first
            times.append(time.perf_counter() - t)
        del lm  # its cache goes back to the stack for the next
    return 1e3 * statistics.median(times)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--preset", nargs="*", default=[None], help="presets of models.yaml (default: its default)")
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("tools.cuda_forward needs a CUDA device")
    for preset in args.preset:
        engine = load_engine(preset)
        for role, model in (("target", engine.target_model), ("draft", engine.draft_model)):
            if model is None:
                continue
            print(f"{engine.preset.name} {role}: {model.config.num_hidden_layers} layers, {model.dtype}")
            with torch.inference_mode():
                for kind in KINDS:
                    GraphStack.attach(model, compile=kind == "compiled")  # a fresh stack: nothing captured yet
                    started = time.perf_counter()
                    CachedLM(model, fast=kind != "transformers").extend([1, 2, 3])
                    torch.cuda.synchronize()
                    first = time.perf_counter() - started
                    times = {n: forward_ms(model, kind, n) for n in (1, 4, 8, 16)}
                    print(f"  {kind:12}  " + "  ".join(f"{n:2} tokens {ms:6.2f} ms" for n, ms in times.items())
                          + f"   (first forward {first:.1f} s)", flush=True)
            GraphStack.attach(model, compile=os.environ.get(COMPILE) == "1")


if __name__ == "__main__":
    main()
