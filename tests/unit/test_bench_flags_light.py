"""`python -m specui.bench`'s flags are read before torch loads (specui.bench.flags): --help, a setting out of range
and a --json path that cannot be written answer in one line with neither torch nor transformers imported; a sound
command goes on to the run (a preset that does not exist is said there, by the run's own check)."""

from __future__ import annotations

import pytest

from tests.helpers import ROOT
from tests.unit.test_command_line import heavy_at_exit


def bench(*argv: str) -> tuple[str, str]:
    """The command's output and its last line: `exit STATUS [the heavy modules it had imported]`."""
    return heavy_at_exit("specui.bench", list(argv))


@pytest.mark.parametrize("argv, status, said", [
    (["--help"], 0, "--json FILE"),
    (["--temperature", "1", "--seed", "-1"], 2, "--seed must be an integer from 0"),
    (["--tree-width", "0"], 2, "--tree-width must be an integer from 1"),
    (["--json", "/nonexistent-folder/report.json"], 2, "--json /nonexistent-folder/report.json: its folder"),
])
def test_the_benchmarks_flag_mistakes_answer_before_torch_loads(argv, status, said):
    """They loaded torch first (seconds): the checks lived in specui.bench.cli and record, which import it on top."""
    output, last = bench(*argv)
    assert said in output, output
    assert last == f"exit {status} []", output


def test_the_help_gives_the_draft_confidence_flags_range(capsys):
    """--draft-confidence takes the app's 0 to 0.95 since 62410ea (it took any below 1): the benchmark's --help says
    so, as python -m specui's does, where it gave no range."""
    import re

    from specui.bench.flags import parse_args

    with pytest.raises(SystemExit):
        parse_args(["--help"])
    said = re.sub(r"\s+", " ", capsys.readouterr().out)
    assert re.search(r"--draft-confidence C a round stops drafting [^-]*, 0 to 0\.95;", said), said


def test_sound_flags_go_on_to_the_run():
    """In this process (torch is no matter here): the flags read once, then the run's own check of the preset."""
    from specui.bench.__main__ import main
    from specui.presets import ConfigError

    with pytest.raises(ConfigError, match="no-such-preset"):
        main(["--preset", "no-such-preset"])


def test_the_layout_places_every_module_of_the_benchmark():
    """docs/layout.md's bench/ entry names each of its modules: flags.py (new), prompts.py and record.py were not on
    the map."""
    import re

    layout = (ROOT / "docs" / "layout.md").read_text(encoding="utf-8")
    entry = re.search(r"^  bench/ .*?(?=^  \S)", layout, re.MULTILINE | re.DOTALL)[0]
    modules = sorted(path.stem for path in (ROOT / "specui" / "bench").glob("*.py") if not path.stem.startswith("__"))
    assert modules and [name for name in modules if not re.search(rf"\b{name}\b", entry)] == []
