"""What the side-by-side tools race (`tools.threads_ab`, `tools.native_ab`, `tools.blocks_ab`, `tools.build_ab`,
`tools.sort_ab`): a preset's drafter at its own K and confidence stop, on the held-out chat prompts
(`specui.chat_prompts`), or stdlib prompts for a preset without a chat template; the arguments that say which
(`race_arguments`); and the race of two loads of one preset (`race_loads`)."""

from __future__ import annotations

import time

from specui import chat_prompts
from specui.bench.prompts import builtin_prompts, tokenize_prompts
from specui.settings import DecodeSettings


def race_arguments(p, *, temperature: float = 0.0, top_p: float = 1.0) -> None:
    """Add the arguments of a race on held-out prompts to an argparse parser: --preset, --temperature, --top-p,
    --passes, --prompts, --tokens."""
    p.add_argument("--preset", default=None)
    p.add_argument("--temperature", type=float, default=temperature)
    p.add_argument("--top-p", type=float, default=top_p)
    p.add_argument("--passes", type=int, default=2)
    p.add_argument("--prompts", type=int, default=8)
    p.add_argument("--tokens", type=int, default=128)


def drafter_settings(preset, drafter: str | None = None) -> dict:
    """The `DecodeSettings` keywords of `drafter` (default: the preset's) as the preset runs it."""
    drafter = drafter or preset.drafter
    return {"drafter": drafter, "num_draft_tokens": preset.k_for(drafter),
            "draft_confidence": preset.confidence_for(drafter)}


def race_prompts(engine, count: int) -> list[list[int]]:
    """The first `count` prompts for the engine's preset, tokenized."""
    if engine.preset.chat_template:
        return tokenize_prompts(chat_prompts.HELD_OUT[:count], engine.tokenizer, chat=True)
    return builtin_prompts(engine.tokenizer, count=count, length=128)


def race_loads(engines: dict, using, names: dict, args) -> None:
    """Plain decoding and the drafter (`args.drafter`, default the preset's, as the preset runs it, with the
    `DecodeSettings` keywords of `args.arm` where the tool has one: a tree, another K) on each load in
    `engines` (key -> engine; the first one's preset and tokenizer give the prompts), greedy, `args.prompts` prompts
    × `args.tokens` tokens, `args.passes` passes after one prompt that warms every arm up; the arms' order swapped
    every prompt, so a drifting VM favours none. `using(key)`: a context in which that load's kernels are current.
    Prints each load's tokens/s (`names`: key -> its name, in print order), its drafter's speedup over its own plain
    decoding, and in how many prompts every arm gave the same output."""
    engine = next(iter(engines.values()))
    arm = getattr(args, "arm", None) or {}
    spec = {**drafter_settings(engine.preset, args.drafter), **arm}
    prompts = race_prompts(engine, args.prompts)
    arms = [(key, speculative) for key in engines for speculative in (False, True)]
    seconds = dict.fromkeys(arms, 0.0)
    outputs: dict[tuple[int, int], set] = {}
    for done in range(-1, args.passes):  # pass -1 warms every arm up
        for i, ids in enumerate(prompts[:1] if done < 0 else prompts):
            for key, speculative in arms if (i + done) % 2 == 0 else arms[::-1]:
                settings = DecodeSettings(max_new_tokens=args.tokens, temperature=0.0, ignore_eos=True,
                                          **(spec if speculative else {"speculative": False}))
                with using(key):
                    start = time.perf_counter()
                    result = engines[key].generate(ids, settings)
                    took = time.perf_counter() - start
                if done >= 0:
                    seconds[(key, speculative)] += took
                    outputs.setdefault((done, i), set()).add(tuple(result.token_ids))
    tokens = args.passes * len(prompts) * args.tokens
    print(f"{engine.preset.name}, {spec['drafter']}{f' {arm}' if arm else ''}, greedy, {len(prompts)} prompts x "
          f"{args.tokens} tokens, {args.passes} passes")
    width = max(len(name) for name in names.values())
    for key, name in names.items():
        plain, fast = (tokens / seconds[(key, s)] for s in (False, True))
        print(f"{name:{width}s} plain {plain:6.1f} tokens/s, {spec['drafter']} {fast:6.1f} tokens/s "
              f"({fast / plain:.3f}x over its plain)")
    same = sum(len(o) == 1 for o in outputs.values())
    count = {4: "four", 6: "six"}.get(len(arms), str(len(arms)))
    print(f"the {count} arms gave the same output in {same} of {len(outputs)} prompts")
