"""Side by side: the native kernels of another commit against this tree's, in one process.

    python -m tools.build_ab [--old REF] [--preset P] [--drafter D] [--arm JSON] [--passes 2] [--prompts 8]
                             [--tokens 128] [--rows 1,2,3,4,6,8] [--cache 200] [--prefill 30,200,500]

Builds specui's native sources as they are at --old (default: HEAD) with this CPU's flags (SPECUI_NATIVE=avx2: the
AVX2 build's, on an AVX-512 CPU too) into a temporary shared library, and loads the preset twice: once on that
build, once on this tree's (each load's products, native layers and drafting rounds are made while its build is the
one `specui.native.kernel()` returns, and each use switches to it again). Then:
- the target's forward of each --rows new tokens after a --cache of 200 tokens (`specui.verify_cost`, medians of 9, the
  two builds in turn three times each: a VM whose speed drifts favours neither) and, with --prefill, its prefill of
  each length of prompt as the engine reads a prompt (`tools.prompt_speed`);
- plain decoding and the drafter (the preset's, at its K and confidence stop; --arm: other settings) on the first
  --prompts held-out prompts with both builds, the order swapped every prompt,
and prints both builds' times and tokens/s, and whether every arm gave the same output (greedy). Kernel changes
that keep the bits (every output one FMA chain over k in order) show here as speed alone.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import inspect
import json
import json.decoder
import os
import statistics
import subprocess
import tempfile
from pathlib import Path

import torch

import specui
from specui import native, native_build
from specui.verify_cost import measure_verify_cost
from tools.prompt_speed import prefill_ms
from tools.race import race_loads

def old_build(ref: str, isa: str, folder: Path) -> Path:
    """The native library built from specui's sources at git `ref` (its native*.c and native.h, as one unit: each
    file whole, as every commit's sources compile), with the flags `specui.native_build` uses."""
    listed = subprocess.run(["git", "ls-tree", "--name-only", ref, "specui/"], check=True, capture_output=True,
                            text=True).stdout.split()
    names = [Path(p).name for p in listed if Path(p).name.startswith("native") and Path(p).suffix in (".c", ".h")]
    for name in names:
        source = subprocess.run(["git", "show", f"{ref}:specui/{name}"], check=True, capture_output=True).stdout
        (folder / name).write_bytes(source)
    library = folder / f"specui-native-{isa}-old.so"
    compiler = [os.environ.get("CC") or "cc", *native_build.COMPILE_FLAGS, *native_build.LINK_FLAGS,
                *native_build.FLAGS[isa]]
    subprocess.run([*compiler, *(str(folder / n) for n in names if n.endswith(".c")), "-o", str(library)], check=True)
    return library


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m tools.build_ab", description=__doc__.split("\n\n")[0])
    p.add_argument("--old", default="HEAD", help="the git commit (or branch) whose native sources to compare")
    p.add_argument("--preset", default=None)
    p.add_argument("--drafter", default=None, help="default: the preset's")
    p.add_argument("--passes", type=int, default=2)
    p.add_argument("--prompts", type=int, default=8, help="0: the forward table alone")
    p.add_argument("--tokens", type=int, default=128)
    p.add_argument("--arm", type=json.loads, default=None,
                   help="DecodeSettings keywords over the drafter's, as JSON: '{\"tree_width\": 3, \"tree_nodes\": 8}'")
    p.add_argument("--rows", default="1,2,3,4,6,8", help="the forwards to time (0: none)")
    p.add_argument("--cache", type=int, default=200, help="cached tokens before each --rows forward")
    p.add_argument("--prefill", default="0", help="prompt lengths to time as the engine reads a prompt (0: none)")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    built = native.kernel()  # this CPU's build, or the one SPECUI_NATIVE names (avx2 on an AVX-512 CPU too)
    if built is None:
        raise SystemExit("build_ab: no native kernels on this machine")
    isa = built.isa
    with tempfile.TemporaryDirectory() as folder:
        kernels = {"new": built, "old": native.Kernel(ctypes.CDLL(str(old_build(args.old, isa,
                                                                                               Path(folder)))), isa)}

        @contextlib.contextmanager
        def using(build: str):
            native._kernels[isa] = kernels[build]
            try:
                yield
            finally:
                native._kernels[isa] = kernels["new"]

        engines = {}
        for build in kernels:
            with using(build):
                engines[build] = specui.load_engine(args.preset)
        rows = [int(r) for r in args.rows.split(",") if int(r) > 0]
        if rows:
            forward_table(engines, using, rows, args.cache)
        lengths = [int(n) for n in args.prefill.split(",") if int(n) > 0]
        if lengths:
            prefill_table(engines, using, lengths)
        if args.prompts > 0 and args.passes > 0:
            race_loads(engines, using, {"old": "old build", "new": "this tree"}, args)


def forward_table(engines: dict, using, rows: list[int], cache: int = 200) -> None:
    seconds: dict[str, list] = {"new": [], "old": []}
    for build in ("new", "old", "old", "new", "new", "old"):
        with using(build):
            curve = measure_verify_cost(engines[build].target_model, cache_length=cache, max_tokens=max(rows),
                                        repeats=9)
        seconds[build].append(curve.seconds)
    print(f"forward of n new tokens after {cache} (ms, means of three medians of 9):")
    for m in rows:
        old, new = (1e3 * statistics.fmean(run[m - 1] for run in seconds[b]) for b in ("old", "new"))
        print(f"  {m:2d}: old build {old:6.2f}  this tree {new:6.2f}  ({old / new:.3f}x faster)")


def prefill_table(engines: dict, using, lengths: list[int], samples: int = 5) -> None:
    """Each build's prefill of the first `length` tokens of json/decoder.py's source into an empty cache, the way the
    engine reads a prompt (`tools.prompt_speed.prefill_ms`, on the preset's prompt threads), builds interleaved."""
    ids = engines["new"].tokenizer(inspect.getsource(json.decoder))["input_ids"]
    print(f"prefill of n prompt tokens (ms, medians of {samples}, the builds in turn):")
    for length in lengths:
        ms: dict[str, list] = {"new": [], "old": []}
        for build in ("new", "old") * (samples + 1):
            with using(build):
                engine = engines[build]
                ms[build].append(prefill_ms(engine.target_model, ids[:length], way="prompt",
                                            threads=engine.prompt_threads or torch.get_num_threads()))
        old, new = (statistics.median(ms[b][1:]) for b in ("old", "new"))  # the first of each: a warm-up
        print(f"  {len(ids[:length]):4d}: old build {old:7.1f}  this tree {new:7.1f}  ({old / new:.3f}x faster)")


if __name__ == "__main__":
    main()
