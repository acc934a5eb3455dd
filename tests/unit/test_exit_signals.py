"""`python app.py` stopped by Ctrl-C (SIGINT) or SIGTERM exits with the shell's status for the signal, 130 or 143, as
the other commands do (specui.command_line): it exited 0, as if it had finished, for Ctrl-C. A real server, stopped
once it serves."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys

import pytest

from tests.helpers import ROOT


@pytest.mark.slow
@pytest.mark.parametrize("signum, status", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_the_app_stopped_by_a_signal_exits_with_the_shells_status_for_it(signum, status):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    app = subprocess.Popen([sys.executable, "app.py", "--preset", "bundled", "--port", port], cwd=ROOT,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        said = []
        for line in app.stdout:  # gradio's "Running on local URL: ..." once it serves
            said.append(line)
            if "Running on" in line:
                break
        assert "Running on" in "".join(said), "".join(said)
        app.send_signal(signum)
        rest = app.communicate(timeout=60)[0]
    finally:
        app.kill()
    assert app.returncode == status and "Traceback" not in rest, rest
