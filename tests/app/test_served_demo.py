"""`tools.screenshot.served_demo`, which serves the app in a test's own process: a launch that raised after gradio had
started the server left that server running (its port taken, its thread alive) for the rest of the process. Here the
launch fails as it does behind a proxy that cannot reach this machine (HTTP_PROXY set, localhost not in NO_PROXY):
gradio's own first request to the new server goes to the proxy and is refused."""

from __future__ import annotations

import socket

import pytest

from tests.helpers import ui_config
from tools import screenshot


def test_a_launch_that_raises_after_the_server_started_closes_the_server(monkeypatch):
    config = ui_config()  # skips when the bundled pair is missing
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{screenshot.free_port()}")  # a proxy nobody serves
    for name in ("NO_PROXY", "no_proxy", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    ports, free_port = [], screenshot.free_port
    monkeypatch.setattr(screenshot, "free_port", lambda: ports.append(free_port()) or ports[-1])  # the app's port
    with pytest.raises(Exception) as raised:
        with screenshot.served_demo(config, preload=False):
            pytest.fail("the launch went through the proxy and still served")
    assert "refused" in str(raised.value).lower() or "proxy" in str(raised.value).lower(), raised.value
    with socket.socket() as s:  # nothing serves the app's port any more
        assert s.connect_ex(("127.0.0.1", ports[0])) != 0, "the server the failed launch started still serves"
