"""How much of a product's time is DRAM's: one layer matrix of the preset's target with its weights in cache against
every layer's in turn, by rows, on one thread.

    python -m tools.cold_products [--preset NAME] [--matrix gate_up|down|qkv] [--rows 1,2,3,4,6,8] [--repeats 7]

Packs the chosen matrix of each of the target's layers as specui's native products do (GGUF blocks for SmolLM2),
then times, for each row count, the first layer's product called once for every layer (its weights stay in the
caches: what the arithmetic alone costs) and the layers' products in turn (each read from memory, as in a
forward), the median of `--repeats` sweeps each. Where the two differ by about the same time at every row count,
memory is not hidden behind the arithmetic; the kernels' prefetch is what closes that gap (docs/performance.md,
stop 79). Products run alone here (SPECUI_PRODUCT_THREADS=1): a forward splits them over two cores.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch

MATRICES = {"gate_up": ("mlp", ("gate_proj", "up_proj")), "down": ("mlp", ("down_proj",)),
            "qkv": ("self_attn", ("q_proj", "k_proj", "v_proj"))}


def sweep_us(products: list, x: torch.Tensor, repeats: int) -> float:
    """The median over `repeats` of one call of each product in turn, in µs a call."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for product in products:
            product(x)
        times.append((time.perf_counter() - start) / len(products))
    return 1e6 * statistics.median(times)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", default=None, help="a preset of models.yaml (default: its default)")
    ap.add_argument("--matrix", choices=sorted(MATRICES), default="gate_up")
    ap.add_argument("--rows", default="1,2,3,4,6,8")
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args(argv)
    os.environ["SPECUI_PRODUCT_THREADS"] = "1"  # before specui.native reads it
    torch.set_num_threads(1)
    from specui import native
    from specui.loading import load_pair
    from specui.presets import load_config

    kernel = native.kernel()
    if kernel is None:
        raise SystemExit("cold_products: no native kernels on this machine")
    pair = load_pair(load_config().get(args.preset))
    part, names = MATRICES[args.matrix]
    weights = [torch.cat([getattr(getattr(layer, part), name).weight.detach().float() for name in names])
               for layer in pair.target.model.layers]
    products = [kernel.product(w.contiguous()) for w in weights]
    n, k = weights[0].shape
    print(f"{args.matrix}: {len(products)} layers of {n} x {k}, {kernel.isa}, one thread; µs a product "
          f"(median of {args.repeats} sweeps)")
    for rows in (int(r) for r in args.rows.split(",")):
        x = torch.randn(rows, k)
        sweep_us(products, x, 1)  # warm-up
        hot, cold = sweep_us([products[0]] * len(products), x, args.repeats), sweep_us(products, x, args.repeats)
        print(f"  {rows:2d} rows: in cache {hot:7.1f}  from memory {cold:7.1f}  (+{cold - hot:5.1f}, "
              f"{cold / hot:.2f}x)  {2 * rows * n * k / cold / 1e3:6.1f} GFLOP/s from memory")


if __name__ == "__main__":
    main()
