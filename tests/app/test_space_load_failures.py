"""A Space's visitor whose chosen preset does not load is told what a visitor can do, in the chat and in the Teach tab;
the error and its advice (a path to check in models.yaml, a variable to set) go to the log, for the Space's owner.
Off a Space the page is its owner's and says the error whole. An error meant for visitors too (the wheel's preset on a
Space: choose the Hub's) is said as it is."""

from __future__ import annotations

import logging
from dataclasses import replace

import gradio as gr
import pytest

from specui.loading import PairCache
from specui.presets import Preset
from specui.ui.request import Settings
from specui.ui.session import Showcase, decode
from tests.helpers import ui_config

ADVICE = "Check the path in models.yaml"  # the owner's: the target folder's error says it


def broken_showcase(tmp_path) -> Showcase:
    """A Showcase whose config has a preset 'gone' whose target folder is missing."""
    config = ui_config()
    gone = Preset(name="gone", target=str(tmp_path / "missing"), drafter="prompt_lookup", device="cpu",
                  description="a preset whose model folder is missing")
    return Showcase(replace(config, presets={**config.presets, "gone": gone}), PairCache())


@pytest.fixture(params=[True, False], ids=["on a Space", "elsewhere"])
def space(request, monkeypatch) -> bool:
    """Whether the app runs on a Hugging Face Space (SPACE_ID set), both ways."""
    if request.param:
        monkeypatch.setenv("SPACE_ID", "someone/specui")
    else:
        monkeypatch.delenv("SPACE_ID", raising=False)
    return request.param


def test_a_chat_run_whose_preset_did_not_load(tmp_path, caplog, space):
    with caplog.at_level(logging.WARNING, logger="specui.ui"):
        *_, (frame, run) = decode(broken_showcase(tmp_path), "def f(x):", Settings(max_new_tokens=4, preset="gone"))
    assert ADVICE in caplog.text  # the whole error, in the log, either way
    assert frame.done and run.error
    if space:
        assert run.error.startswith("The preset 'gone' did not load on this Space; its owner can see why in the "
                                    "Space's logs. Choose another preset"), run.error
        assert ADVICE not in run.error and "models.yaml" not in run.error and str(tmp_path) not in run.error
    else:
        assert ADVICE in run.error and str(tmp_path / "missing") in run.error, run.error


def test_a_teach_decode_whose_preset_did_not_load(tmp_path, caplog, space):
    from specui.ui.teach_prepare import prepare
    from specui.ui.teaching import teaching_tab

    showcase = broken_showcase(tmp_path)
    with gr.Blocks():
        c = teaching_tab(showcase).controls
    data = {control: control.value for control in (c.drafter, c.k, c.confidence, c.temperature, c.penalty, c.seed)}
    data |= {c.preset: "gone", c.max_new: 4, c.prompt: "def f(x):"}
    with caplog.at_level(logging.WARNING, logger="specui.ui"), pytest.raises(gr.Error) as refused:
        prepare(showcase, c, data)
    assert ADVICE in caplog.text
    said = refused.value.message
    assert (ADVICE in said) == (not space) and ("did not load on this Space" in said) == space, said


def test_an_error_meant_for_visitors_too_is_said_as_it_is(monkeypatch):
    from specui import spaces
    from specui.load_checks import LoadError

    monkeypatch.setenv("SPACE_ID", "someone/specui")
    told = LoadError("Preset 'smollm2-chat': choose smollm2-chat-hub instead.", for_visitors=True)
    assert spaces.load_failure_said("smollm2-chat", told) == str(told)
    assert "did not load on this Space" in spaces.load_failure_said("x", LoadError("Check the path in models.yaml"))
