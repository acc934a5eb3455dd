"""Page pacing under ZeroGPU: the run decodes in the worker process of Chat's GPU call, whose copy of the showcase's
`Pages` never hears what the page drew (its word reaches the server's process, `/drawn`): every frame went, marked by
the worker, as if no page had ever answered. The frames are now paced in the server's process as they come from the
worker (`pages.Paced`, `GpuCalls.decode`). ZeroGPU is stood in for as in test_zero_gpu_preload (`StandIn`: a worker
forked from the server at the first call, everything pickled both ways), in a fresh interpreter."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types

import pytest

from tests.helpers import ROOT

pytestmark = pytest.mark.slow  # loads the bundled pair, forks a worker, in a fresh interpreter


def scenario() -> None:
    """Run in a fresh interpreter: one chat for a page (`decode(page=True)`) under the stand-in, the page saying it
    drew the first frame marked and nothing more; prints the marks' numbers, whether the last frame came unmarked,
    the rounds, and whether the worker (not this process) decoded."""
    import re

    from tests.app.test_zero_gpu_preload import PROMPT, StandIn

    stand_in = StandIn()
    module = types.ModuleType("spaces")
    module.GPU = stand_in.GPU
    sys.modules["spaces"] = module
    stand_in.patch()
    from specui import loading
    from specui.ui.session import Settings, Showcase, decode
    from tests.helpers import ui_config

    showcase = Showcase(ui_config(), loading.PairCache(), text_interval=0, chart_interval=0)
    showcase.pages.ACK_WAIT_S = 600.0  # no answer counts as lost within the run
    showcase.preload(showcase.config.get(None))
    marks, last = [], None
    for frame, run in decode(showcase, PROMPT, Settings(max_new_tokens=48, num_draft_tokens=1), page=True):
        if said := re.search(r'data-frame="([0-9a-f]+:[0-9]+)"', frame.stats):
            marks.append(said.group(1).rpartition(":")[2])
            if len(marks) == 1:
                showcase.pages.drawn(said.group(1))  # the page drew the first, then says nothing more
        last = frame
    print(json.dumps({"marks": marks, "done": last.done, "unmarked": "specui-frame" not in last.stats,
                      "rounds": len(run.spec.rounds), "apart": showcase.calls.apart,
                      "tags": len(showcase.pages._drawn)}))


def test_under_zero_gpu_a_run_sends_no_frame_past_the_last_but_one_its_page_drew():
    """As test_ui_pages' test of the same name, the run in ZeroGPU's worker: frames 2 and 3 go after the page said it
    drew frame 1, then none until the last (which fails without: '1, 2, ... 12', every frame the worker's throttle let
    through)."""
    env = {**os.environ, "SPACES_ZERO_GPU": "true", "PYTHONPATH": str(ROOT)}
    for name in ("HF_DEACTIVATE_ASYNC_LOAD", "USE_HUB_KERNELS"):
        env.pop(name, None)
    done = subprocess.run([sys.executable, "-c", "from tests.app.test_zero_gpu_pages import scenario; scenario()"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    told = json.loads(done.stdout.strip().splitlines()[-1])
    assert told["apart"] and told["rounds"] > 4, told  # the worker decoded, and rounds enough to tell
    assert told["marks"] == ["1", "2", "3"], told
    assert told["done"] and told["unmarked"] and told["tags"] == 0, told
