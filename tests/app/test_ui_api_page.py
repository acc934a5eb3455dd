"""The API page ("Use via API") tells what each /generate parameter does and what the answer holds: gradio's page
wrote 'The input value that is provided in the "9th" Api component.' for every parameter, and nothing more.

No server: the endpoint alone in a gr.Blocks, read through gradio's own api_info (what the page and
gradio_client's view_api show).
"""

from __future__ import annotations

import inspect

import pytest

from specui.loading import PairCache
from specui.ui.api import ANSWER, PARAMETERS, generate_endpoint, serve_generate
from specui.ui.session import Showcase
from tests.helpers import ui_config

gr = pytest.importorskip("gradio")


@pytest.fixture(scope="module")
def generate_info():
    with gr.Blocks() as demo:
        serve_generate(Showcase(ui_config(), PairCache()))
    return demo.get_api_info()["named_endpoints"]["/generate"]


def test_every_parameter_is_named_and_says_what_it_does(generate_info):
    parameters = generate_info["parameters"]
    names = [p["parameter_name"] for p in parameters]
    endpoint = generate_endpoint(Showcase(ui_config(), PairCache()))
    signature = [n for n in inspect.signature(endpoint).parameters if n != "request"]
    assert names == signature == list(PARAMETERS)
    for p in parameters:
        assert p["label"] == p["parameter_name"]  # the page's "in the "max_new_tokens" Api component", not "9th"
        assert p["python_type"]["description"] == PARAMETERS[p["parameter_name"]]


def test_the_answer_is_described_and_the_description_reads_as_text(generate_info):
    (answer,) = generate_info["returns"]
    assert answer["label"] == "answer" and answer["python_type"]["description"] == ANSWER
    assert "`" not in generate_info["description"]  # shown as written: no Markdown backticks


def test_each_limit_is_the_one_a_request_is_checked_against():
    """Each bounded parameter's description gives the limit `Settings.from_ui` checks, read from where it reads it:
    the page had written them out again (and left out top_k's, seed's, system's and draft_confidence's)."""
    from specui.drafters.registry import DRAFTER_NAMES
    from specui.settings import (MAX_CONFIDENCE, MAX_DRAFT_TOKENS, MAX_NEW_TOKENS, MAX_REPETITION_PENALTY, MAX_SEED,
                                 MAX_TEMPERATURE, MAX_TREE_NODES, MAX_TREE_WIDTH)
    from specui.ui.request import MAX_SYSTEM_CHARS, MAX_TOP_K

    limits = {"num_draft_tokens": f"1 to {MAX_DRAFT_TOKENS}", "max_new_tokens": f"1 to {MAX_NEW_TOKENS}",
              "temperature": f"up to {MAX_TEMPERATURE:g}", "top_k": f"up to {MAX_TOP_K:,}",
              "seed": f"0 to {MAX_SEED:,}", "tree_width": f"1 to {MAX_TREE_WIDTH}", "tree_nodes": f"{MAX_TREE_NODES}",
              "system": f"{MAX_SYSTEM_CHARS:,} characters", "draft_confidence": f"0 to {MAX_CONFIDENCE:g}",
              "repetition_penalty": f"up to {MAX_REPETITION_PENALTY:g}", "drafter": ", ".join(DRAFTER_NAMES)}
    assert {name: PARAMETERS[name] for name, limit in limits.items() if limit not in PARAMETERS[name]} == {}
