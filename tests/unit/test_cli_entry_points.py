"""The command lines as a user meets them: `python -m specui` and `python -m specui.bench` say a flag's mistake in one
line (`command_line.OneLineParser`), take the same drafter names and labels, say the same ranges in --help, and the
benchmark's header reads as English for one prompt or an 8-token verify. No model: flags and report dicts only."""

from __future__ import annotations

import re

import pytest

from specui.bench import flags as bench_flags
from specui.bench.report import format_table
from specui import terminal
from tests.helpers import refused


@pytest.mark.parametrize("argv, said", [
    (["--nonsense"], "python -m specui.bench: error: unrecognized arguments: --nonsense"),
    (["-k"], "python -m specui.bench: error: argument -k/--num-draft-tokens: expected one argument"),
    (["--drafter", "draft modle"], "python -m specui.bench: error: argument --drafter: invalid choice: 'draft modle'"),
])
def test_the_benchmarks_flag_mistakes_are_one_line_as_the_terminals(argv, said, capsys):
    """argparse printed the benchmark's usage, 14 lines, above its mistake; python -m specui says the line alone."""
    assert refused(bench_flags.parse_args, argv, capsys).startswith(said)
    assert refused(terminal.parse_args, ["--nonsense"], capsys) == \
        "python -m specui: error: unrecognized arguments: --nonsense; see python -m specui --help"


@pytest.mark.parametrize("parse, prog, argv", [(bench_flags.parse_args, "python -m specui.bench", []),
                                               (terminal.parse_args, "python -m specui", ["x"])])
def test_argparses_own_mistakes_say_where_the_flags_are_listed(parse, prog, argv, capsys):
    """The usage argparse printed above a misspelt flag listed the flags; its one line says where they are instead. A
    mistake found in the flags once read says what to give, and no more."""
    for wrong in (["--drafters", "all"], ["--tree-width", "two"], ["--color", "maybe"] if argv else ["-k"]):
        assert refused(parse, [*wrong, *argv], capsys).endswith(f"; see {prog} --help")
    assert refused(parse, ["--temperature", "9", *argv], capsys) == \
        f"{prog}: error: --temperature must be a number from 0 (greedy) to 5, got 9"


@pytest.mark.parametrize("given, name", [("draft model", "model"), ("EAGLE", "eagle"),
                                         ("prompt lookup", "prompt_lookup"), ("model_lookup", "model_lookup"),
                                         ("all", "all"), ("ALL", "all"), (" All", "all")])
def test_the_benchmark_takes_the_apps_drafter_labels_as_the_terminal_does(given, name):
    assert bench_flags.parse_args(["--drafter", given]).drafter == name


def test_the_terminals_drafter_all_points_to_the_race_of_all_drafters(capsys):
    for given in ("all", "All"):
        assert refused(terminal.parse_args, ["--drafter", given, "x"], capsys) == (
            f"python -m specui: error: --drafter {given}: a reply is decoded by one drafter; to race every drafter of "
            "a preset, run python -m specui.bench --drafter all, or the app's Arena")


def help_of(parse, capsys) -> str:
    with pytest.raises(SystemExit):
        parse(["--help"])
    return re.sub(r"\s+", " ", capsys.readouterr().out)


def test_the_benchmarks_help_gives_the_ranges_and_names_the_terminals_does(capsys):
    """--tree-width, --tree-nodes and --repetition-penalty gave no range in the benchmark's --help, --json's value was
    'JSON' and the drafter's labels were not taken."""
    bench, term = help_of(bench_flags.parse_args, capsys), help_of(terminal.parse_args, capsys)
    for said in ("--tree-width W token trees: children per expanded node, 1 to 8",
                 "--tree-nodes N token trees: 0 = the static tree to depth K, N (up to 256)",
                 "--repetition-penalty P transformers' repetition penalty on the target's logits, up to 10",
                 "--json FILE", "--draft-confidence C", "or the app's labels: 'draft model',"):
        assert said in bench, said
    for said in ("--tree-width W", "1 to 8", "up to 256", "--repetition-penalty P", "up to 10", "--json FILE",
                 "--draft-confidence C", "or the app's labels ('draft model',"):
        assert said in term, said


class Figures(dict):
    """A one-drafter report by hand: the fields the header reads, any other figure 1.0."""

    def __missing__(self, key):
        return 1.0


@pytest.mark.parametrize("prompts, repeats, k, said, verify", [
    (1, 1, 7, "1 prompt x 1 repeat", "an 8-token verify forward"),
    (8, 3, 4, "8 prompts x 3 repeats", "a 5-token verify forward"),
    (2, 1, 10, "2 prompts x 1 repeat", "an 11-token verify forward"),
])
def test_the_benchmarks_header_reads_as_english(prompts, repeats, k, said, verify):
    """It read '1 prompts x 1 repeats' and 'a 8-token verify forward'."""
    table = format_table(Figures(drafter="model", num_draft_tokens=k, draft_confidence=0.0, preset="p",
                                 temperature=0.0, max_new_tokens=4, num_prompts=prompts, repeats=repeats, device="cpu",
                                 torch_threads=1, rows=[]))
    assert f"(EOS ignored), {said}\n" in table and f"medians); {verify} costs" in table, table
