"""ZeroGPU's real `spaces` package off ZeroGPU (a CPU Space has it: gradio imports it there): its decorator leaves
each generation as it is, the app still warms its pair up, and Stop still stops a run through the wrapper.

Skipped where the package is not installed (`pip install spaces`: it pulls nothing the app does not have).
"""

import threading

import pytest

from tests.helpers import ui_config

real_spaces = pytest.importorskip("spaces", reason="ZeroGPU's `spaces` package is not installed")

PROMPT = "def main(argv):\n    "


@pytest.fixture
def off_zero_gpu(monkeypatch):
    monkeypatch.delenv("SPACES_ZERO_GPU", raising=False)
    from spaces.config import Config

    assert not Config.zero_gpu, "these tests need a machine that is no ZeroGPU Space"


@pytest.fixture
def showcase(off_zero_gpu):
    from specui.loading import PairCache
    from specui.ui.session import Showcase

    return Showcase(ui_config(), PairCache())


def test_the_decorator_leaves_a_generation_as_it_is(off_zero_gpu):
    from specui import spaces

    def work(x):
        yield x

    assert spaces.gpu(duration=60)(work) is work and not spaces.zero_gpu()


@pytest.mark.slow
def test_with_the_package_installed_the_pair_is_still_warmed_up(showcase):
    """zero_gpu() said yes wherever `spaces` was importable, so a CPU Space skipped the warm-up, and its first visitor
    waited for first-call allocations, timed as decoding."""
    config = showcase.config
    showcase.preload(config.get(None))
    pair = showcase.cache.get(config.get(None))
    assert any(ref() is pair for ref in showcase._warm)


@pytest.mark.slow
def test_stop_ends_a_run_through_the_wrapper(showcase):
    from specui.ui.session import Settings, decode

    assert showcase.calls.on_gpu == showcase.calls._serve  # spaces.GPU gave the method back
    halt, frames = threading.Event(), []
    for frame, run in decode(showcase, PROMPT, Settings(max_new_tokens=200, compare=True), stop=halt):
        frames.append(frame)
        if run.spec.rounds:
            halt.set()
    assert run.phase == "stopped" and frames[-1].done and len(run.spec.rounds) == 1 and run.plain is None
    assert not showcase.calls.live


def test_zero_gpu_said_where_it_cannot_start_is_a_warning_and_the_app_serves_on():
    """SPACES_ZERO_GPU=true where ZeroGPU cannot start (no device API here, a CPU build of torch): the `spaces` package
    fails as it is imported (an AssertionError, an AttributeError from torch.version.cuda), and the app stopped with
    its traceback as it built the page. Now one warning names the variable and the app decodes without ZeroGPU (one
    for the app, which wraps its Chat runs and its Teach work: its log said it twice)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from tests.helpers import ROOT

    code = ("from specui.spaces import gpu\n"
            "def work(x):\n    return x + 1\n"
            "assert gpu(duration=60)(work)(1) == 2 and gpu(duration=180)(work)(2) == 3\n")  # as GpuCalls, GpuWork
    env = {**os.environ, "SPACES_ZERO_GPU": "true",
           "PYTHONPATH": os.pathsep.join([str(Path(real_spaces.__file__).parent.parent), str(ROOT)])}
    env.pop("SPACES_ZERO_DEVICE_API_URL", None)
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert "SPACES_ZERO_GPU" in done.stderr and "without ZeroGPU" in done.stderr
    assert done.stderr.count("says this is a ZeroGPU Space") == 1, done.stderr  # once, however many it wraps
