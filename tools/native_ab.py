"""Side by side: the drafters' rounds in one native call against their Python steps, in one process.

    python -m tools.native_ab [--preset P] [--drafter D] [--temperature T [--top-p P] [--top-k K]] [--passes 2]
                              [--prompts 8] [--tokens 128]

Plain decoding, the drafter's Python steps (SPECUI_NATIVE_ROUNDS=0) and its native rounds
(`specui.native_chain`), in turn on the first --prompts held-out chat prompts (`specui.chat_prompts`; stdlib
prompts for a preset without a chat template), the order swapped every prompt so that a drifting VM favours
none; every pass draws new seeds, the same for the three. It prints tokens/s, the speed over plain decoding,
and per round the drafting time, the verify forward and the wall time, then checks that the Python steps and
the native rounds gave the same output (greedy: plain decoding's too). The native and Python rounds draw by the
same uniforms, so sampled runs match as well, barring a draw that lands within float rounding of a boundary.
"""

from __future__ import annotations

import argparse
import os
import time

import torch

from tools.race import race_arguments


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m tools.native_ab", description=__doc__.split("\n\n")[0])
    race_arguments(p)
    p.add_argument("--drafter", default=None, help="default: the preset's")
    p.add_argument("--top-k", type=int, default=0)
    args = p.parse_args(argv)

    import specui
    from specui.settings import DecodeSettings
    from tools.race import drafter_settings, race_prompts

    torch.set_num_threads(1)
    engine = specui.load_engine(args.preset)
    spec = drafter_settings(engine.preset, args.drafter)
    prompts = race_prompts(engine, args.prompts)
    arms = {"plain": ({"speculative": False}, "1"), "python steps": (spec, "0"), "native rounds": (spec, "1")}
    totals = {arm: {"wall": 0.0, "draft": 0.0, "forward": 0.0, "rounds": 0} for arm in arms}
    outputs: dict[tuple[int, int], dict[str, list[int]]] = {}

    def run(ids, arm, seed):
        keywords, native_rounds = arms[arm]
        os.environ["SPECUI_NATIVE_ROUNDS"] = native_rounds
        settings = DecodeSettings(max_new_tokens=args.tokens, temperature=args.temperature, top_p=args.top_p,
                                  top_k=args.top_k, ignore_eos=True, seed=seed, **keywords)
        start = time.perf_counter()
        result = engine.generate(ids, settings)
        return time.perf_counter() - start, result

    for arm in arms:  # warm up: kernels built, caches grown
        run(prompts[0], arm, 0)
    names = list(arms)
    for done in range(args.passes):
        for i, ids in enumerate(prompts):
            for arm in names if (i + done) % 2 == 0 else names[::-1]:
                seconds, result = run(ids, arm, 1000 * done + i)
                t = totals[arm]
                t["wall"] += seconds
                t["rounds"] += len(result.rounds)
                t["draft"] += sum(r.draft_s for r in result.rounds)
                t["forward"] += sum(r.forward_s for r in result.rounds)
                outputs.setdefault((done, i), {})[arm] = result.token_ids
    os.environ.pop("SPECUI_NATIVE_ROUNDS", None)
    tokens = args.passes * len(prompts) * args.tokens
    shape = "".join([f", top-p {args.top_p:g}" if args.top_p < 1 else "", f", top-k {args.top_k}" if args.top_k else ""])
    print(f"{engine.preset.name}, {spec['drafter']}, temperature {args.temperature:g}{shape}, {len(prompts)} prompts x "
          f"{args.tokens} tokens, {args.passes} passes")
    for arm, t in totals.items():
        rounds = max(t["rounds"], 1)
        print(f"{arm:14s} {tokens / t['wall']:7.1f} tokens/s  {totals['plain']['wall'] / t['wall']:.3f}x   per round: "
              f"drafting {t['draft'] / rounds * 1e3:.2f} ms, verify forward {t['forward'] / rounds * 1e3:.2f} ms, "
              f"wall {t['wall'] / rounds * 1e3:.2f} ms; {tokens / rounds:.2f} tokens per forward")
    same = sum(o["python steps"] == o["native rounds"] for o in outputs.values())
    print(f"the Python steps and the native rounds gave the same output in {same} of {len(outputs)} runs", end="")
    if args.temperature == 0:
        plain = sum(o["plain"] == o["native rounds"] for o in outputs.values())
        print(f"; the native rounds equal plain decoding in {plain} of {len(outputs)}", end="")
    print()


if __name__ == "__main__":
    main()
