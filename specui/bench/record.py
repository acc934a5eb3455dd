"""What a `python -m specui.bench` report keeps beside its figures, and where it goes.

A number is only worth keeping if it can be traced back: `environment` records the machine, the threads and the
versions; `provenance` the seed, the date, specui's commit (and whether the checkout had changes), the prompts
file's SHA-256 and the command as typed. `show` prints the table (a reader that stops early, as `| head`, ends the
printing quietly, not the run: the JSON is still written), and `write_json` writes the whole report as one JSON object.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import specui
from specui.command_line import silence_stdout

ROOT = Path(specui.__file__).resolve().parent.parent  # a checkout's root: where its .git is


def environment(device) -> dict:
    """The machine, its threads and the versions the run used on `device` (a torch.device). This module imports no
    torch at its top: `json_path_problem` and `started` serve the flags' checks (specui.bench.flags), said at once."""
    import torch
    import transformers

    name = torch.cuda.get_device_name(device) if device.type == "cuda" else _cpu_name()
    return {"device": f"{device.type}: {name}", "torch_version": torch.__version__,
            "transformers_version": transformers.__version__, "python_version": platform.python_version(),
            "torch_threads": torch.get_num_threads(),
            **_product_threads(device),
            "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "")}  # `import specui` makes it PASSIVE


def _product_threads(device) -> dict:
    """The threads specui's native products are split over (1: on a GPU, or without the native kernels) and,
    when more than one, how often this process's large products were split and computed alone giving way."""
    from specui import native

    kernel = native.kernel() if device.type == "cpu" else None
    threads = native.product_threads() if kernel is not None else 1
    if threads < 2:
        return {"product_threads": threads}
    state = kernel.pool_state()
    return {"product_threads": threads, "product_splits": state["splits"],
            "products_alone_giving_way": state["alone_resting"]}


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return f"{line.split(':', 1)[1].strip()}, {os.cpu_count()} cores"
    except OSError:
        pass
    return f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores"


def started() -> dict:
    """When the run started (UTC) and the code it runs: taken as its flags are read, since a long run's checkout may
    move on (a commit, a checkout) before its report is written."""
    return {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"), **commit()}


def provenance(args, argv: list[str] | None) -> dict:
    """What the run was, beyond its settings: the seed, the date (UTC) it started, specui's version and the commit
    it ran (`started`), the prompts file's SHA-256 (the same name may hold other prompts later), and the command as
    typed."""
    record = {"seed": args.seed, "specui_version": specui.__version__,
              **(getattr(args, "started", None) or started())}
    if args.prompts:  # of the bytes its prompts were read from (`read_prompt_texts`), not of the file as it is now
        record["prompts_sha256"] = args.prompts_sha256
    command = argv if argv is not None else sys.argv[1:]
    return {**record, "command": "python -m specui.bench " + " ".join(command)}


def commit() -> dict:
    """specui's git commit and whether tracked files differ from it ({"commit": None} outside a git checkout)."""
    if not (ROOT / ".git").exists():
        return {"commit": None}
    try:
        head = _git("rev-parse", "HEAD")
        changed = bool(_git("status", "--porcelain", "--untracked-files=no"))
    except (OSError, subprocess.SubprocessError):
        return {"commit": None}
    return {"commit": head, "commit_modified": changed}


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=10,
                          check=True).stdout.strip()


def show(text: str) -> bool:
    """The table on stdout; False when a reader closed it (`| head`): that ends the printing, not the run (the JSON
    is still written, then the exit status is a pipe's: specui.command_line.READER_LEFT), and leaves no traceback."""
    try:
        print(text, flush=True)
    except BrokenPipeError:
        silence_stdout()
        return False
    return True


def json_path_problem(path: str) -> str | None:
    """Why a report could not be written to `path` (a folder, a missing or read-only parent), or None."""
    target = Path(path).expanduser()
    if target.is_dir():
        return "is a folder; give a file name"
    parent = target.parent
    if not parent.is_dir():
        return f"its folder {parent} does not exist"
    if not os.access(parent, os.W_OK) or (target.exists() and not os.access(target, os.W_OK)):
        return "cannot be written here (permissions)"
    return None


def write_json(path: str, report: dict) -> None:
    """The report as one JSON object; a file that cannot be written after all (a full disk) ends in one line."""
    try:
        Path(path).expanduser().write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    except OSError as e:
        raise SystemExit(f"python -m specui.bench: error: --json {path}: {e.strerror or e} "
                         "(the report is above)") from None
