"""Side by side: the chat preset's shipped draft and heads against new ones, on one loaded target.

    python -m tools.assets_ab [--draft FOLDER] [--eagle FOLDER] [--medusa FOLDER] [--early-exit FOLDER]
                              [--temperature 0.7] [--arm '{"drafter": "eagle"}' ...]

A GPU round brings back a draft and an EAGLE head, a CPU run Medusa and early-exit heads; before one replaces
what `assets/` ships, this times both on the 8 held-out chat prompts (`specui.chat_prompts`): per prompt plain
decoding, then each arm with the shipped assets and with the new ones in turn (the order swapped every pass, so a
drifting VM favours neither), over `--passes` passes, each with new seeds (with sampling, a repeated seed would
repeat the run). Each arm is a drafter with its K and confidence stop (default: EAGLE and the draft model, each as
the preset drafts). It prints each arm's speedup over plain and its tokens per target forward, and checks that
every greedy output equals plain decoding's. Nothing is written; a folder left out is the shipped one on both
sides. Where the preset rounds its drafters to int8 (`int8_drafters`), the new ones are rounded the same way.
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from specui import chat_draft, chat_prompts, heads, int8
from specui.bench.prompts import tokenize_prompts
from specui.engine import SpeculativeEngine
from specui.loading import load_pair
from specui.presets import load_config
from specui.settings import DecodeSettings


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--preset", default="smollm2-chat")
    ap.add_argument("--draft", default=None, help="a new chat draft folder (default: the shipped one)")
    ap.add_argument("--eagle", default=None, help="a new EAGLE head folder (default: the shipped one)")
    ap.add_argument("--medusa", default=None, help="a new Medusa head folder (default: the shipped one)")
    ap.add_argument("--early-exit", default=None, help="a new early-exit head folder (default: the shipped one)")
    ap.add_argument("--temperature", type=float, default=0.0)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--passes", type=int, default=2)
    ap.add_argument("--arm", action="append", default=None, metavar="JSON",
                    help='a drafter and its settings, e.g. \'{"drafter": "eagle", "k": 6, "confidence": 0.3}\' '
                         "(k and confidence default to the preset's; tree_width and tree_nodes draft token trees; "
                         "default arms: eagle, model)")
    return ap.parse_args(argv)


def engines(preset, draft: str | None, head_folders: dict[str, str | None]) -> tuple[SpeculativeEngine, SpeculativeEngine, object]:
    """(shipped, new, pair): two engines over one loaded target, differing only in the assets named (a chat
    draft that borrows the target's embeddings, `specui.chat_draft`; head folders by name, `specui.heads`)."""
    pair = load_pair(preset)
    shipped = pair.engine()
    new_draft = chat_draft.load(draft, pair.target).eval() if draft else pair.draft
    loaded = {name: heads.load(folder, pair.target).eval() for name, folder in head_folders.items() if folder}
    new_heads = {**pair.heads, **loaded}
    if preset.int8_drafters:  # as the preset loads the shipped ones (`specui.loading`): rows rounded to int8
        for drafter in [*loaded.values()] + [new_draft] * bool(draft):  # int8 reaches the EAGLE head and the draft
            int8.round_drafter(drafter)
    new = SpeculativeEngine(pair.target, new_draft, heads=new_heads, prompt_threads=pair.prompt_threads,
                            drafter=preset.drafter)
    return shipped, new, pair


def main(argv=None) -> None:
    args = parse_args(argv)
    torch.set_num_threads(1)
    preset = load_config(None).get(args.preset)
    shipped, new, pair = engines(preset, args.draft, {"eagle": args.eagle, "medusa": args.medusa,
                                                      "early_exit": args.early_exit})
    arms = [json.loads(a) for a in (args.arm or ['{"drafter": "eagle"}', '{"drafter": "model"}'])]
    for arm in arms:
        arm.setdefault("k", preset.k_for(arm["drafter"]))
        arm.setdefault("confidence", preset.confidence_for(arm["drafter"]))
    prompts = tokenize_prompts(chat_prompts.HELD_OUT[:args.prompts], pair.tokenizer, chat=preset.chat_template)

    def run(engine, arm, prompt, seed):
        arm = arm or {}
        s = DecodeSettings(max_new_tokens=args.tokens, temperature=args.temperature, ignore_eos=True, seed=seed,
                           speculative=bool(arm), drafter=arm.get("drafter"), num_draft_tokens=arm.get("k", 1),
                           draft_confidence=arm.get("confidence", 0.0), tree_width=arm.get("tree_width", 1),
                           tree_nodes=arm.get("tree_nodes", 0))
        start = time.perf_counter()
        result = engine.generate(prompt, s)
        return time.perf_counter() - start, result

    sides = [("shipped", shipped), ("new", new)]
    run(shipped, None, prompts[0], 0)
    for arm in arms:  # warm both sides once
        for _, engine in sides:
            run(engine, arm, prompts[0], 0)
    plain, seconds, rounds = 0.0, {}, {}
    for p in range(args.passes):
        for i, prompt in enumerate(prompts):
            seed = p * len(prompts) + i  # the same for both sides; new every pass
            t, reference = run(shipped, None, prompt, seed)
            plain += t
            for j, arm in enumerate(arms):
                for name, engine in (sides if p % 2 == 0 else sides[::-1]):
                    t, r = run(engine, arm, prompt, seed)
                    seconds[j, name] = seconds.get((j, name), 0.0) + t
                    rounds[j, name] = rounds.get((j, name), 0) + len(r.rounds)
                    if args.temperature == 0 and r.token_ids != reference.token_ids:
                        raise SystemExit(f"{arm} with the {name} assets differs from plain decoding on prompt {i + 1}")
            print(f"pass {p + 1}, prompt {i + 1}/{len(prompts)} done", flush=True)
    tokens = args.tokens * len(prompts) * args.passes
    print(f"\nplain {tokens / plain:.1f} tokens/s; temperature {args.temperature}; draft {args.draft or 'shipped'}, "
          f"EAGLE {args.eagle or 'shipped'}, Medusa {args.medusa or 'shipped'}, early exit {args.early_exit or 'shipped'}; "
          f"{len(prompts)} prompts x {args.passes} passes")
    for j, arm in enumerate(arms):
        cells = [f"{name} {plain / seconds[j, name]:.3f}x ({tokens / rounds[j, name]:.2f} tokens per forward)"
                 for name, _ in sides]
        tree = f" tree {arm['tree_width']}x{arm.get('tree_nodes', 0)}" if arm.get("tree_width", 1) > 1 else ""
        print(f"{arm['drafter']:>13} K<={arm['k']} conf {arm['confidence']}{tree}: " + "  ".join(cells))
    if args.temperature == 0:
        print("every greedy output identical to plain decoding")


if __name__ == "__main__":
    main()
