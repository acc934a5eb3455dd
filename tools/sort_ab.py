"""Side by side: sampled decoding with top-p's scores sorted by native code and by numpy (or, with `--compare
rows`, verifies that transform every row and verifies that transform the rows their rule reads; with `--compare
draw`, a row's token drawn by torch's running sum and searches and by native code), in one process.

    python -m tools.sort_ab [--compare sort|rows|draw] [--preset P] [--drafters eagle,medusa] [--tree WIDTH,NODES]
                            [--temperature 0.7] [--top-p 0.9] [--passes 2] [--prompts 8] [--tokens 128]

A sampled row's top-p cut sorts its scores (`specui.sampling._outside_nucleus`): native code's radix sort
(`native.Kernel.sorted_values`) where that is faster than numpy's on this machine (`sampling._sorter`, timed once),
else numpy's. This times plain decoding and each drafter (as the preset runs it) with both sorts, the sort swapped
every prompt so that a drifting VM favours neither, says which one this machine picks, and checks that both gave the
same output (the probabilities are the same bits, so the same seeds draw the same tokens).

`--compare rows`: a sampled round's rule reads the target's rows up to its first rejection (`specui.sampling.Rows`);
the other arm transforms every row of the verify first, as rounds did until stop 81 (a tree's: every node's row). The
decisions are the same, so the outputs are too; plain decoding (one row a step) is the control.

`--compare draw`: a float32 row's token drawn by native code (`native.Kernel.draw`, zeros skipped) or by torch's
float64 running sum and searches (`specui.sampling.sample`'s batched path): the same token for the same uniform.
"""

from __future__ import annotations

import argparse
import functools
import time

import torch

from tools.race import race_arguments


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m tools.sort_ab", description=__doc__.split("\n\n")[0])
    race_arguments(p, temperature=0.7, top_p=0.9)
    p.add_argument("--drafters", default="eagle", help="comma-separated, beside plain decoding")
    p.add_argument("--compare", choices=("sort", "rows", "draw"), default="sort")
    p.add_argument("--tree", default="", help="WIDTH,NODES: the drafters draft token trees of this shape (K: the "
                                              "preset's), no confidence floor")
    args = p.parse_args(argv)

    import specui
    from specui import sampling
    from specui.settings import DecodeSettings
    from tools.race import drafter_settings, race_prompts

    torch.set_num_threads(1)
    engine = specui.load_engine(args.preset)
    prompts = race_prompts(engine, args.prompts)
    tree = dict(zip(("tree_width", "tree_nodes", "draft_confidence"), [*map(int, args.tree.split(",")), 0.0])) \
        if args.tree else {}
    arms = {"plain": {"speculative": False},
            **{d: {**drafter_settings(engine.preset, d), **tree} for d in args.drafters.split(",") if d}}
    from specui import chain_round, native, tree_round

    picked = "native" if sampling._sorter() is not None else "numpy's"
    chosen, rule_rows = sampling._sorter, chain_round.Rows

    every_row = functools.partial(rule_rows, every_row=True)
    if args.compare == "sort":
        ways = {"numpy's sort": lambda: setattr(sampling, "_sorter", lambda: None),
                "native sort": lambda: setattr(sampling, "_sorter", native.kernel)}
    elif args.compare == "draw":
        kernel = native.kernel()
        had_draw = kernel.has_draw
        ways = {"torch's draw": lambda: setattr(kernel, "has_draw", False),
                "native draw": lambda: setattr(kernel, "has_draw", True)}
    else:
        ways = {"every row": lambda: [setattr(m, "Rows", every_row) for m in (chain_round, tree_round)],
                "rows read": lambda: [setattr(m, "Rows", rule_rows) for m in (chain_round, tree_round)]}
    seconds: dict[tuple[str, str], float] = {}
    rows: dict[str, list[int]] = {arm: [0, 0, 0] for arm in arms}  # rounds, rows verified, rows the rule read
    same = runs = 0

    def run(ids, arm, way, seed):
        ways[way]()
        settings = DecodeSettings(max_new_tokens=args.tokens, temperature=args.temperature, top_p=args.top_p,
                                  ignore_eos=True, seed=seed, **arms[arm])
        start = time.perf_counter()
        result = engine.generate(ids, settings)
        seconds = time.perf_counter() - start
        for r in result.rounds if way == "rows read" else []:
            tree = r.tree is not None
            rows[arm][0] += 1
            rows[arm][1] += 1 + (len(r.tree) if tree else r.num_drafted)
            rows[arm][2] += 1 + (len(r.tree_path) if tree else min(r.num_accepted, r.num_drafted))
        return seconds, result.token_ids

    try:
        for way in ways:  # warm up
            for arm in arms:
                run(prompts[0], arm, way, 0)
        for done in range(args.passes):
            for i, ids in enumerate(prompts):
                order = list(ways) if (i + done) % 2 == 0 else list(ways)[::-1]
                for arm in arms:
                    outputs = []
                    for way in order:
                        t, tokens = run(ids, arm, way, 1000 * done + i)
                        seconds[way, arm] = seconds.get((way, arm), 0.0) + t
                        outputs.append(tokens)
                    same += outputs[0] == outputs[1]
                    runs += 1
    finally:
        sampling._sorter, chain_round.Rows, tree_round.Rows = chosen, rule_rows, rule_rows
        if args.compare == "draw":
            kernel.has_draw = had_draw
    tokens = args.passes * len(prompts) * args.tokens
    print(f"{engine.preset.name}, temperature {args.temperature:g}, top-p {args.top_p:g}, {len(prompts)} prompts x "
          f"{args.tokens} tokens, {args.passes} passes")
    first, second = ways
    for arm in arms:
        rate_first, rate_second = (tokens / seconds[w, arm] for w in ways)
        over = {w: seconds[w, "plain"] / seconds[w, arm] for w in ways}
        print(f"{arm:18s} {first} {rate_first:7.1f} tokens/s ({over[first]:.3f}x plain)   {second} {rate_second:7.1f} "
              f"tokens/s ({over[second]:.3f}x plain)   {faster_or_slower(rate_second / rate_first)}")
        count, verified, read = rows[arm]
        if count and arm != "plain":
            print(f"{'':18s} rows a round: {verified / count:.2f} verified, {read / count:.2f} read by the rule")
    print(f"both ways gave the same output in {same} of {runs} runs; this machine sorts with {picked} code")


def faster_or_slower(ratio: float) -> str:
    """The second way's tokens/s over the first's, said plainly: '1.352x faster', or '1.353x slower' where it is below
    1 (0.739 reads '1.353x slower', not '0.739x faster')."""
    return f"{ratio:.3f}x faster" if ratio >= 1 else f"{1 / ratio:.3f}x slower"


if __name__ == "__main__":
    main()
