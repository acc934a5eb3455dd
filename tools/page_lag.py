"""How busy the page is while a long reply streams: the served app, Debian's Chromium, the browser's own clock.

    python -m tools.page_lag [--max-new-tokens 512] [--runs 2] [--no-arena] [--preset bundled] [--first-token-s 600]

Serves the app in this process (the stdlib pair by default: it decodes faster than any page draws), opens it in
Chromium (as `tools.screenshot` does) and sends the stdlib test prompt with K 1, temperature 1 and compare on, and
the drafter arena unless --no-arena: the longest stream the chat makes. While it streams, it asks the page a
question every 0.2 s (is the run finished?) and times the answer: the page's main thread answers between two tasks,
so the time is how long a click (Stop) would wait. Prints, per run, the wall time from Send to the finished reply,
the seconds the page's main thread was busy (Chrome's TaskDuration) and that as a share of the wall time, and the
answer's median and longest wait. Nothing is asserted: on a 2-core machine the server and the browser share the
cores, so compare runs made side by side (e.g. at two commits), not against a fixed number.

The questions start once the reply streams (its caret shows) or has finished (a reply all in one frame, an error);
the wall and busy times count from Send, a load included. It waits for that up to --first-token-s (600 s): the first
run loads the preset's pair, and the chat model's load and first token took over a minute on a loaded 2-core machine,
past the 60 s this waited before.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from dataclasses import replace

PROMPT = "import os\nimport sys\n\n\ndef main(argv):\n"
FIRST_TOKEN_S = 600.0  # the longest wait for the reply to stream (or finish): a load and a first token, loaded machine


def measure(page, cdp, *, first_token_s: float = FIRST_TOKEN_S) -> dict:
    """Send the prompt in the box and time the page's answers until the run is finished (`first_token_s`: the longest
    wait for the reply to stream or finish, once the message shows)."""
    from tools.screenshot import FINISHED

    def busy() -> float:
        return next(m["value"] for m in cdp.send("Performance.getMetrics")["metrics"] if m["name"] == "TaskDuration")

    sent = page.locator("#chat .specui-prompt").count()
    before, start = busy(), time.perf_counter()
    page.click("#send")
    page.wait_for_function("n => document.querySelectorAll('#chat .specui-prompt').length > n", arg=sent,
                           timeout=60_000)  # the message shows at once (`waiting`), before its run's turn
    page.wait_for_function(f"() => !!document.querySelector('#chat .specui-caret') || ({FINISHED})()",
                           timeout=first_token_s * 1000)
    waits = []
    while True:
        asked = time.perf_counter()
        finished = page.evaluate(FINISHED)
        waits.append(time.perf_counter() - asked)
        if finished:
            break
        time.sleep(0.2)
    wall, taken = time.perf_counter() - start, busy() - before
    return {"wall_s": round(wall, 2), "busy_s": round(taken, 2), "busy_share": round(taken / wall, 2),
            "answer_median_ms": round(1e3 * statistics.median(waits), 1), "answer_max_ms": round(1e3 * max(waits), 1)}


def run(*, max_new_tokens: int = 512, runs: int = 2, arena: bool = True, preset: str = "bundled",
        first_token_s: float = FIRST_TOKEN_S) -> list[dict]:
    from playwright.sync_api import sync_playwright

    from specui.presets import load_config
    from tools.screenshot import launch_chromium, open_page, served, set_number

    out = []
    with served(replace(load_config(None), default=preset)) as url, sync_playwright() as p:
        browser = launch_chromium(p)
        page = open_page(browser, url)
        set_number(page, "num-draft-tokens", 1)
        set_number(page, "max-new-tokens", max_new_tokens)
        set_number(page, "temperature", 1.0)
        page.check("#compare input")
        if arena:
            page.check("#arena input")
        cdp = page.context.new_cdp_session(page)
        cdp.send("Performance.enable")
        for i in range(runs):
            page.click("#clear")
            page.wait_for_function("() => !document.querySelector('#chat .specui-prompt')")  # the last run cleared
            page.fill("#prompt textarea", PROMPT)
            out.append({"run": i + 1, **measure(page, cdp, first_token_s=first_token_s)})
            print(json.dumps(out[-1]), flush=True)
        browser.close()
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--max-new-tokens", type=int, default=512)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--no-arena", action="store_true", help="compare only (the speculative and the plain reply)")
    ap.add_argument("--preset", default="bundled")
    ap.add_argument("--first-token-s", type=float, default=FIRST_TOKEN_S,
                    help="the longest wait for the reply to stream or finish (the pair's load, its first token)")
    args = ap.parse_args(argv)
    run(max_new_tokens=args.max_new_tokens, runs=args.runs, arena=not args.no_arena, preset=args.preset,
        first_token_s=args.first_token_s)


if __name__ == "__main__":
    main()
