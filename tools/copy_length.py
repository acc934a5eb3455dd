"""Side by side: how long early exit + lookup's copies should be, on the chat preset's 8 held-out prompts.

    python -m tools.copy_length [--passes 2] [--lengths 2,3,4,6] [--min-ngram 2,3] [--k 1] [--tokens 128]
                                [--prompts 8]

Per prompt, plain decoding, early exit alone (at the preset's K) and `early_exit_lookup` with copies of each
length after a match of each `--min-ngram` tokens (its head at `--k`), greedy, the order of the arms reversed
every other prompt and pass so a drifting VM favours none. Prints each arm's speedup over plain decoding and its
tokens per target forward, and checks that every output equals plain decoding's. Nothing is written.
"""

from __future__ import annotations

import argparse
import statistics
import time

import specui
from specui.heads.early_exit import EarlyExitLookupDrafter
from specui.presets import load_config
from tools.race import race_prompts


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m tools.copy_length", description=__doc__.split("\n")[0])
    ap.add_argument("--passes", type=int, default=2)
    ap.add_argument("--lengths", default="2,3,4,6", help="comma-separated copy lengths to race")
    ap.add_argument("--k", type=int, default=1, help="the head's K in early exit + lookup's drafted rounds")
    ap.add_argument("--min-ngram", default="2", help="comma-separated: the shortest match that copies (each raced)")
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--prompts", type=int, default=8, help="the first N held-out prompts")
    args = ap.parse_args(argv)
    preset = load_config().get(None)  # the default preset, the chat model
    engine = specui.load_engine(preset)
    head = engine.heads["early_exit"]
    prompts = race_prompts(engine, args.prompts)
    arms = {"plain": lambda: dict(speculative=False),
            "early exit": lambda: dict(drafter="early_exit", num_draft_tokens=preset.k_for("early_exit"))}
    for m in (int(x) for x in args.min_ngram.split(",")):
        for n in (int(x) for x in args.lengths.split(",")):
            name = f"+ lookup, copies of {n}" + (f" after {m}" if "," in args.min_ngram else "")
            arms[name] = lambda n=n, m=m: dict(drafter=EarlyExitLookupDrafter(head, lookup_tokens=n, min_ngram=m),
                                               num_draft_tokens=args.k)
    for prompt in prompts[:2]:  # warm-up
        for arm in arms.values():
            engine.generate(prompt, max_new_tokens=32, ignore_eos=True, **arm())
    seconds = {a: 0.0 for a in arms}
    per_forward = {a: [] for a in arms}
    for p in range(args.passes):
        for i, prompt in enumerate(prompts):
            reference = None
            for a in (list(arms) if (i + p) % 2 == 0 else list(arms)[::-1]):
                t0 = time.perf_counter()
                result = engine.generate(prompt, max_new_tokens=args.tokens, ignore_eos=True, **arms[a]())
                seconds[a] += time.perf_counter() - t0
                per_forward[a].append(result.mean_accepted_length if a != "plain" else 1.0)
                reference = reference or result.token_ids
                if result.token_ids != reference:
                    raise SystemExit(f"{a}: prompt {i + 1} differs from the other arms' output")
    print(f"plain {args.passes * len(prompts) * args.tokens / seconds['plain']:.1f} tokens/s "
          f"({args.passes} passes of {len(prompts)} prompts x {args.tokens} tokens, greedy)")
    for a in arms:
        print(f"{a:30s} {seconds['plain'] / seconds[a]:.3f}x  tokens per target forward "
              f"{statistics.mean(per_forward[a]):.2f}")
    print("every output identical to plain decoding")


if __name__ == "__main__":
    main()
