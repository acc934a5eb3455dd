"""Side by side: sampled decoding with top-p's scores sorted by native code and by numpy, in one process.

    python -m tools.sort_ab [--preset P] [--drafters eagle,medusa] [--temperature 0.7] [--top-p 0.9] [--passes 2]
                            [--prompts 8] [--tokens 128]

A sampled row's top-p cut sorts its scores (`specui.sampling._outside_nucleus`): native code's radix sort
(`native.Kernel.sorted_values`) where that is faster than numpy's on this machine (`sampling._sorter`, timed once),
else numpy's. This times plain decoding and each drafter (as the preset runs it) with both sorts, the sort swapped
every prompt so that a drifting VM favours neither, says which one this machine picks, and checks that both gave the
same output (the probabilities are the same bits, so the same seeds draw the same tokens).
"""

from __future__ import annotations

import argparse
import time

import torch

from tools.race import race_arguments


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m tools.sort_ab", description=__doc__.split("\n\n")[0])
    race_arguments(p, temperature=0.7, top_p=0.9)
    p.add_argument("--drafters", default="eagle", help="comma-separated, beside plain decoding")
    args = p.parse_args(argv)

    import specui
    from specui import sampling
    from specui.settings import DecodeSettings
    from tools.race import drafter_settings, race_prompts

    torch.set_num_threads(1)
    engine = specui.load_engine(args.preset)
    prompts = race_prompts(engine, args.prompts)
    arms = {"plain": {"speculative": False},
            **{d: drafter_settings(engine.preset, d) for d in args.drafters.split(",") if d}}
    from specui import native

    picked = "native" if sampling._sorter() is not None else "numpy's"
    chosen = sampling._sorter
    sorts = {"numpy": lambda: None, "native": native.kernel}
    seconds: dict[tuple[str, str], float] = {}
    same = runs = 0

    def run(ids, arm, sort, seed):
        sampling._sorter = sorts[sort]  # what _outside_nucleus sorts with
        settings = DecodeSettings(max_new_tokens=args.tokens, temperature=args.temperature, top_p=args.top_p,
                                  ignore_eos=True, seed=seed, **arms[arm])
        start = time.perf_counter()
        result = engine.generate(ids, settings)
        return time.perf_counter() - start, result.token_ids

    try:
        for sort in sorts:  # warm up
            for arm in arms:
                run(prompts[0], arm, sort, 0)
        for done in range(args.passes):
            for i, ids in enumerate(prompts):
                order = list(sorts) if (i + done) % 2 == 0 else list(sorts)[::-1]
                for arm in arms:
                    outputs = []
                    for sort in order:
                        t, tokens = run(ids, arm, sort, 1000 * done + i)
                        seconds[sort, arm] = seconds.get((sort, arm), 0.0) + t
                        outputs.append(tokens)
                    same += outputs[0] == outputs[1]
                    runs += 1
    finally:
        sampling._sorter = chosen
    tokens = args.passes * len(prompts) * args.tokens
    print(f"{engine.preset.name}, temperature {args.temperature:g}, top-p {args.top_p:g}, {len(prompts)} prompts x "
          f"{args.tokens} tokens, {args.passes} passes")
    for arm in arms:
        slow, fast = (tokens / seconds[s, arm] for s in sorts)
        over = {s: seconds[s, "plain"] / seconds[s, arm] for s in sorts}
        print(f"{arm:18s} numpy's sort {slow:7.1f} tokens/s ({over['numpy']:.3f}x plain)   native sort {fast:7.1f} "
              f"tokens/s ({over['native']:.3f}x plain)   {fast / slow:.3f}x faster")
    print(f"both sorts gave the same output in {same} of {runs} runs; this machine sorts with {picked} code")


if __name__ == "__main__":
    main()
