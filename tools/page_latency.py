"""What a person sees against what the engine does: time to first token and tokens per second in the page, the
server's frames alone, and the engine alone, on the same prompt and settings, side by side and repeated.

    python -m tools.page_latency [--runs 3] [--max-new-tokens 256] [--temperature 0] [--preset bundled]

Serves the app in this process (the stdlib pair by default) and opens it in Chromium (as `tools.screenshot` does),
speculative alone (compare and arena off). Each round of the measurement, in turn:
- page: the stdlib test prompt sent with Send; the page's own clock (performance.now, a MutationObserver on the chat)
  times the click, the reply's first frame drawn (`reply_s`: its note, before a token), its first token span and its
  last, and the engine seconds of that run (`engine_s`: prefill and rounds, as the stats line counts them, while the
  browser shares the cores);
- server: the same request through the app's `Showcase.run` with its charts (every frame built, none sent);
- engine: `engine.stream` on the same ids and decode settings, nothing built.
The page and server runs are the app's: a chat's kept cache may hold the prompt (the engine run reads it whole).
Time to first token is from Send (or the call) to the first token (a span drawn, a frame with a token, a round); tokens
per second is the reply's tokens ÷ the time from Send to its last token. Prints each round's figures as JSON, then
the ratios page ÷ engine and server ÷ engine with their median and range. The first page run (the app preloads the
pair as it starts: it may still be loading) is printed as `first` and left out of the ratios. Nothing is asserted: the
machine may be loaded, so read the ratios of runs made side by side, not the seconds.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from dataclasses import replace

from tools.page_lag import PROMPT

# installed before Send, on the page's clock (ms): the click, the new reply's first frame (a note, "…") and its first
# and last token span
WATCH = """() => {
  const w = window.__latency = {sent: null, reply: null, first: null, last: null, tokens: 0};
  const replies = () => document.querySelectorAll('#chat [data-testid=bot]');
  const before = replies().length;
  document.querySelector('#send').addEventListener('click', () => { w.sent = performance.now(); },
                                                   {capture: true, once: true});
  const look = () => {
    const m = replies(); if (m.length <= before) return;
    if (w.reply === null) w.reply = performance.now();
    const n = m[m.length - 1].querySelectorAll('.specui-text .tok:not(.tok-rejected)').length;
    if (n > 0 && w.first === null) w.first = performance.now();
    if (n > w.tokens) { w.tokens = n; w.last = performance.now(); }
  };
  w.observer = new MutationObserver(look);
  w.observer.observe(document.querySelector('#chat'), {childList: true, subtree: true, characterData: true});
}"""


def page_run(page, timeout_s: float) -> dict:
    """Send the prompt in the box and read the page's clock once the run is finished."""
    from tools.screenshot import FINISHED

    page.evaluate(WATCH)
    sent = page.locator("#chat .specui-prompt").count()
    page.click("#send")
    page.wait_for_function("n => document.querySelectorAll('#chat .specui-prompt').length > n", arg=sent,
                           timeout=timeout_s * 1000)
    page.wait_for_function(FINISHED, timeout=timeout_s * 1000)
    w = page.evaluate("() => { const w = window.__latency; w.observer.disconnect(); return w; }")
    if w["first"] is None:
        raise SystemExit("the page drew no token: is the preset loaded? (see the reply in the page)")
    since = {name: (w[name] - w["sent"]) / 1e3 for name in ("reply", "first", "last")}
    return {"reply_s": since["reply"], "first_s": since["first"], "tokens": w["tokens"], "last_s": since["last"]}


def server_run(showcase, settings) -> dict:
    """The same request through `Showcase.run` with its charts: every frame built, none sent."""
    start, first, tokens = time.perf_counter(), None, 0
    for frame, run in showcase.run(PROMPT, settings):
        shown = sum(1 for v in run.spec_views if v.kind != "rejected")
        if shown and first is None:
            first = time.perf_counter() - start
        if frame.done:
            tokens = shown
    return {"first_s": first, "tokens": tokens, "last_s": time.perf_counter() - start}


def engine_run(engine, ids, decode) -> dict:
    """`engine.stream` alone on the same ids and settings."""
    start, first, tokens = time.perf_counter(), None, 0
    for rnd in engine.stream(ids, decode):
        if first is None:
            first = time.perf_counter() - start
        tokens += len(rnd.token_ids)
    return {"first_s": first, "tokens": tokens, "last_s": time.perf_counter() - start}


def rate(r: dict) -> float:
    return r["tokens"] / r["last_s"]


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} (range {min(values):.2f}–{max(values):.2f}, {len(values)} runs)"


def run(*, runs: int = 3, max_new_tokens: int = 256, temperature: float = 0.0, preset: str = "bundled",
        timeout_s: float = 600.0) -> dict:
    from playwright.sync_api import sync_playwright

    from specui import runstats
    from specui.presets import load_config
    from specui.loading import PairCache
    from specui.ui.session import Showcase
    from tools.screenshot import launch_chromium, open_page, served, set_number

    class Watched(Showcase):
        """The app's showcase, keeping the settings of the page's last request."""

        def run(self, prompt, settings, **keywords):
            self.settings = settings
            for frame, self.last in super().run(prompt, settings, **keywords):
                yield frame, self.last

    config = replace(load_config(None), default=preset)
    showcase = Watched(config, PairCache())
    rows = []
    with served(config, showcase=showcase) as url, sync_playwright() as p:
        browser = launch_chromium(p)
        page = open_page(browser, url)
        set_number(page, "max-new-tokens", max_new_tokens)
        set_number(page, "temperature", temperature)
        page.uncheck("#compare input")
        if page.locator("#arena input").is_checked():
            page.uncheck("#arena input")
        for i in range(runs + 1):
            page.click("#clear")
            page.wait_for_function("() => !document.querySelector('#chat .specui-prompt')")
            page.fill("#prompt textarea", PROMPT)
            row = {"run": i or "first", "page": page_run(page, timeout_s)}
            row["page"]["engine_s"] = runstats.engine_seconds(showcase.last.spec)  # its engine, beside the browser
            settings = showcase.settings
            pair = showcase.cache.get(config.get(settings.preset))
            row["server"] = server_run(showcase, settings)
            row["engine"] = engine_run(pair.engine(), showcase.encode(pair, PROMPT, ()),
                                       settings.decode.but(speculative=True))
            print(json.dumps({k: ({n: round(x, 3) for n, x in v.items()} if isinstance(v, dict) else v)
                              for k, v in row.items()}), flush=True)
            rows.append(row)
        browser.close()
    steady = rows[1:]
    summary = {
        "page tokens/s ÷ engine tokens/s": spread([rate(r["page"]) / rate(r["engine"]) for r in steady]),
        "server tokens/s ÷ engine tokens/s": spread([rate(r["server"]) / rate(r["engine"]) for r in steady]),
        "page tokens/s ÷ its own run's engine tokens/s": spread([r["page"]["engine_s"] / r["page"]["last_s"]
                                                                 for r in steady]),
        "page first token ÷ engine first token": spread([r["page"]["first_s"] / r["engine"]["first_s"]
                                                         for r in steady]),
        "page first token, s": spread([r["page"]["first_s"] for r in steady]),
        "first run's first token (load, warm-up), s": f"{rows[0]['page']['first_s']:.2f}",
    }
    for name, value in summary.items():
        print(f"{name}: {value}")
    return {"rows": rows, "summary": summary}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3, help="measured rounds, after a first one that loads the pair")
    ap.add_argument("--max-new-tokens", type=int, default=256)
    ap.add_argument("--temperature", type=float, default=0.0)
    ap.add_argument("--preset", default="bundled")
    ap.add_argument("--timeout-s", type=float, default=600.0, help="the longest wait for one page run to finish")
    args = ap.parse_args(argv)
    run(runs=args.runs, max_new_tokens=args.max_new_tokens, temperature=args.temperature, preset=args.preset,
        timeout_s=args.timeout_s)


if __name__ == "__main__":
    main()
