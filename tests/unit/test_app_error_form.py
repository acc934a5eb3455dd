"""app.py says a refusal as every entry point does, in argparse's form after the command's name as typed:
`app.py: error: ...` (`specui-app: error: ...` where installed), as its own flag mistakes read and as
`python -m specui.bench: error: ...` does. In the process: no server starts (refused before any model loads)."""

from __future__ import annotations

import socket

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
