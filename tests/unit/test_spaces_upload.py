"""The README's command that deploys to a Space (`hf upload`), checked against the installed Hub CLI: every flag it
gives is one `hf upload` takes, and it deletes what an earlier upload left. `hf upload` adds and replaces files but
deletes none unless `--delete` names them: a file a later version removed (a renamed module, an old asset) stayed on
the Space, where the app could still import or serve it."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def upload_commands() -> list[tuple[str, str]]:
    """(page:line, the line as written) of every `hf upload` the pages give."""
    return [(f"{page.name}:{number}", line.strip()) for page in PAGES
            for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1)
            if line.strip().startswith("hf upload ")]


def test_the_deploy_command_deletes_what_an_earlier_upload_left():
    from huggingface_hub.utils import filter_repo_objects  # what upload_folder matches --delete's patterns with

    commands = upload_commands()
    assert [where for where, _ in commands] and all(w.startswith("README.md:") for w, _ in commands), commands
    for where, line in commands:
        argv = shlex.split(line)
        patterns = [argv[i + 1] for i, word in enumerate(argv) if word == "--delete"]
        stale = ["old_module.py", "specui/ui/old.js", "assets/old-draft/model.safetensors"]  # no longer uploaded
        assert patterns and list(filter_repo_objects(stale, allow_patterns=patterns)) == stale, (where, line)
        for pattern in patterns:  # quoted: the shell would expand a bare * into the current folder's names
            assert re.search(rf"--delete (['\"]){re.escape(pattern)}\1", line), (where, line)


@pytest.mark.skipif(not shutil.which("hf"), reason="the Hub's CLI (hf) is not installed")
def test_every_flag_of_the_deploy_command_is_one_hf_upload_takes():
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1", "NO_COLOR": "1"}
    usage = subprocess.run(["hf", "upload", "--help"], capture_output=True, text=True, env=env, timeout=120)
    assert usage.returncode == 0, usage.stderr
    taken = set(re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", usage.stdout))
    for where, line in upload_commands():
        flags = {word for word in shlex.split(line) if word.startswith("--")}
        assert flags and flags <= taken, (where, sorted(flags - taken))
