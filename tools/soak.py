"""A memory soak of the served app: N `/generate` runs through `gradio_client`, the server's resident
memory (RSS) sampled after each.

`python -m tools.soak --runs 200 --tokens 8` serves the app in this process (the bundled pair unless
--config names another models.yaml; its default preset) and prints one line per run and a summary:
the growth over the first and the second half after a warm-up. Memory that levels off grows by little
in the second half; a leak grows by about as much in each half. `--url` soaks a server that is already
running instead (then only the client's side runs here and no RSS is read).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, replace

PROMPT = "import os\nimport sys\n\n\ndef main(argv):\n"


def rss_mb(pid: str = "self") -> float:
    """Resident memory of a process in MB (Linux /proc)."""
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/<pid>/status")


@dataclass
class Soak:
    rss: list[float]  # MB after each run (empty for a remote server)
    warm_up: int

    def growth(self) -> tuple[float, float]:
        """MB grown over the first and over the second half of the runs after the warm-up."""
        after = self.rss[self.warm_up - 1:] if self.warm_up else self.rss
        mid = len(after) // 2
        return after[mid] - after[0], after[-1] - after[mid]


def soak(url: str, *, runs: int, tokens: int, warm_up: int = 5, sample=rss_mb, progress=None) -> Soak:
    """`runs` greedy runs of `tokens` new tokens against `url`; `sample()` after each (None: no sampling)."""
    from gradio_client import Client

    client = Client(url, verbose=False)
    rss = []
    for i in range(runs):
        out = client.predict(PROMPT, max_new_tokens=tokens, seed=i, api_name="/generate")
        if not out.get("tokens"):
            raise RuntimeError(f"run {i} returned no tokens: {out!r}")
        if sample is not None:
            rss.append(sample())
            if progress:
                progress(f"run {i + 1:4d}  rss {rss[-1]:8.1f} MB")
    return Soak(rss, warm_up)


def soak_in_process(config, *, runs: int, tokens: int, warm_up: int = 5, progress=None) -> Soak:
    """Serve the app in this process on a free port and soak it, sampling this process's RSS."""
    from tools.screenshot import served

    with served(config, preload=False) as url:
        return soak(url, runs=runs, tokens=tokens, warm_up=warm_up, progress=progress)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.soak", description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=200, help="number of /generate runs (default: 200)")
    parser.add_argument("--tokens", type=int, default=8, help="new tokens per run (default: 8)")
    parser.add_argument("--warm-up", type=int, default=5, help="runs left out of the growth (default: 5)")
    parser.add_argument("--config", default=None, help="a models.yaml (default: specui's, bundled preset)")
    parser.add_argument("--url", default=None, help="soak this running server instead (no RSS is read)")
    args = parser.parse_args(argv)
    if args.url:
        soak(args.url, runs=args.runs, tokens=args.tokens, sample=None)
        print(f"{args.runs} runs done against {args.url}")
        return 0
    from specui.presets import load_config

    config = load_config(args.config)
    if args.config is None:
        config = replace(config, default="bundled")
    result = soak_in_process(config, runs=args.runs, tokens=args.tokens, warm_up=args.warm_up, progress=print)
    first, second = result.growth()
    print(f"after {args.warm_up} warm-up runs: {first:+.1f} MB over the first half, "  # memory may shrink: -0.3
          f"{second:+.1f} MB over the second half (rss {result.rss[0]:.1f} -> {result.rss[-1]:.1f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
