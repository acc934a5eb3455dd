"""How often greedy speculative decoding parts from plain decoding in reduced precision, and why.

    python -m tools.bf16_divergence                     # bundled pair, bfloat16, K=7, 12 prompts x 150 tokens
    python -m tools.bf16_divergence --dtype float32 --k 4

Each prompt is decoded both ways (EOS ignored); the first differing token is explained with
`specui.runstats.explain_divergence` (a near-tie, or not). On a CPU, float32 gives identical outputs.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch


def main(argv=None) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from specui import SpeculativeEngine
    from specui.bench.prompts import builtin_prompts
    from specui.runstats import explain_divergence, token_probs

    assets = Path(__file__).resolve().parent.parent / "assets"
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"], help="(default: %(default)s)")
    p.add_argument("--k", type=int, default=7, help="draft tokens per round (default: %(default)s)")
    p.add_argument("--prompts", type=int, default=12, help="held-out prompts of 64 tokens (default: %(default)s)")
    p.add_argument("--new-tokens", type=int, default=150, help="tokens per run (default: %(default)s)")
    p.add_argument("--threads", type=int, default=1, help="torch threads (default: %(default)s)")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    dtype = getattr(torch, args.dtype)
    tokenizer = AutoTokenizer.from_pretrained(assets / "specui-target")
    target = AutoModelForCausalLM.from_pretrained(assets / "specui-target", dtype=dtype).eval()
    draft = AutoModelForCausalLM.from_pretrained(assets / "specui-draft", dtype=dtype).eval()
    engine = SpeculativeEngine(target, draft)
    differ = ties = 0
    prompts = builtin_prompts(tokenizer, count=args.prompts, length=64)
    for i, prompt in enumerate(prompts):
        kw = {"max_new_tokens": args.new_tokens, "ignore_eos": True}
        spec = engine.generate(prompt, num_draft_tokens=args.k, **kw)
        plain = engine.generate(prompt, speculative=False, **kw)
        d = explain_divergence(spec.token_ids, token_probs(spec), plain.token_ids, token_probs(plain))
        differ += d is not None
        ties += d is not None and d.near_tie
        print(f"prompt {i}: " + ("identical" if d is None else d.describe()), flush=True)
    print(f"{args.dtype}, K={args.k}: {differ} of {len(prompts)} outputs differ from plain decoding "
          f"({ties} of them at a near-tie)")


if __name__ == "__main__":
    main()
