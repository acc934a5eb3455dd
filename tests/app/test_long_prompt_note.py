"""A long message says it is being read: the prompt's reading (a pasted file: thousands of tokens, tens of seconds on
a CPU) came before the first token with only "…" in the chat, as if nothing happened. A run that reads at least
`READ_NOTE_TOKENS` says so, with the count, until its first frame; a chat's follow-up turn that reads only its new
message from the kept conversation says nothing. The real stdlib pair through `Showcase.run`."""

from __future__ import annotations

import pytest

from specui.loading import PairCache
from specui.text import READ_NOTE_TOKENS
from specui.ui.session import Settings, Showcase
from tests.helpers import ui_config

pytestmark = pytest.mark.slow  # loads a real pair

LONG = "".join(f"def f{i}(x):\n    return x + {i}\n\n" for i in range(60))  # some 700 tokens of the stdlib pair's


def frames(showcase, prompt, **settings):
    out = list(showcase.run(prompt, Settings(max_new_tokens=4, seed=0, **settings)))
    assert out[-1][0].done and not out[-1][0].error, out[-1][0].error
    return out


def reading_notes(out) -> list[str]:
    return [frame.message for frame, _ in out if "Reading the prompt" in (frame.message or "")]


def test_a_long_prompt_says_it_is_read_and_its_follow_up_does_not():
    showcase = Showcase(ui_config(), PairCache())
    first = frames(showcase, LONG)
    run = first[-1][1]
    assert run.reading >= READ_NOTE_TOKENS and run.spec.reused_tokens == 0
    [note] = reading_notes(first)
    assert f"{run.reading:,} tokens" in note
    messages = [frame.message or "" for frame, _ in first]
    assert messages.index(note) < min(i for i, m in enumerate(messages) if 'class="tok ' in m)  # before any token
    follow = frames(showcase, LONG + "def g(y):\n")  # goes on from the kept conversation: reads a few tokens
    assert follow[-1][1].spec.reused_tokens > 0 and follow[-1][1].reading < READ_NOTE_TOKENS
    assert reading_notes(follow) == []
    assert reading_notes(frames(showcase, "def main(argv):")) == []  # a short message: nothing to say


def test_an_arena_says_it_reads_the_whole_prompt():
    showcase = Showcase(ui_config(), PairCache())
    out = frames(showcase, LONG, arena=True)
    assert len(reading_notes(out)) == 1 and out[-1][1].reading > READ_NOTE_TOKENS
