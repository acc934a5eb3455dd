"""The commands README.md and docs/*.md give for `python -m specui`, `python -m specui.train` (the stdlib pair's
trainer), `python -m specui.train.chat` (the chat draft's) and `python -m specui.bench` are taken by those commands'
own checks as written: a reader who copies one is not refused. The checks run on the real repository (its assets/ and
models.yaml) and start no work: the benchmark's are its flags' and what its preset makes of them (`refuse_ignored`),
before any model loads; the chat trainer's are all of its own (`chat.parse_args`), with the folders of answers a
command names (placeholders: FOLDERS, DIR) a real one. The flags of `python app.py` (and `specui-app`),
`python -m specui.verify_cost` and `python -m specui.train.greedy_labels` are the ones their --help lists."""

import contextlib
import importlib
import io
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from specui import terminal
from specui.bench import cli as bench_cli
from specui.presets import load_config
from specui.train import chat as train_chat
from specui.train import cli as train_cli

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
COMMAND = re.compile(r"python -m (specui(?:\.train\.chat|\.train|\.bench)?)((?: +-[^`|#]*)?)(?=[`|#]|$)")
CODE_SPAN = re.compile(r"`([^`]+)`")


def bench(argv):
    args = bench_cli.parse_args(argv)
    if not args.target:
        bench_cli.refuse_ignored(args, load_config(args.config).get(args.preset))


def chat(argv):
    """`python -m specui.train.chat ARGV` read as its own checks read it, with the folders it names real ones: the
    answers --answers reads one folder of answers (its files' names are all the checks read), the folder it writes
    (--write-answers, step 1's, or --out, step 2's) a new one. A command the docs give as step 2's options alone
    (`--init-draft ... --grow 2`, no step named) reads answers."""
    with tempfile.TemporaryDirectory() as folder:
        answers, given = Path(folder) / "answers", dict(zip(argv, argv[1:]))
        answers.mkdir()
        (answers / "answers-00000.pt").touch()
        argv = [str(answers) if before == "--answers" else str(Path(folder) / "written") if before in
                ("--write-answers", "--out") else arg for before, arg in zip(["", *argv], argv)]
        if "--write-answers" not in given:
            argv += [*([] if "--answers" in given else ["--answers", str(answers)]),
                     *([] if "--out" in given else ["--out", str(Path(folder) / "written")])]
        train_chat.parse_args(argv, create=False)


PARSERS = {"specui": terminal.parse_args, "specui.train": lambda argv: train_cli.parse_args(argv, create=False),
           "specui.train.chat": chat, "specui.bench": bench}


def code(text):
    """(line number, text) of every code block's line and every inline code span (one wrapped over lines joined)."""
    fenced = False
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
        elif fenced:
            yield number, line
    prose = re.sub(r"^\s*(```|~~~).*?^\s*(```|~~~)", lambda m: "\n" * m.group(0).count("\n"), text,
                   flags=re.M | re.S)
    for span in CODE_SPAN.finditer(prose):
        yield prose.count("\n", 0, span.start()) + 1, " ".join(span.group(1).split())


def documented():
    """(page:line, module, argv) of every such command given with flags; a trailing comment cut, an optional flag
    written `[--flag VALUE]` given."""
    for page in PAGES:
        for number, text in code(page.read_text(encoding="utf-8")):
            for match in COMMAND.finditer(text.strip()):
                argv = shlex.split(match.group(2).replace("[", "").replace("]", ""))
                if argv and argv[-1].endswith(")") and "(" not in argv[-1]:  # a command given in parentheses
                    argv[-1] = argv[-1][:-1]
                if argv and "--help" not in argv and "-h" not in argv and "..." not in argv:
                    yield f"{page.name}:{number}", match.group(1), argv


COMMANDS = list(documented())


def test_the_documented_commands_are_found():
    assert {module for _, module, _ in COMMANDS} == set(PARSERS)
    assert ("stdlib-pair.md:27", "specui.train", ["--out", "assets", "--overwrite"]) in COMMANDS
    assert ("chat-model.md:148", "specui.train.chat", ["--answers", "FOLDERS", "--hard-labels"]) in COMMANDS
    assert ("drafters.md:282", "specui.train.chat", ["--write-answers", "DIR"]) in COMMANDS


@pytest.mark.parametrize(("where", "module", "argv"), COMMANDS, ids=[where for where, _, _ in COMMANDS])
def test_a_documented_command_is_taken_as_written(where, module, argv, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)  # the commands are run from the repository's root
    try:
        PARSERS[module](argv)
    except SystemExit as refused:
        pytest.fail(f"{where}: python -m {module} {shlex.join(argv)} is refused (exit {refused.code}): "
                    f"{capsys.readouterr().err.strip().splitlines()[-1:]}")


# The commands whose flags the docs give and whose parser is built as they run: (their --help's argv, the words)
BY_HELP = {("app.py",): r"python app\.py|specui-app", ("-m", "specui.verify_cost"): r"python -m specui\.verify_cost",
           ("-m", "specui.train.greedy_labels"): r"python -m specui\.train\.greedy_labels"}
FLAG = re.compile(r"(?<![\w-])--[a-z][\w-]*")


def help_flags(argv):
    """The flags a command's --help lists as options (its lines '  -k K, --flag K   what it does': a flag named only
    in another's help text is not one it takes). A module's main runs here, with its imports already made (seconds
    fewer than a process of its own); app.py, no module, in a process of its own."""
    if argv[0] == "-m":
        shown = io.StringIO()
        with contextlib.redirect_stdout(shown), pytest.raises(SystemExit):
            importlib.import_module(argv[1]).main(["--help"])
        shown = shown.getvalue()
    else:
        shown = subprocess.run([sys.executable, *argv, "--help"], cwd=ROOT, capture_output=True, text=True,
                               timeout=120, check=True).stdout
    return {flag for line in shown.splitlines() if line.startswith("  -")
            for flag in FLAG.findall(line.split("  ")[1])}


@pytest.mark.parametrize("argv", list(BY_HELP), ids=[" ".join(argv) for argv in BY_HELP])
def test_a_documented_command_names_flags_it_takes(argv):
    """`python app.py ...` (and `specui-app`), `python -m specui.verify_cost ...` and `python -m
    specui.train.greedy_labels ...` as README.md and docs/*.md give them: each flag is one the command's --help lists
    (a flag renamed or gone cannot stay behind in the docs)."""
    command = re.compile(rf"(?:{BY_HELP[argv]})((?: +-[^`|#]*)?)(?=[`|#]|$)")
    given = [(f"{page.name}:{number}", flag) for page in PAGES
             for number, text in code(page.read_text(encoding="utf-8"))
             for match in command.finditer(text.strip()) for flag in FLAG.findall(match.group(1))]
    assert given, f"the docs give no {argv[-1]} command with flags: BY_HELP can lose it"
    taken = help_flags(argv)
    assert [(where, flag) for where, flag in given if flag not in taken] == []
