"""Why a run ended (`GenerationResult.stop_reason`) is said in one set of words, `specui.text.STOP_REASONS`, that the
chat's reply (`specui.ui.chat_view`) and the terminal's stats line (`specui.terminal_view`) both show: each had its own
copy of the same dict, so a change to one would have left the other saying the old words."""

from __future__ import annotations

import importlib

import pytest

from specui import text


@pytest.mark.parametrize("module", ["specui.ui.chat_view", "specui.terminal_view"])
def test_the_chat_and_the_terminal_say_why_a_run_ended_in_one_set_of_words(module):
    assert importlib.import_module(module).STOP_REASONS is text.STOP_REASONS
    assert text.STOP_REASONS == {"eos": "end of text", "length": "max new tokens reached"}
