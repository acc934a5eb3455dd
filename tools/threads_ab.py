"""Side by side: specui's product threads (SPECUI_PRODUCT_THREADS) at several settings, in one process.

    python -m tools.threads_ab [--arms 1,2] [--passes 2] [--preset P] [--drafter D] [--prompts 8] [--tokens 128]
                               [--temperature 0.7]
    python -m tools.threads_ab --browser [--arms 1,2] [--passes 2]                      # the app, with Chromium

An arm is a thread count, or THREADS:MS, which also sets how long an idle worker yields its core before it sleeps
(`Kernel.pool_yield`, native_pool.c's YIELD_SECONDS; `--arms 2:0.17,2:3` races 1,000 sched_yields' worth on a VM
against the default). Sampled runs (--temperature, top-p 0.9) draw with the same seed in every setting, so each
method's outputs are the same in every setting (plain decoding's and the drafter's differ from each other).

Headless: a preset (default: the default one) on the first --prompts held-out chat prompts (`specui.chat_prompts`;
stdlib test code for a preset without a chat template), --tokens each (a short run fits a borrowed machine's
last minute: `--arms 1,2,4,8 --prompts 2 --tokens 64 --passes 1`), plain decoding and a drafter (the preset's,
at its K and confidence stop), the setting switched prompt by prompt
and the order swapped every prompt, so a drifting VM favours neither; it prints tokens/s per setting and checks
that every output is the same. --browser serves the app (its default preset) and drives Debian's Chromium on
the same machine (as `tools.screenshot` does), 4 prompts with compare on, and prints the app's own stats line
per run: what a person who runs `python app.py` and opens the page on the same cores gets. Each run also
prints the product threads' counts during it (splits, products computed alone while resting, rests, products
too small to wake sleeping workers; native_pool.c), whose state carries over from run to run as in the app.
"""

from __future__ import annotations

import argparse
import os
import time

import torch

BROWSER_PROMPTS = ["Write a Python function that checks whether a word is a palindrome, with a docstring.",
                   "Explain what a Python generator is, with a short example.",
                   "Write a function that merges two sorted lists.",
                   "What is the difference between a list and a tuple?"]


def set_arm(arm: str, default_yield: float) -> None:
    """SPECUI_PRODUCT_THREADS, and the workers' yield (ms; `default_yield` seconds, the build's own read before the
    first arm, where the arm names none)."""
    from specui import native

    threads, _, ms = arm.partition(":")
    os.environ["SPECUI_PRODUCT_THREADS"] = threads
    native.kernel().pool_yield(float(ms) / 1e3 if ms else default_yield)


def headless(arms: list[str], passes: int, drafter: str | None, preset_name: str | None, count: int = 8,
             new_tokens: int = 128, temperature: float = 0.0) -> None:
    import specui
    from specui import native
    from tools.race import drafter_settings, race_prompts

    torch.set_num_threads(1)
    engine = specui.load_engine(preset_name)
    spec = drafter_settings(engine.preset, drafter)
    prompts = race_prompts(engine, count)
    cases = [(arm, speculative) for arm in arms for speculative in (False, True)]

    sampled = {"temperature": temperature, "top_p": 0.9} if temperature else {"temperature": 0}
    default_yield = native.kernel().pool_yield()

    def run(ids, arm, speculative):
        set_arm(arm, default_yield)
        kw = spec if speculative else {"speculative": False}
        start = time.perf_counter()
        result = engine.generate(ids, max_new_tokens=new_tokens, ignore_eos=True, seed=0, **sampled, **kw)
        return time.perf_counter() - start, tuple(result.token_ids)

    for case in cases:  # warm-up
        run(prompts[0], *case)
    native.kernel().pool_state(clear=True)
    seconds, outputs = dict.fromkeys(cases, 0.0), {}
    for n in range(passes):
        for i, ids in enumerate(prompts):
            for case in cases if (i + n) % 2 == 0 else cases[::-1]:
                took, tokens = run(ids, *case)
                seconds[case] += took
                outputs.setdefault((i, case[1] and bool(temperature)), set()).add(tokens)  # sampled: per method
    native.kernel().pool_yield(default_yield)
    tokens = passes * len(prompts) * new_tokens
    for arm in arms:
        plain, fast = tokens / seconds[(arm, False)], tokens / seconds[(arm, True)]
        print(f"SPECUI_PRODUCT_THREADS={arm}: plain {plain:.1f} tokens/s, {spec['drafter']} {fast:.1f} tokens/s, "
              f"{fast / plain:.3f}x")
    print(f"product threads: {native.kernel().pool_state()}; every output the same: "
          f"{all(len(v) == 1 for v in outputs.values())}" + (" (in every setting)" if temperature else ""))


def browser(arms: list[str], passes: int) -> None:
    from playwright.sync_api import sync_playwright

    from specui import native
    from specui.presets import load_config
    from tools.screenshot import launch_chromium, open_page, run_prompt, served, set_number

    kernel = native.kernel()
    default_yield = kernel.pool_yield()
    with served(load_config(None)) as url, sync_playwright() as p:
        page = open_page(launch_chromium(p), url)
        set_number(page, "max-new-tokens", 128)
        page.click("#compare input")
        run_prompt(page, "Hi", timeout_ms=300_000)  # warm-up
        for i, prompt in enumerate(BROWSER_PROMPTS * passes):
            for arm in arms if i % 2 == 0 else arms[::-1]:
                set_arm(arm, default_yield)
                before = kernel.pool_state()  # kept across runs, as in a served app
                page.click("#clear")
                page.wait_for_function("() => !document.querySelector('#chat .specui-prompt')", timeout=30_000)
                run_prompt(page, prompt, timeout_ms=300_000)
                stats = page.locator("#stats").inner_text().replace("\n", " | ")
                counts = {key: value - before[key] for key, value in kernel.pool_state().items()}
                print(f"prompt {i % len(BROWSER_PROMPTS) + 1}, SPECUI_PRODUCT_THREADS={arm}, {counts}: {stats}",
                      flush=True)
        kernel.pool_yield(default_yield)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tools.threads_ab", description=__doc__.splitlines()[0])
    parser.add_argument("--arms", default="1,2",
                        help="the SPECUI_PRODUCT_THREADS settings to compare (THREADS, or THREADS:YIELD_MS)")
    parser.add_argument("--passes", type=int, default=2)
    parser.add_argument("--preset", default=None, help="headless: the preset (default: models.yaml's default)")
    parser.add_argument("--drafter", default=None, help="headless: the drafter beside plain decoding (the preset's)")
    parser.add_argument("--prompts", type=int, default=8, help="headless: how many held-out prompts (at most 16)")
    parser.add_argument("--tokens", type=int, default=128, help="headless: new tokens per prompt")
    parser.add_argument("--temperature", type=float, default=0.0, help="headless: sampled runs (top-p 0.9)")
    parser.add_argument("--browser", action="store_true", help="serve the app and drive Chromium on this machine")
    args = parser.parse_args(argv)
    arms = [a.strip() for a in args.arms.split(",") if a.strip()]
    if args.browser:
        browser(arms, args.passes)
    else:
        headless(arms, args.passes, args.drafter, args.preset, args.prompts, args.tokens, args.temperature)


if __name__ == "__main__":
    main()
