"""The app on the oldest versions requirements.txt and requirements-dev.txt allow: a venv of those floors, a subset run.

    python -m tools.oldest_versions [--venv /tmp/specui-oldest] [--list] [--no-install] [--only PATTERN]

Builds a venv over this interpreter's packages (`--system-site-packages`: torch stays the one installed, see SKIP),
pins each requirement at its floor (`name>=X` and `name==X` become `name==X`, read from the two files, so raising a
floor raises it here), then runs SUBSET with that venv's python: the default GGUF preset converted afresh (a new
SPECUI_CACHE), greedy identity, a sampling-law test, the bundled pair, plotly figures, the Teach tab's charts (in
Chromium too), the benchmark's quick run and the served app. Prints each part's result; exits 1 if any failed.
Not part of the test run (it installs from PyPI and takes minutes); tests/unit/test_versions_floors.py keeps its
lists in step.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REQUIREMENTS = [ROOT / "requirements.txt", ROOT / "requirements-dev.txt"]
# Requirements left at the installed version, and why (each must still be a requirement)
SKIP = {
    "torch": "any wheel but the installed one pulls gigabytes of CUDA libraries; its floor is checked by reading",
    "bitsandbytes": "CUDA quantization only: a CPU run never imports it",
}
# Not ours to require, but their oldest is what a user's environment may hold beside our floors: gradio 6.31.0 asks
# huggingface-hub>=1.16.0 (and transformers 5.0.0 below 2.0)
TRANSITIVE = {"huggingface-hub": "1.16.0"}
# pytest arguments, each run on its own: the parts of the app an old version could break
SUBSET = [
    ["tests/engine/test_packaged.py"],
    ["tests/engine/test_engine_greedy.py"],
    ["tests/engine/test_engine_sampling.py", "-k", "test_prompt_lookup_sampling_is_exact"],
    ["tests/unit/test_sampling.py", "tests/unit/test_verify.py"],
    ["tests/engine/test_bundled_pair.py"],
    ["tests/app/test_ui_charts.py", "tests/unit/test_lesson_baseline.py"],
    ["tests/app/teach_page/test_browser_lecture_charts.py"],  # playwright's floor, the Teach tab's charts drawn
    ["tests/engine/test_teach.py"],
    ["tests/bench/test_bench_cli.py", "-k", "num_prompts"],
    ["tests/app/test_app_served.py", "-k", "cancelled_api_job or builds_no_charts"],
]


SAY_VERSIONS = """import importlib.metadata as m, sys
for name in sys.argv[1:]:
    try:
        print(name, m.version(name))
    except m.PackageNotFoundError:
        print(name, "not installed")
"""


def floors(paths: list[Path] = REQUIREMENTS) -> dict[str, str]:
    """{name: oldest allowed version} of every requirement line (`-r` lines and comments skipped); a line with no
    floor (no `>=` and no `==`) is a ValueError naming it: its oldest allowed version would be any."""
    found = {}
    for path in paths:
        for line in path.read_text(encoding="utf-8").splitlines():
            line = line.split("#")[0].strip()
            if not line or line.startswith("-"):
                continue
            m = re.match(r"^([A-Za-z0-9_.\-]+)\s*(?:\[[^\]]*\])?\s*(.*)$", line)
            floor = re.search(r"(?:>=|==)\s*([0-9][^,;\s]*)", m.group(2))
            if floor is None:
                raise ValueError(f"{path.name}: {line!r} has no floor (>= or ==)")
            found[m.group(1).lower().replace("_", "-")] = floor.group(1)
    return found


def pins() -> list[str]:
    """The pip arguments that install every floor but SKIP's, and TRANSITIVE's where the files state none (a package
    that became a requirement is pinned at the files' floor: never below it)."""
    wanted = TRANSITIVE | {name: v for name, v in floors().items() if name not in SKIP}
    return [f"{name}=={v}" for name, v in sorted(wanted.items())]


def build(venv: Path) -> Path:
    """venv's python, the venv made (over this interpreter's packages) and the floors installed into it."""
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", *pins()], check=True)
    return python


def run_subset(python: Path, only: str | None = None) -> bool:
    """Each SUBSET part with `python`, a fresh SPECUI_CACHE for all (the GGUF converted by these versions)."""
    ok = True
    with tempfile.TemporaryDirectory(prefix="specui-oldest-cache-") as cache:
        env = {**os.environ, "SPECUI_CACHE": cache, "PYTHONPATH": str(ROOT)}
        for part in SUBSET:
            if only and only not in " ".join(part):
                continue
            rc = subprocess.run([str(python), "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *part],
                                cwd=ROOT, env=env).returncode
            print(f"{'ok  ' if rc == 0 else 'FAIL'} {' '.join(part)}", flush=True)
            ok = ok and rc == 0
    return ok


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m tools.oldest_versions", description=__doc__.split("\n")[0])
    ap.add_argument("--venv", type=Path, default=Path(tempfile.gettempdir()) / "specui-oldest")
    ap.add_argument("--list", action="store_true", help="print the pins and what is left at its version, then stop")
    ap.add_argument("--no-install", action="store_true", help="run the subset with the venv as it is")
    ap.add_argument("--only", help="run only the parts whose arguments contain this text")
    args = ap.parse_args(argv)
    if args.list:
        print("\n".join(pins()))
        print("\n".join(f"left as installed: {name} ({why})" for name, why in SKIP.items()))
        return
    if args.no_install and not (args.venv / "bin" / "python").exists():
        ap.error(f"--no-install: {args.venv} holds no venv; build it first (run without --no-install)")
    python = args.venv / "bin" / "python" if args.no_install else build(args.venv)
    names = [pin.split("==")[0] for pin in pins()] + list(SKIP)
    subprocess.run([str(python), "-c", SAY_VERSIONS, *names], check=False)  # what the venv holds, as a record
    sys.exit(0 if run_subset(python, args.only) else 1)


if __name__ == "__main__":
    main()
