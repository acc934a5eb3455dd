"""How much the chat model repeats itself under each repetition penalty, and whether every drafter stays exact.

    python -m tools.repetition [--penalties 1.0,1.1,1.2] [--drafters model,eagle,medusa,early_exit] [--tokens 128]
                               [--prompts 8] [--preset NAME]

Per penalty: plain greedy decoding of the held-out prompts (EOS ends a reply), the share of each reply's 4-grams
that already occurred earlier in it (mean, and the largest), how many replies ended by EOS, and each drafter's
output compared with plain decoding's token for token. Prints one line per penalty; nothing is timed or written.
"""

from __future__ import annotations

import argparse

import specui
from tools.race import race_prompts


def repeated(ids: list[int], n: int = 4) -> float:
    """The share of the n-grams of `ids` that already occurred earlier in `ids` (0 for fewer than n tokens)."""
    grams = [tuple(ids[i:i + n]) for i in range(len(ids) - n + 1)]
    seen, again = set(), 0
    for g in grams:
        again += g in seen
        seen.add(g)
    return again / len(grams) if grams else 0.0


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m tools.repetition", description=__doc__.split("\n")[0])
    ap.add_argument("--penalties", default="1.0,1.1,1.2", help="comma-separated repetition penalties")
    ap.add_argument("--drafters", default="model,eagle,medusa,early_exit", help="comma-separated; '' for none")
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--prompts", type=int, default=8, help="the first N held-out prompts")
    ap.add_argument("--preset", default=None, help="a preset of models.yaml (default: its default)")
    args = ap.parse_args(argv)
    engine = specui.load_engine(args.preset)
    prompts = race_prompts(engine, args.prompts)
    drafters = [d for d in args.drafters.split(",") if d]
    for penalty in (float(x) for x in args.penalties.split(",")):
        shares, eos, same = [], 0, 0
        for p in prompts:
            plain = engine.generate(p, max_new_tokens=args.tokens, speculative=False, repetition_penalty=penalty)
            shares.append(repeated(plain.token_ids))
            eos += plain.stop_reason == "eos"
            same += sum(engine.generate(p, max_new_tokens=args.tokens, drafter=d, repetition_penalty=penalty).token_ids
                        == plain.token_ids for d in drafters)
        print(f"penalty {penalty:g}: 4-grams already in the reply {sum(shares) / len(shares):.3f} (largest "
              f"{max(shares):.3f}), ended by EOS {eos}/{len(prompts)}; drafters' outputs identical to plain "
              f"{same}/{len(prompts) * len(drafters)}", flush=True)


if __name__ == "__main__":
    main()
