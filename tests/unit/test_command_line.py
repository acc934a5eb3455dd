"""The command lines' mistakes are one line, not a traceback: an unknown preset, a models.yaml or model folder that
is not there (every `python -m specui...` entry point, through specui.command_line), and the chat recipe's paths,
checked before the target loads."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from specui.command_line import run
from specui.presets import ConfigError
from tests.helpers import ROOT


def _one_line_error(args: list[str], prog: str) -> str:
    out = subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr  # a usage mistake, as app.py's (was 1)
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{prog}: error: "), out.stderr
    return lines[0]


@pytest.mark.parametrize("args, prog", [
    (["specui.bench", "--preset", "nope"], "python -m specui.bench"),
    (["specui.verify_cost", "--preset", "nope"], "python -m specui.verify_cost"),
    (["specui.train", "heads", "--preset", "nope"], "python -m specui.train heads"),
    (["specui.train", "exit", "--preset", "nope", "--answers", "ANSWERS"], "python -m specui.train exit"),
])
def test_an_unknown_preset_is_one_line_with_the_known_ones(args, prog, tmp_path):
    (tmp_path / "answers-0.pt").touch()  # a folder of answers (checked before the preset since 567823f)
    args = [str(tmp_path) if a == "ANSWERS" else a for a in args]
    assert "no preset named 'nope'; known presets: smollm2-chat" in _one_line_error(args, prog)


def test_a_missing_config_is_one_line(tmp_path):
    line = _one_line_error(["specui.bench", "--config", str(tmp_path / "none.yaml")], "python -m specui.bench")
    assert "none.yaml: file not found" in line


# `python -m MODULE ARGS...`, then on its exit: "exit STATUS [the heavy modules it imported]" as stderr's last line
HEAVY_AT_EXIT = ("import runpy, sys\nmodule = sys.argv[1]\nsys.argv = [module, *sys.argv[2:]]\ntry:\n"
                 "    runpy.run_module(module, run_name='__main__', alter_sys=True)\nexcept SystemExit as e:\n"
                 "    heavy = sorted({'torch', 'transformers', 'gradio'} & set(sys.modules))\n"
                 "    print('exit', e.code, heavy, file=sys.stderr)")


def heavy_at_exit(module: str, argv: list[str]) -> tuple[str, str]:
    """(what `python -m module argv` said on stderr before its exit, the line of its status and heavy imports)."""
    out = subprocess.run([sys.executable, "-c", HEAVY_AT_EXIT, module, *argv], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    said, _, status = out.stderr.strip().rpartition("\n")
    return out.stdout + said, status


IN_MODELS_YAML = "Preset 'gone': the target folder MISSING has no config.json. Check the path in models.yaml"


@pytest.mark.parametrize("module, argv, said", [
    ("specui.bench", ["--target", "MISSING"], "Preset 'command-line': the target folder MISSING has no config.json. "
                                               "Check the path given on the command line (--target, --draft)."),
    ("specui.bench", ["--config", "YAML"], IN_MODELS_YAML), ("specui", ["--config", "YAML", "hi"], IN_MODELS_YAML),
    ("specui.bench", ["--preset", "nope"], "no preset named 'nope'; known presets: "),
    ("specui.bench", ["--preset", "bundle"], "no preset named 'bundle'; known presets: "),
    ("specui", ["--preset", "bundle", "hi"], "no preset named 'bundle'; known presets: "),
])
def test_a_preset_refused_before_its_models_load_is_refused_before_torch_loads(module, argv, said, tmp_path):
    """A model folder that is not there (named by --target or a models.yaml's preset), or a preset that is not there,
    is refused in one line with exit status 2 and neither torch nor transformers imported: specui.command_line's
    check_preset imported specui.loading (torch) for the check, the benchmark checked only after importing its run
    (torch, transformers) and `run` imported the errors it ends in one line from modules that import torch. A typo
    of a preset's name is answered with the closest one by both commands (presets.Config.get), where the terminal
    loaded torch for it (load_engine said it) and the benchmark had none."""
    missing = str(tmp_path / "no-such-model")
    (tmp_path / "models.yaml").write_text(f"default: gone\npresets:\n  gone:\n    target: {missing}\n")
    argv = [{"MISSING": missing, "YAML": str(tmp_path / "models.yaml")}.get(a, a) for a in argv]
    stderr, status = heavy_at_exit(module, argv)
    assert stderr.startswith(f"python -m {module}: error: ") and "\n" not in stderr, stderr  # one line
    assert said.replace("MISSING", missing) in stderr, stderr
    assert stderr.endswith(". Did you mean 'bundled'?") == ("bundle" in argv), stderr
    assert status == "exit 2 []", stderr


def test_a_bad_prompts_file_is_one_line_in_the_commands_form(tmp_path):
    """Refused by the command line as any flag's mistake (argparse's usage, then one line naming --prompts; exit 2
    since 296cfbf, where this test still expected exit 1)."""
    def refused(path) -> str:
        out = subprocess.run([sys.executable, "-m", "specui.bench", "--preset", "bundled", "--prompts", str(path)],
                             cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
        return out.stderr.strip().splitlines()[-1]

    bad = tmp_path / "prompts.jsonl"
    bad.write_text('{"prompt": "def f():"}\n{"text": "x"}\n')
    assert refused(bad) == (f'python -m specui.bench: error: --prompts {bad}:2: expected a JSON object '
                            '{"prompt": "<non-empty text>"}')
    missing = tmp_path / "none.jsonl"
    assert refused(missing).startswith(f"python -m specui.bench: error: --prompts {missing}: cannot be read")


def test_run_ends_only_the_users_errors_and_keeps_a_bugs_traceback(capsys):
    def bad_config(argv):
        raise ConfigError("models.yaml: no preset named 'x'")

    with pytest.raises(SystemExit) as exit_:
        run(bad_config, "prog")
    assert exit_.value.code == 2  # a usage mistake (specui.command_line.exit_status)
    assert capsys.readouterr().err == "prog: error: models.yaml: no preset named 'x'\n"

    def bug(argv):
        raise KeyError("a bug")

    with pytest.raises(KeyError):
        run(bug, "prog")
    assert run(lambda argv: argv, "prog", ["--x"]) == ["--x"]


def test_the_chat_recipes_paths_are_checked_before_the_target_loads(tmp_path, capsys):
    from specui.train.chat import parse_args

    def refused(argv: list[str]) -> str:
        with pytest.raises(SystemExit) as exit_:
            parse_args(argv)
        assert exit_.value.code == 2
        return capsys.readouterr().err.strip().splitlines()[-1]

    assert "--gguf" in refused(["--gguf", str(tmp_path / "none.gguf"), "--write-answers", str(tmp_path / "w")])
    assert f"{tmp_path / 'none'} is not a folder" in refused(["--answers", str(tmp_path / "none")])
    assert "no answers-*.pt or sampled-*.pt files" in refused(["--answers", str(tmp_path)])
    (tmp_path / "answers-000.pt").touch()
    assert "not a saved chat draft" in refused(["--answers", f"{tmp_path}:2", "--init-draft", str(tmp_path)])
    args = parse_args(["--answers", f"{tmp_path}:2", "--init-draft", str(ROOT / "assets" / "smollm2-draft")])
    assert args.answers == f"{tmp_path}:2"


@pytest.mark.parametrize("argv, says", [
    (["--seed", "-5"], "--seed must be"), (["--tree-width", "0"], "--tree-width must be"),
    (["--draft-confidence", "1.5"], "--draft-confidence must be"),
    (["--tree-nodes", "5"], "--tree-nodes 5 needs a tree: set --tree-width to 2 or more"),
])
def test_the_benchmarks_ranges_are_refused_before_any_model_loads(argv, says, capsys):
    from specui.bench.cli import parse_args

    with pytest.raises(SystemExit) as exit_:
        parse_args(argv)
    assert exit_.value.code == 2 and says in capsys.readouterr().err
    assert parse_args(["--tree-width", "4", "--tree-nodes", "16", "--num-draft-tokens", "6"]).tree_nodes == 16


@pytest.mark.parametrize("printed", ["'one line'", "'x' * 200_000"])
def test_a_reader_that_left_ends_any_command_quietly_with_status_141(printed):
    """Every entry point runs under `run`: stdout's reader gone (`| head`), whether the print fails at once (more than
    a pipe holds) or only at the final flush (a short, buffered reply), is exit status 141 (128 + SIGPIPE, as a shell
    reports a writer whose reader left) without a word; it was a BrokenPipeError traceback, or Python's `Exception
    ignored ... BrokenPipeError` and status 120."""
    code = f"from specui.command_line import run; run(lambda argv: print({printed}), 'prog')"
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    proc.stdout.close()  # the reader is gone before a line is written
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == 141 and err == "", err


def test_the_help_says_a_gguf_file_is_a_model_too(capsys):
    """--target and --draft take a .gguf file as well (specui.presets, README's Configuration); the benchmark's and
    app.py's --help said only 'a local folder or a Hugging Face Hub id'."""
    from specui.bench.cli import parse_args

    with pytest.raises(SystemExit):
        parse_args(["--help"])
    bench = capsys.readouterr().out
    app = subprocess.run([sys.executable, "app.py", "--help"], cwd=ROOT, capture_output=True, text=True,
                         timeout=120).stdout
    for text in (" ".join(bench.split()), " ".join(app.split())):
        assert "a local folder, a .gguf file or a Hugging Face Hub id" in text, text
        assert "a folder, a .gguf file or a Hub id" in text, text


@pytest.mark.slow
def test_the_apps_reader_that_left_is_not_a_port_it_cannot_serve_on():
    """`python app.py | head -1` (the URL, then the reader gone): exit status 141 as every command, without a word;
    it said 'error: cannot serve on 127.0.0.1:PORT (choose another with --port): [Errno 32] Broken pipe'. After the
    URL line only the preload's progress lines are printed, from its own thread: a failed one there stopped the
    preload ('could not preload preset bundled: ... Broken pipe') and the app served on."""
    import socket

    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "app.py", "--preset", "bundled", "--port", str(port)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        proc.stdout.readline()  # `* Running on local URL: ...` (or the preload's first line)
        proc.stdout.close()
        try:
            status = proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            status = "still serving after 120 s"
    finally:
        proc.kill()
    err = proc.stderr.read()
    assert status == 141 and not any(word in err for word in ("cannot serve", "Traceback", "preload")), (status, err)


@pytest.mark.parametrize("argv, status, said", [
    (["--help"], 0, "examples:"),
    (["--drafter", "nope", "hi"], 2, "--drafter 'nope': no such drafter"),
    (["--top-p", "0.5", "hi"], 2, "--top-p and --top-k shape sampled decoding"),
    (["--seed", "3", "hi"], 2, "--seed with greedy decoding"),
    (["--temperature", "1", "--seed", "-1", "hi"], 2, "--seed must be an integer from 0"),
    (["--max-new-tokens", "0", "hi"], 2, "--max-new-tokens must be"),
    (["--json", "/nonexistent-folder/run.json", "hi"], 2, "--json /nonexistent-folder/run.json: its folder"),
])
def test_the_terminals_help_and_flag_mistakes_answer_before_torch_loads(argv, status, said):
    """`python -m specui --help` imported torch and transformers (seconds) before it printed: specui.command_line
    imported the errors it ends in one line from the engine's modules, and specui.terminal the benchmark's CLI. Its
    --help and the flags' mistakes, a settings range and --json's folder too (worded and checked by the benchmark's
    torch-free specui.bench.flags and record), now answer with neither loaded."""
    output, exit_line = heavy_at_exit("specui", argv)
    assert said in output, output
    assert exit_line == f"exit {status} []", output



@pytest.mark.parametrize("command", ["specui.terminal", "specui.bench.flags"])
def test_every_number_flag_is_refused_out_of_range_in_one_wording(command, monkeypatch, capsys):
    """python -m specui's and the benchmark's flags that take a number, each given one far below its range: refused in
    specui.command_line.Range's words, naming the flag. --top-p and --repetition-penalty said DecodeSettings' older
    `must be in (0, 1] (1 disables it), got -1e+30`, the benchmark's counts `must be >= 1`."""
    import argparse
    import importlib

    numeric, add = [], argparse.ArgumentParser.add_argument

    def noted(self, *names, **options):
        if options.get("type") in (int, float):
            numeric.append((names[-1], options["type"]))
        return add(self, *names, **options)

    monkeypatch.setattr(argparse.ArgumentParser, "add_argument", noted)
    parse_args = importlib.import_module(command).parse_args
    with pytest.raises(SystemExit):
        parse_args(["--no-such-flag"])  # the parser made, its flags noted
    flags, prompt = list(numeric), ["x"] if command == "specui.terminal" else []
    for flag, kind in flags:
        low = "-99999999999999999999" if kind is int else "-1e30"
        capsys.readouterr()
        with pytest.raises(SystemExit) as exit_:
            parse_args([*([] if flag == "--temperature" else ["--temperature", "1"]), f"{flag}={low}", *prompt])
        line = capsys.readouterr().err.strip().splitlines()[-1]
        assert exit_.value.code == 2 and re.fullmatch(
            rf"python -m specui(\.bench)?: error: {flag} must be {'an integer' if kind is int else 'a number'} "
            rf"(from|above) .*, got {re.escape(low if kind is int else '-1e+30')}", line), line
    assert {"--top-p", "--repetition-penalty", "--max-new-tokens", "--seed", "--tree-nodes"} <= {f for f, _ in flags}
