"""app.py says a refusal as every entry point does, in argparse's form after the command's name as typed:
`app.py: error: ...` (`specui-app: error: ...` where installed), as its own flag mistakes read and as
`python -m specui.bench: error: ...` does. In the process: no server starts (refused before any model loads)."""

from __future__ import annotations

import socket

import pytest

import app


def test_the_apps_refusal_names_the_command_as_argparse_does(capsys, monkeypatch):
    with socket.socket() as s:  # the app checks its port first: another's server on 7860 must not answer for it
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    for name in ("app.py", "specui-app"):
        monkeypatch.setattr("sys.argv", [f"/somewhere/{name}"])
        assert app.main(["--preset", "nosuch", "--port", port]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"{name}: error: models.yaml: no preset named 'nosuch'") and err.count("\n") == 1, err


def test_the_apps_flag_mistake_is_one_line_that_says_where_the_flags_are(capsys, monkeypatch):
    """As python -m specui's and the benchmark's (command_line.OneLineParser): app.py printed its dozen-line usage
    above a misspelt flag; --help still gives the usage."""
    monkeypatch.setattr("sys.argv", ["/somewhere/app.py"])
    with pytest.raises(SystemExit) as stop:
        app.main(["--prot", "3"])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err == "app.py: error: unrecognized arguments: --prot 3; see app.py --help\n", err
    with pytest.raises(SystemExit) as stop:
        app.main(["--help"])
    assert stop.value.code == 0 and capsys.readouterr().out.startswith("usage: app.py")
