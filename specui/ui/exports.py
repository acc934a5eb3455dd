"""JSON downloads of runs (the Chat tab's last run, the Teach tab's run): files in a temporary folder of the
process, removed when it exits; the newest EXPORTS_KEPT stay on disk (gradio serves its own copy of each). And what a
download needs for its run to be decoded again: the `python -m specui` command line of a Chat run (`command_line`)
and the versions that decoded it (`versions`)."""

from __future__ import annotations

import json
import platform
import re
import shlex
import shutil
import tempfile
import threading
import time
from pathlib import Path

from specui.text import holds_control

EXPORTS_KEPT = 16  # export files kept on disk per process
NAME_CHARS = 100  # a download's file name at most, in characters (file systems take 255 bytes)


def file_name(name: str) -> str:
    """`name` as a file name any browser and file system takes: each run of characters other than letters, digits,
    '.', '_' and '-' (a '/' or a newline of a preset's name, quotes, spaces) one '_'; a long one loses its middle
    (a run's file name ends with its seed)."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "specui"
    stem, dot, suffix = safe.rpartition(".")
    if not stem or len(suffix) > 8:  # no extension to keep
        stem, dot, suffix = safe, "", ""
    room = NAME_CHARS - len(dot + suffix)
    if len(stem) > room:
        stem = stem[: room // 2] + "_" + stem[len(stem) - (room - room // 2 - 1):]
    return stem + dot + suffix


def as_json(payload: dict) -> str:
    """`payload` as indented JSON, its text as written (Chinese, Arabic, emoji readable in the file, not \\u
    escapes); escaped only where it holds a lone surrogate, which UTF-8 cannot write."""
    try:
        text = json.dumps(payload, indent=1, allow_nan=False, ensure_ascii=False)
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = json.dumps(payload, indent=1, allow_nan=False)
    return text


def pastes_as_typed(word: str) -> bool:
    """Whether `word`, in quotes on a command line, is read back as written when the line is printed to a terminal or
    pasted into one: no control character but a line break. Quotes keep a shell from reading `$(...)` or a
    backtick, but a pasted Ctrl-C (U+0003) made the terminal drop the line typed so far, and the rest of the word
    after a line break ran as a command of its own; a DEL erased the quote before it, an ESC began a key sequence or
    ended a bracketed paste, and printed, escape sequences write to the terminal (a clipboard, a link). A tab too:
    pasted into a shell that reads a paste as typed (bash before 5.1, or bracketed paste off), it completed the quoted
    word, and a word naming one file (`'/etc/os-relea<tab>`) got its closing quote, so the rest ran as commands."""
    return not holds_control(word, allowed="\n")


def command_line(*, preset: str, settings, prompt: str, chats: bool, config: str | None = None) -> str | None:
    """The `python -m specui` command (shell-quoted) that decodes `prompt` again as a Chat run with `settings`
    (a `specui.ui.request.Settings`, its seed the one the run took) of `preset` decoded it alone (no conversation
    before it): the same tokens, greedy or sampled, on the same kind of device. `chats`: the preset wraps messages in a
    chat template (a base model reads no system prompt, which the command line refuses). `config`: the models.yaml
    the app read, where it was not specui's own. Compare mode's `--compare` decodes plainly after it, as the page's
    does; the arena has no command (each contestant is a `--drafter` of its own). None for a prompt or system prompt
    holding a NUL character, which no command line's argument carries, or another control character but a line break
    (`pastes_as_typed`)."""
    s = settings
    if not all(map(pastes_as_typed, (prompt, s.system if chats else "", preset, config or ""))):
        return None
    words = ["python", "-m", "specui", *(["--config", config] if config else []), "--preset", preset,
             "--drafter", str(s.drafter), "-k", str(s.num_draft_tokens), "--draft-confidence", repr(s.draft_confidence),
             "--max-new-tokens", str(s.max_new_tokens)]
    if s.adaptive:
        words.append("--adaptive")
    if s.tree_width > 1:
        words += ["--tree-width", str(s.tree_width), "--tree-nodes", str(s.tree_nodes)]
    if not s.greedy:  # a greedy run draws nothing, and the command line refuses a seed for one
        words += ["--temperature", repr(s.temperature), "--top-p", repr(s.top_p), "--top-k", str(s.top_k),
                  "--seed", str(s.seed)]
    if s.repetition_penalty != 1:
        words += ["--repetition-penalty", repr(s.repetition_penalty)]
    if chats and s.system:
        words.append(f"--system={s.system}")  # one word: argparse takes a value that starts with '-' for a flag
    if s.compare:
        words.append("--compare")
    line = shlex.join([*words, "--", prompt])  # "--": a prompt that starts with '-' is no flag
    return f"echo - | {line}" if prompt == "-" else line  # python -m specui reads stdin for a prompt of '-'


def versions() -> dict:
    """The versions that decoded a run: Python, specui, torch, transformers (another torch may round, or draw, another
    way)."""
    import torch
    import transformers

    import specui

    return {"python": platform.python_version(), "specui": specui.__version__, "torch": torch.__version__,
            "transformers": transformers.__version__}


class Exports:
    """One app's exports: `write` puts a payload in a fresh file and returns its path."""

    def __init__(self, prefix: str = "specui-export-"):
        self._prefix = prefix
        self._folder: tempfile.TemporaryDirectory | None = None
        self._guard = threading.Lock()  # visitors' runs end on threads of their own

    def write(self, payload: dict, filename: str) -> str:
        """`payload` (JSON-ready: `lesson.json_safe`) as indented JSON in a file named `filename` as `file_name`
        makes it safe (a folder per export keeps the name plain)."""
        with self._guard:
            if self._folder is None:
                self._folder = tempfile.TemporaryDirectory(prefix=self._prefix)
            root = Path(self._folder.name)
            folder = root / f"{time.monotonic_ns()}"
            folder.mkdir()
            path = folder / file_name(filename)
            path.write_text(as_json(payload), encoding="utf-8")
            for old in sorted(root.iterdir(), key=lambda p: int(p.name))[:-EXPORTS_KEPT]:
                shutil.rmtree(old, ignore_errors=True)
        return str(path)
