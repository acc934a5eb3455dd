"""Ctrl-C while the draft model starts a conversation's turn from its kept cache (`ModelDrafter.start(resume=)`,
which trims and extends that cache in place), or just after its start returned, before the engine counted it as
begun: no later turn drafts from that cache as if it still held the conversation it held before. It used to: the
kept state still said it held the earlier turn, while its rows past the edit held the interrupted prompt's tokens,
and a later turn that went back past the edit (after a turn that keeps no drafter state: plain decoding) drafted
from those rows. Exactness never depended on it (the target verifies); the drafts, and so a sampled run's tokens
with that cache, did."""

from __future__ import annotations

import inspect
import sys

import pytest

from specui import SpeculativeEngine
from specui.drafters.model import ModelDrafter
from specui.prompt_cache import PromptCache
from tests.helpers import make_model, noisy_copy

GREEDY = {"max_new_tokens": 12, "temperature": 0.0, "ignore_eos": True}
TURN = [5, 17, 3, 88, 41, 9, 5, 17, 3, 88, 60, 2, 33, 71, 12, 50]


def line_of(function, text: str) -> int:
    """The line number of the first line of `function` that holds `text`."""
    lines, first = inspect.getsourcelines(function)
    return first + next(i for i, line in enumerate(lines) if text in line)


# where the Ctrl-C comes: inside the draft's start once it read the prompt; in the engine once the start returned
WINDOWS = {
    "inside start": (ModelDrafter.start, "self._valid = len(prompt) - 1"),
    "after start": (SpeculativeEngine._run, "if begun is not None:"),
}


def press_at(function, text):
    code, line = function.__code__, line_of(function, text)

    def trace(frame, event, arg):
        if frame.f_code is not code:
            return None

        def step(frame, event, arg):
            if event == "line" and frame.f_lineno == line:
                raise KeyboardInterrupt(f"at {code.co_name} line {line}")
            return step
        return step
    return trace


@pytest.mark.parametrize("window", list(WINDOWS))
def test_a_start_cut_short_leaves_no_draft_cache_that_says_it_holds_another_conversation(window):
    target = make_model("llama", layers=2, seed=3)
    engine = SpeculativeEngine(target, noisy_copy(target, noise=0.2, seed=4))
    cache = PromptCache()
    first = engine.generate(TURN, cache=cache, drafter="model", **GREEDY)  # the draft keeps its cache of it
    said = TURN + first.token_ids
    edited = TURN[:3] + [90, 91, 92, 93, 94, 95, 94, 80, 81, 82, 83, 84, 85, 86, 87, 70, 71]  # an edit at 3
    sys.settrace(press_at(*WINDOWS[window]))
    try:
        with pytest.raises(KeyboardInterrupt):
            engine.generate(edited, cache=cache, drafter="model", **GREEDY)
    finally:
        sys.settrace(None)
    back = said + [7, 8, 9]  # the conversation without the edit, read by plain decoding (which keeps no draft state)
    answer = engine.generate(back, cache=cache, speculative=False, **GREEDY).token_ids
    later = back + answer + [11, 12]
    resumed = engine.generate(later, cache=cache, drafter="model", **GREEDY)
    fresh = engine.generate(later, drafter="model", **GREEDY)  # no cache: the draft reads the conversation whole
    assert resumed.token_ids == fresh.token_ids  # exact either way
    assert [r.drafted for r in resumed.rounds] == [r.drafted for r in fresh.rounds], \
        "the draft drafted from rows of the interrupted prompt as if they held the conversation"
