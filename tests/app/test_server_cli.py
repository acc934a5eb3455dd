"""`python app.py` given an address it cannot listen on: one line naming the option, before any model loads (Gradio
said "Cannot find empty port" for a host name that resolves nowhere or an address of another machine too, after
the preset had loaded)."""

import os
import socket
import subprocess
import sys

import pytest

from tests.helpers import ROOT


def run_app(*args, env=None):
    return subprocess.run([sys.executable, "app.py", "--preset", "bundled", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, env={**os.environ, **(env or {})})


def refused(out) -> str:
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    assert "Loading" not in out.stdout + out.stderr  # said before the model loads
    assert out.stderr.strip().count("\n") == 0, out.stderr
    return out.stderr.strip()


def test_a_port_in_use_is_said_as_such():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        line = refused(run_app("--port", str(port)))
    assert line == (f"app.py: error: port {port} is in use on 127.0.0.1 (another program listens there): "
                    "choose another with --port")


@pytest.mark.parametrize("host, why", [("no-such-host.invalid", "is no address this machine can listen on"),
                                       ("a..b", "is no address this machine can listen on (not a host name)"),
                                       ("192.0.2.1", "is not an address of this machine")])  # TEST-NET-1: nobody's
def test_a_bad_host_names_the_option(host, why):
    line = refused(run_app("--host", host, "--port", "7861"))
    assert line.startswith(f"app.py: error: --host {host!r} {why}") and "0.0.0.0 every network interface" in line
    line = refused(run_app(env={"GRADIO_SERVER_NAME": host}))  # as a Space or a service file sets it
    assert line.startswith(f"app.py: error: $GRADIO_SERVER_NAME {host!r} {why}")
