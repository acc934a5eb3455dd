"""A Space whose Hub models are cached (its `preload_from_hub` fetched them as it was built) while the Hub cannot be
reached: the preset loads from the cache alone (`hub.from_cache_alone`, `local_files_only`), where transformers asked
the Hub about each file first, retrying each (a tiny cached pair: 85 refused connections, almost 5 minutes on this
machine). A real tiny pair saved in huggingface_hub's cache layout (models--org--name/snapshots/<rev>/, refs/main)
under a temporary HF_HOME, the Hub an address whose connections are refused; the load runs in a process of its own, as
huggingface_hub reads HF_HOME and HF_ENDPOINT when it is imported. Bounded by the connections tried, not by seconds."""

from __future__ import annotations

import contextlib
import http.server
import os
import socket
import subprocess
import sys
import threading

import pytest

from specui import hub
from tests.helpers import ROOT, save_tiny_model

REVISION = "0123456789abcdef0123456789abcdef01234567"
MODELS = ("specui-test/tiny-target", "specui-test/tiny-draft")


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """HF_HOME with both models in its hub cache, and a models.yaml whose preset names them by their Hub ids."""
    root = tmp_path_factory.mktemp("cached_hub")
    for model_id in MODELS:
        repo = root / "hf" / "hub" / f"models--{model_id.replace('/', '--')}"
        save_tiny_model(repo / "snapshots" / REVISION, "llama", layers=1, seed=0)
        (repo / "refs").mkdir()
        (repo / "refs" / "main").write_text(REVISION)
    (root / "models.yaml").write_text(f"default: cached\npresets:\n  cached:\n    target: {MODELS[0]}\n"
                                      f"    draft: {MODELS[1]}\n    device: cpu\n")
    return root


def refused_port() -> int:
    """A port nothing listens on: its connections are refused at once."""
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        return closed.getsockname()[1]


def without_proxy_or_offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    for proxy in hub._PROXIES:
        monkeypatch.delenv(proxy, raising=False)


LOAD = """
import socket, sys
tried = []
connect = socket.create_connection
def counted(address, *args, **kwargs):  # each connection huggingface_hub (httpcore) or specui.hub opens
    tried.append(address)
    if len(tried) > 5:  # transformers retrying each file: said at once, not minutes later
        print(f"tried {len(tried)} connections to the Hub", flush=True)
        import os; os._exit(3)
    return connect(address, *args, **kwargs)
socket.create_connection = counted
from specui.loading import load_pair
from specui.presets import load_config
lines = []
pair = load_pair(load_config(sys.argv[1]).get("cached"), progress=lines.append)
ids = pair.tokenizer("abc").input_ids
plain = pair.engine().generate(ids, max_new_tokens=8, speculative=False).token_ids
assert pair.engine().generate(ids, max_new_tokens=8, num_draft_tokens=3).token_ids == plain
print("tried", len(tried), "|".join(lines), flush=True)
"""


@pytest.mark.slow  # a process that imports transformers and loads the pair: about 25 s on this loaded machine
def test_a_cached_hub_pair_loads_from_the_cache_alone_when_the_hub_cannot_be_reached(cache):
    env = {**{k: v for k, v in os.environ.items() if k not in hub._PROXIES and k != "HF_HUB_CACHE"},
           "HF_HOME": str(cache / "hf"), "HF_ENDPOINT": f"http://127.0.0.1:{refused_port()}", "HF_HUB_OFFLINE": "0",
           "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", LOAD, str(cache / "models.yaml")], check=False, cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    said = done.stdout.strip().splitlines()[-1]
    # specui.hub's probe, and huggingface_hub's one fetch of its list of agents (for its user-agent header)
    assert int(said.split()[1]) <= 2, said
    assert "The Hugging Face Hub cannot be reached: loading from the local cache" in said and said.endswith("Ready")


def test_from_cache_alone_only_where_every_hub_model_is_cached_and_the_hub_is_out_of_reach(cache, monkeypatch):
    """A first download (not cached) and a reachable Hub are left to transformers as before; so are offline mode and a
    proxy (which may reach what this machine cannot)."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache / "hf" / "hub"))
    without_proxy_or_offline(monkeypatch)
    cached = [(model_id, None) for model_id in MODELS]
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{refused_port()}")
    assert hub.from_cache_alone(cached) and hub.from_cache_alone(cached[:1])
    assert not hub.from_cache_alone(cached + [("specui-test/not-cached", None)])  # unreachable() refuses it
    assert not hub.from_cache_alone([])  # no Hub model: local folders, a packaged model
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert not hub.from_cache_alone(cached)
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:1")
    assert not hub.from_cache_alone(cached)
    monkeypatch.delenv("HTTPS_PROXY")
    with answering(404) as endpoint:  # the Hub answers (a model it does not have): transformers asks it, as it did
        monkeypatch.setenv("HF_ENDPOINT", endpoint)
        assert not hub.from_cache_alone(cached)


@pytest.mark.parametrize("status", [503, 502, 429])
def test_a_hub_whose_host_is_up_but_answers_an_outage_is_out_of_reach(cache, monkeypatch, status):
    """A Hub down or overloaded behind its load balancer: the connection opens, each request is answered 5xx or 429,
    which huggingface_hub retries (a cached tiny pair: minutes here, where a refused one is out of reach at once)."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache / "hf" / "hub"))
    without_proxy_or_offline(monkeypatch)
    with answering(status) as endpoint:
        monkeypatch.setenv("HF_ENDPOINT", endpoint + "/mirror")
        assert hub.from_cache_alone([(MODELS[0], REVISION), (MODELS[1], None)])
        assert answering.asked == [f"HEAD /mirror/{MODELS[0]}/resolve/{REVISION}/config.json"]


@contextlib.contextmanager
def answering(status: int):
    """An HTTP server on 127.0.0.1 that answers every request with `status`; yields its URL, and keeps what it was
    asked in `answering.asked`."""
    answering.asked = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_HEAD(self):
            answering.asked.append(f"{self.command} {self.path}")
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
