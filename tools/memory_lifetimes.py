"""What a preset switch and a closed browser tab leave in the server's memory (the figures of stop 93's note).

`python -m tools.memory_lifetimes switch` loads the default preset into the app's `PairCache`, switches to a second
copy of it and then to the bundled pair, and prints resident and peak memory after each: the pair a switch replaces
goes before the new one loads, and the freed pages go back to the system (`specui.loading.give_back_memory`).

`python -m tools.memory_lifetimes sessions --visitors 4` serves the bundled app in this process, has that many
Chromium pages chat two turns each and close, and prints the size of each closed session's record in gradio's state
holder (dicts and lists counted recursively: what `specui.ui.closed_sessions` drops an hour after a tab closes).
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import resource
import sys
import time

from tools.soak import rss_mb


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def switch() -> None:
    from specui.loading import PairCache
    from specui.presets import load_config

    config = load_config(None)
    default = config.get(None)
    cache = PairCache()
    for preset in (default, dataclasses.replace(default, name=f"{default.name} (again)"), config.get("bundled")):
        cache.get(preset)
        print(f"after {preset.name}: resident {rss_mb():.0f} MB, peak {peak_mb():.0f} MB", flush=True)


def deep_size(obj) -> int:
    """Bytes of `obj` and of every dict, list, tuple and set inside it, each object once."""
    seen, stack, total = set(), [obj], 0
    while stack:
        o = stack.pop()
        if id(o) in seen:
            continue
        seen.add(id(o))
        total += sys.getsizeof(o)
        if isinstance(o, dict):
            stack.extend(o.keys())
            stack.extend(o.values())
        elif isinstance(o, (list, tuple, set, frozenset)):
            stack.extend(o)
    return total


def sessions(visitors: int) -> None:
    from playwright.sync_api import sync_playwright

    from tests.helpers import ui_config
    from tools.screenshot import launch_chromium, open_page, run_prompt, served_demo

    with served_demo(ui_config(), preload=False) as (demo, url):
        with sync_playwright() as p:
            browser = launch_chromium(p)
            for _ in range(visitors):
                page = open_page(browser, url)
                run_prompt(page, "def main(argv):")
                run_prompt(page, "import os\n")
                page.close()
            browser.close()
        time.sleep(3)  # the closed pages' heartbeats end
        gc.collect()
        for key, session in list(demo.state_holder.session_data.items()):
            components, state = deep_size(session.config_values) / 1024, deep_size(session.state_data) / 1024
            print(f"session {key[:8]}: closed {session.is_closed}, components {components:.0f} KB, "
                  f"state {state:.0f} KB", flush=True)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m tools.memory_lifetimes", description=__doc__.split("\n")[0])
    ap.add_argument("what", choices=["switch", "sessions"])
    ap.add_argument("--visitors", type=int, default=4, help="sessions: how many pages chat and close")
    args = ap.parse_args(argv)
    switch() if args.what == "switch" else sessions(args.visitors)


if __name__ == "__main__":
    main()
