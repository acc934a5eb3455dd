"""What `python app.py` prints as it serves: where it serves, and not gradio's hint "To create a public link, set
`share=True` in `launch()`", which a local user does not need (--share is in its --help) and a Space never shows.
A real server on the bundled pair, stopped by Ctrl-C once it serves."""

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
    """Whether `page` answers 200 within `within` seconds, asked again as each try ends."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            if httpx.get(page, timeout=30).status_code == 200:
                return True
        except httpx.HTTPError:
            pass
    return False


@pytest.mark.slow
def test_the_app_says_where_it_serves_without_gradios_share_hint():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    # each line as printed, as a terminal shows it (a pipe's buffer, never flushed at a Ctrl-C, lost the hint)
    app = subprocess.Popen([sys.executable, "app.py", "--preset", "bundled", "--port", port], cwd=ROOT,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        said = []
        for line in app.stdout:  # "* Running on local URL:  http://...", once it serves
            said.append(line)
            if "Running on local URL" in line:
                break
        assert f"* Running on local URL:  http://127.0.0.1:{port}" in "".join(said), "".join(said)
        page = f"http://127.0.0.1:{port}/"
        # gradio said where it serves, then asked its own server for its startup events, then gave its hint: the
        # page answered is the server up and answering, the hint's moment past (a Ctrl-C at once could come first)
        assert answers(page), page
        app.send_signal(signal.SIGINT)
        said.append(app.communicate(timeout=60)[0])
    finally:
        app.kill()
    out = "".join(said)
    assert app.returncode == 130 and "Traceback" not in out, out
    assert "public link" not in out and "share=True" not in out, out
