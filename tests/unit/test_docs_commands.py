"""The commands README.md and docs/*.md give for `python -m specui` and `python -m specui.train` (the stdlib pair's
trainer) are taken by those commands' own argument checks as written: a reader who copies one is not refused. The
checks run on the real repository (its assets/ included) and start no work."""

import re
import shlex
from pathlib import Path

import pytest

from specui import terminal
from specui.train import cli as train_cli

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
PARSERS = {"specui": terminal.parse_args, "specui.train": lambda argv: train_cli.parse_args(argv, create=False)}
COMMAND = re.compile(r"python -m (specui(?:\.train)?) (-[^`|#\n]*)")


def documented():
    """(page:line, module, argv) of every such command, in code spans and code blocks alike; a trailing comment cut."""
    for page in PAGES:
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            for match in COMMAND.finditer(line):
                argv = shlex.split(match.group(2))
                if "--help" not in argv and "-h" not in argv:
                    yield f"{page.name}:{number}", match.group(1), argv


COMMANDS = list(documented())


def test_the_documented_commands_are_found():
    assert {module for _, module, _ in COMMANDS} == set(PARSERS)


@pytest.mark.parametrize(("where", "module", "argv"), COMMANDS, ids=[where for where, _, _ in COMMANDS])
def test_a_documented_command_is_taken_as_written(where, module, argv, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)  # the commands are run from the repository's root
    try:
        PARSERS[module](argv)
    except SystemExit as refused:
        pytest.fail(f"{where}: python -m {module} {shlex.join(argv)} is refused (exit {refused.code}): "
                    f"{capsys.readouterr().err.strip().splitlines()[-1:]}")
