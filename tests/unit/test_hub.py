"""specui.hub: an HF_ENDPOINT that huggingface_hub cannot read is said in one line before it is imported (its import
stops with a traceback, and with it transformers' and gradio's)."""

import os
import subprocess
import sys

import pytest

from specui import hub
from tests.helpers import ROOT


@pytest.mark.parametrize("endpoint, words", [
    ("http://example.invalid:99999", "is not a URL (Port out of range"),
    ("http://[::1", "is not a URL (Invalid IPv6 URL"),
    ("huggingface.co", "is not an http(s) URL"),
])
def test_an_endpoint_huggingface_hub_cannot_read_is_named(endpoint, words, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    assert words in hub.endpoint_problem() and endpoint in hub.endpoint_problem()


@pytest.mark.parametrize("endpoint", [None, "", "https://huggingface.co", "http://127.0.0.1:8080/mirror"])
def test_an_unset_or_readable_endpoint_is_fine(endpoint, monkeypatch):
    if endpoint is None:
        monkeypatch.delenv("HF_ENDPOINT", raising=False)
    else:
        monkeypatch.setenv("HF_ENDPOINT", endpoint)
    assert hub.endpoint_problem() is None


def test_the_app_and_load_engine_say_it_in_one_line(monkeypatch):
    """`python app.py` ended in a traceback from gradio's import of huggingface_hub; load_engine in one from
    transformers'."""
    env = {**os.environ, "HF_ENDPOINT": "http://example.invalid:99999"}
    done = subprocess.run([sys.executable, "app.py", "--preset", "bundled"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert "error: HF_ENDPOINT='http://example.invalid:99999' is not a URL (Port out of range" in done.stderr
    from specui.loading import LoadError, load_pair
    from specui.presets import load_config

    monkeypatch.setenv("HF_ENDPOINT", "http://example.invalid:99999")
    with pytest.raises(LoadError, match="Preset 'bundled' cannot be loaded: HF_ENDPOINT="):
        load_pair(load_config().get("bundled"))
