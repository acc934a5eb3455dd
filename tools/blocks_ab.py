"""Side by side: a GGUF-derived target read as its blocks (specui.blocks) and as float32 panels, in one process.

    python -m tools.blocks_ab [--preset P] [--drafter D] [--passes 2] [--prompts 8] [--tokens 128] [--rows 1,2,4,8]

Loads the preset (default: the default one, SmolLM2 from its GGUF wheel) twice, once with block panels and once
without (SPECUI_BLOCK_PANELS=0's float32 panels; the same bits), then:
- times the target's forward of each --rows new tokens after a 200-token cache (`specui.verify_cost`, medians of
  9, each load twice in turn);
- runs plain decoding and the drafter (the preset's, at its K and confidence stop) on the first --prompts held-out
  chat prompts with both loads, the order swapped every prompt so that a drifting VM favours neither,
and prints tokens/s, each load's speculative speedup over its own plain decoding, and checks that all four
arms gave the same output (greedy).
"""

from __future__ import annotations

import argparse
import contextlib
import statistics

import torch

import specui
from specui import native
from specui.verify_cost import measure_verify_cost
from tools.race import race_loads


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m tools.blocks_ab", description=__doc__.split("\n\n")[0])
    p.add_argument("--preset", default=None)
    p.add_argument("--drafter", default=None, help="default: the preset's")
    p.add_argument("--passes", type=int, default=2)
    p.add_argument("--prompts", type=int, default=8)
    p.add_argument("--tokens", type=int, default=128)
    p.add_argument("--rows", default="1,2,3,4,5,6,8", help="the forwards to time (0: none)")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    before = native.BLOCK_PANELS
    try:
        race(args)
    finally:
        native.BLOCK_PANELS = before


def race(args: argparse.Namespace) -> None:
    """The forward table, then the race (see the module docstring)."""
    engines = {}
    for blocks in (True, False):
        with using_blocks(blocks):
            engines[blocks] = specui.load_engine(args.preset)
    rows = [int(r) for r in args.rows.split(",") if int(r) > 0]
    if rows:
        forward_table(engines, rows)
    race_loads(engines, using_blocks, {True: "block panels", False: "float32 panels"}, args)


@contextlib.contextmanager
def using_blocks(blocks: bool):
    native.BLOCK_PANELS = blocks  # read when a product is prepared, and part of its stamp: set before each use
    yield


def forward_table(engines: dict, rows: list[int]) -> None:
    """The verify-cost curve of each load (`specui.verify_cost`, medians of 9 after a 200-token cache), each load
    measured twice in turn, at the row counts asked."""
    seconds: dict[bool, list[tuple[float, ...]]] = {True: [], False: []}
    for blocks in (True, False, False, True):
        with using_blocks(blocks):
            curve = measure_verify_cost(engines[blocks].target_model, cache_length=200, max_tokens=max(rows), repeats=9)
        seconds[blocks].append(curve.seconds)
    ms = {(blocks, m): 1e3 * statistics.fmean(run[m - 1] for run in runs)
              for blocks, runs in seconds.items() for m in rows}
    print("forward of n new tokens after 200 (ms; blocks / float32):")
    for m in rows:
        print(f"  {m:2d}: block panels {ms[(True, m)]:6.2f}  float32 panels {ms[(False, m)]:6.2f}  "
              f"({ms[(True, m)] / ms[(False, m)]:.2f})")


if __name__ == "__main__":
    main()
