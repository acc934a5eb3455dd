"""`python app.py` on a ZeroGPU Space: the default pair loads on the main thread before the server starts (where
ZeroGPU's `spaces` package fakes CUDA, and before any GPU call's worker forks: `test_zero_gpu_preload`); elsewhere it
still loads in the background (app.py's own thread, which says its progress) as the page is built.

ZeroGPU cannot run here: SPACES_ZERO_GPU says it is one, the `spaces` package is absent (its decorator a plain call),
and the preload, the page and the server are recorded rather than run; the arguments and the config are app.py's own.
"""

from __future__ import annotations

import socket
import threading

import pytest

import app


def _free_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


@pytest.mark.parametrize("zero", [True, False])
def test_on_zero_gpu_the_pair_loads_on_the_main_thread_before_the_page_is_built(zero, monkeypatch):
    from specui.ui import blocks, session

    if zero:
        monkeypatch.setenv("SPACES_ZERO_GPU", "true")
    else:
        monkeypatch.delenv("SPACES_ZERO_GPU", raising=False)
    steps, preloaded = [], threading.Event()

    def preload(self, preset, progress=None):
        steps.append(("preload", preset.name, threading.current_thread() is threading.main_thread(), self))
        preloaded.set()

    class Served:  # what launch(prevent_thread_lock=True) leaves: app.py says its address and waits on it
        local_url = "http://127.0.0.1:7860/"

        def block_thread(self):
            steps.append(("served",))

    def build(config, **kw):
        steps.append(("build", kw["preload"], kw["showcase"]))
        return Served()

    monkeypatch.setattr(session.Showcase, "preload", preload)
    monkeypatch.setattr(blocks, "build", build)
    monkeypatch.setattr(blocks, "launch", lambda demo, **kw: steps.append(("launch",)))
    assert app.main(["--preset", "bundled", "--port", _free_port()]) == 0
    assert preloaded.wait(60)
    (_, name, on_main, showcase), = [step for step in steps if step[0] == "preload"]
    assert name == "bundled" and on_main == zero
    assert [step for step in steps if step[0] != "preload"] == [("build", False, showcase), ("launch",), ("served",)]
    if zero:  # before the page is built
        assert steps[0][0] == "preload"
