"""`import specui` and the whole engine work without gradio or plotly installed."""

import os
import subprocess
import sys

BLOCKER = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in {'gradio', 'gradio_client', 'plotly'}:
            raise ImportError(f'{name} is blocked in this test')
sys.meta_path.insert(0, Block())
import specui
from specui import SpeculativeEngine, Sampling, verify, PromptLookupDrafter, GenerationResult
import specui.engine, specui.kv, specui.events, specui.presets, specui.loading, specui.metrics, specui.lesson, specui.settings, specui.runstats, specui.text, specui.train, specui.bench.run
assert 'gradio' not in sys.modules and 'plotly' not in sys.modules
assert specui.verify is verify and callable(specui.verify), specui.verify  # the rule, not a module of that name
print('ok')
"""


def test_import_without_ui_packages():
    out = subprocess.run([sys.executable, "-c", BLOCKER], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_settings_and_the_drafter_names_import_without_torch():
    """DecodeSettings and the drafter registry are plain data: importing them loads no torch."""
    code = ("import sys\nfrom specui.settings import DecodeSettings\nfrom specui.drafters import DRAFTER_NAMES, MODEL\n"
            "DecodeSettings(drafter=MODEL)\nassert 'torch' not in sys.modules, 'torch was imported'\nprint('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_openmp_threads_wait_passively_unless_told_otherwise():
    """specui sets OMP_WAIT_POLICY=PASSIVE before torch loads (spinning OpenMP threads would take the cores
    the native products split onto), and leaves a value the user set alone."""
    code = "import os, specui, torch\nprint(os.environ['OMP_WAIT_POLICY'])"
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    for given, expected in ((None, "PASSIVE"), ("ACTIVE", "ACTIVE")):
        run_env = env if given is None else {**env, "OMP_WAIT_POLICY": given}
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=run_env)
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == expected
