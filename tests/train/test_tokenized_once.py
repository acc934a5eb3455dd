"""tests/train/conftest.py's memory of tokenized corpora: the trainers read it in place of tokenizing again, and it
answers exactly what tokenizing would, per tokenizer and per text, in a stream a caller may write into."""

from __future__ import annotations

import copy

import pytest
import torch
from transformers import AutoTokenizer

from specui.train import chat_cpu, chat_data, cli, common, evaluate
from tests.helpers import BUNDLED_TARGET

TEXTS = ["def main(argv=None):\n    return 0\n", "x = [i * i for i in range(10)]\n"]


def test_the_trainers_read_the_remembered_streams():
    for module, name in ((chat_data, "code_stream"), (chat_cpu, "code_stream"), (common, "encode_stream"),
                         (cli, "encode_stream"), (evaluate, "encode_stream")):
        assert hasattr(getattr(module, name), "__wrapped__"), (module.__name__, name)


@pytest.fixture(scope="module")
def tok():
    return AutoTokenizer.from_pretrained(BUNDLED_TARGET.parent)


def test_a_remembered_stream_is_the_tokenizers_own_for_each_tokenizer_and_text(tok):
    real = common.encode_stream.__wrapped__(tok, TEXTS)
    first = common.encode_stream(tok, TEXTS)
    assert torch.equal(first, real)
    first.zero_()  # a caller writing into its stream leaves the next caller's alone
    assert torch.equal(common.encode_stream(copy.deepcopy(tok), list(TEXTS)), real)  # the same tokenizer, read again
    assert torch.equal(common.encode_stream(tok, TEXTS[:1]), common.encode_stream.__wrapped__(tok, TEXTS[:1]))
    other = copy.deepcopy(tok)
    other.add_tokens(["def main"])  # another tokenizer of the same name and folder: its own ids
    assert torch.equal(common.encode_stream(other, TEXTS), common.encode_stream.__wrapped__(other, TEXTS))
    assert not torch.equal(common.encode_stream(other, TEXTS), real)
    assert torch.equal(chat_data.code_stream(tok, TEXTS), chat_data.code_stream.__wrapped__(tok, TEXTS))


def test_the_offline_corpus_is_part_of_what_is_remembered(tok, monkeypatch):
    """code_stream(tok) reads the offline corpus itself: another corpus (a test's) gives its own ids, not the stream
    remembered for the corpus read before it."""
    for texts in (TEXTS, TEXTS[:1]):
        monkeypatch.setattr(chat_data, "offline_texts", lambda texts=texts: list(texts))
        assert torch.equal(chat_data.code_stream(tok), chat_data.code_stream.__wrapped__(tok, texts)), texts
