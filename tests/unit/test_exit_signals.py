"""`python app.py` stopped by Ctrl-C (SIGINT) or SIGTERM exits with the shell's status for the signal, 130 or 143, as
the other commands do (specui.command_line): it exited 0, as if it had finished, for Ctrl-C. A real server, stopped
once it serves; as it serves, it says where, and not gradio's hint "To create a public link, set `share=True` in
`launch()`", which a local user does not need (--share is in its --help) and a Space never shows."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

import httpx
import pytest

from tests.helpers import ROOT


def answers(page: str, within: float = 120) -> bool:
    """Whether `page` answers 200 within `within` seconds, asked again until then."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            if httpx.get(page, timeout=30).status_code == 200:
                return True
        except httpx.HTTPError:
            time.sleep(0.1)
    return False


@pytest.mark.slow
@pytest.mark.parametrize("signum, status", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_the_app_stopped_by_a_signal_exits_with_the_shells_status_for_it(signum, status):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    # each line as printed, as a terminal shows it (a pipe's buffer, not flushed at a Ctrl-C, lost gradio's hint)
    app = subprocess.Popen([sys.executable, "app.py", "--preset", "bundled", "--port", port], cwd=ROOT,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        said = []
        for line in app.stdout:  # "* Running on local URL:  http://...", once it serves
            said.append(line)
            if "Running on" in line:
                break
        assert f"* Running on local URL:  http://127.0.0.1:{port}" in "".join(said), "".join(said)
        # gradio said where it serves, asked its own server for its startup events, then gave its hint: the page
        # answered is the server up, the hint's moment past (a signal at once could come before it)
        assert answers(f"http://127.0.0.1:{port}/")
        app.send_signal(signum)
        said.append(app.communicate(timeout=60)[0])
    finally:
        app.kill()
    out = "".join(said)
    assert app.returncode == status and "Traceback" not in out, out
    assert "public link" not in out and "share=True" not in out, out


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_the_app_was_started_to_ignore_stays_ignored(signum):
    """`python app.py &` in a script starts the app with Ctrl-C ignored (a shell's background job), a supervisor may
    ignore SIGTERM: Python leaves an ignored SIGINT ignored, and stop_signals took it back (43c877c), so the Ctrl-C
    meant for the script stopped the app it had left serving. A real signal, sent to this process."""
    from specui.command_line import stop_signals

    before = signal.signal(signum, signal.SIG_IGN)
    try:
        with stop_signals() as stopped:
            os.kill(os.getpid(), signum)
            time.sleep(0.05)  # the handler, had there been one, runs here
        assert stopped == [] and signal.getsignal(signum) is signal.SIG_IGN
    finally:
        signal.signal(signum, before)


@pytest.mark.slow
def test_ctrl_c_before_the_app_serves_is_one_line_and_130(tmp_path):
    """Ctrl-C in the seconds before the server runs (torch's and gradio's imports, the checks before loading) printed
    a traceback from wherever the import was (numpy, jinja2), where every other command says one line and exits 130.
    The app is held at a known point: reading its --config, a pipe that nobody writes yet."""
    config = tmp_path / "models.yaml"
    os.mkfifo(config)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    app = subprocess.Popen([sys.executable, "app.py", "--config", str(config), "--port", port], cwd=ROOT,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    writer = None
    try:
        while writer is None and app.poll() is None:  # opened without blocking once the app opens it to read
            try:
                writer = os.open(config, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:  # ENXIO: no reader yet
                time.sleep(0.1)
        app.send_signal(signal.SIGINT)
        out, err = app.communicate(timeout=60)
    finally:
        app.kill()
        if writer is not None:
            os.close(writer)
    assert app.returncode == 130 and "Traceback" not in err and err.strip().endswith("interrupted"), err
