"""How fast the target reads a prompt: the few-row kernels every block took before, against the prompt path
(`CachedLM.extend(prompt=True)`: MKL's products over all rows where MKL is fast or the stack has no native layers,
with native layers only from `lean.NATIVE_PROMPT_ROWS` rows on; else the native layers, the same path as the first)
on the preset's prompt threads, and against MKL's products forced at any length on one thread and on those threads.

    python -m tools.prompt_speed [--preset NAME] [--lengths 60,200,500] [--samples 5]

Times the target's prefill of the first LENGTH tokens of the standard library's json/decoder.py source into an
empty cache (the time to the first token, less one forward), median of SAMPLES each, the four ways interleaved.
"""

from __future__ import annotations

import argparse
import inspect
import json.decoder
import os
import statistics
import time

import torch

from specui import lean
from specui.kv import CachedLM, cpu_threads
from specui.loading import load_pair
from specui.presets import load_config


def prefill_ms(model, ids: list[int], *, way: str, threads: int) -> float:
    """way: "few-row" (a block not marked prompt), "prompt" (the prompt path as shipped) or "mkl" (the prompt path
    with MKL's products whatever the prompt's length, where the stack takes them)."""
    lm = CachedLM(model)
    if way == "mkl" and lm.stack is not None:
        lm.stack.prompt_rows = lean.PROMPT_ROWS
    with torch.inference_mode(), cpu_threads(threads):
        started = time.perf_counter()
        lm.extend(ids, last_only=True, prompt=way != "few-row")
        return (time.perf_counter() - started) * 1e3


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", default=None, help="a preset of models.yaml (default: the default preset)")
    ap.add_argument("--lengths", default="60,200,500", help="prompt lengths in tokens, comma-separated")
    ap.add_argument("--samples", type=int, default=5)
    args = ap.parse_args(argv)
    preset = load_config().get(args.preset)
    pair = load_pair(preset)
    wide = pair.prompt_threads or torch.get_num_threads()
    ids = pair.tokenizer(inspect.getsource(json.decoder))["input_ids"]
    ways = {"few-row kernels, 1 thread": ("few-row", 1), f"prompt path, {wide} threads": ("prompt", wide),
            "MKL, 1 thread": ("mkl", 1), f"MKL, {wide} threads": ("mkl", wide)}
    print(f"preset {preset.name}: the target's prefill, ms (median of {args.samples}); {os.cpu_count()} cores")
    for length in (int(n) for n in args.lengths.split(",")):
        part = ids[:length]
        for way, threads in ways.values():  # warm-up
            prefill_ms(pair.target, part, way=way, threads=threads)
        times = {name: [] for name in ways}
        for _ in range(args.samples):
            for name, (way, threads) in ways.items():
                times[name].append(prefill_ms(pair.target, part, way=way, threads=threads))
        medians = {name: statistics.median(t) for name, t in times.items()}
        base = medians["few-row kernels, 1 thread"]
        print(f"  {len(part):4d} tokens: " + " | ".join(f"{name} {ms:.0f} ({base / ms:.2f}x)"
                                                       for name, ms in medians.items()))


if __name__ == "__main__":
    main()
