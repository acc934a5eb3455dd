"""Several visitors of a Space at once (SPACE_ID set), through the API as gradio_client sends it: while one long run
decodes, others join the queue on two presets (each a pair of its own, loaded in turn: one stays loaded at a time),
greedy and sampled, and are told where they stand; the long run stopped frees the slot, and each queued visitor gets
the very tokens it gets alone: nothing of another's run (its KV caches, its prompt's cache, its preset) reaches it.
"""

from __future__ import annotations

import threading
from dataclasses import replace

import pytest

from tests.helpers import served_app, ui_config
from tests.waits import wait_until

pytestmark = pytest.mark.slow  # serves the app on the bundled pair

gradio_client = pytest.importorskip("gradio_client")
CODE = "import os\nimport sys\n\n\ndef main(argv):\n"
OTHER = "class Stack:\n    \"\"\"A last-in, first-out stack.\"\"\"\n\n    def __init__(self):\n"


def two_presets():
    """The UI tests' config with a second preset of the bundled pair under another name (its own pair in the cache,
    drafting by prompt lookup)."""
    config = ui_config()
    other = replace(config.get("bundled"), name="bundled-lookup", drafter="prompt_lookup")
    return replace(config, presets={**config.presets, "bundled-lookup": other})


def ids(answer: dict) -> list[int]:
    return [token["id"] for token in answer["tokens"]]


def test_visitors_queued_behind_a_stopped_run_each_get_their_own_tokens(monkeypatch):
    from gradio_client.utils import Status

    from specui.loading import PairCache
    from specui.ui.session import Showcase

    monkeypatch.setenv("SPACE_ID", "someone/specui")
    config = two_presets()
    showcase = Showcase(config, PairCache())
    asks = [dict(prompt=CODE, preset="bundled", drafter="model", max_new_tokens=40),
            dict(prompt=OTHER, preset="bundled-lookup", max_new_tokens=40),
            dict(prompt=CODE, preset="bundled", drafter="eagle", temperature=0.8, seed=7, max_new_tokens=40),
            dict(prompt=OTHER, preset="bundled", drafter="medusa", compare=True, max_new_tokens=40)]
    with served_app(config, showcase=showcase) as url:
        first = gradio_client.Client(url, verbose=False)
        first.predict(CODE, max_new_tokens=4, api_name="/generate")  # loads and warms the pair
        long = first.submit(CODE, max_new_tokens=1000, compare=True, api_name="/generate")
        wait_until(lambda: showcase.live == 1, "the long run to start", timeout_s=120)
        visitors = [gradio_client.Client(url, verbose=False) for _ in asks]
        jobs = [client.submit(**ask, api_name="/generate") for client, ask in zip(visitors, asks)]
        wait_until(lambda: all(job.status().code == Status.IN_QUEUE and job.status().rank is not None
                               for job in jobs), "each visitor to be told its place in the queue", timeout_s=120)
        ranks = sorted(job.status().rank for job in jobs)
        assert ranks == [0, 1, 2, 3], f"the visitors were told places {ranks}, not each their own"
        assert showcase.live == 1, "a visitor's run began beside the long one"
        cancelling = threading.Thread(target=long.cancel, daemon=True, name="cancel")
        cancelling.start()  # Stop: the slot frees once its round in flight is done
        together = [job.result(timeout=600) for job in jobs]
        cancelling.join(timeout=60)
        alone = [visitors[0].predict(**ask, api_name="/generate") for ask in asks]
    for ask, seen, own in zip(asks, together, alone):
        assert ids(seen) == ids(own) and seen["text"] == own["text"], (ask, seen["text"], own["text"])
    assert together[3]["identical"] is True  # greedy: the medusa run's tokens are plain decoding's
