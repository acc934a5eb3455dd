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
    assert "1 to 1024" in PARAMETERS["max_new_tokens"]


def test_the_answer_is_described_and_the_description_reads_as_text(generate_info):
    (answer,) = generate_info["returns"]
    assert answer["label"] == "answer" and answer["python_type"]["description"] == ANSWER
    assert "`" not in generate_info["description"]  # shown as written: no Markdown backticks
