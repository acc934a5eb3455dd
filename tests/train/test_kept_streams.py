"""The token streams the trainers keep on disk (`specui.train.streams.kept_stream`): a second start reads the file
instead of tokenizing, each tokenizer, text set and tokenizers version has its own file, a file that is torn, foreign
or not whole is tokenized again and written over, and what is read is the tokenizer's own stream, every text whole
whatever settings an earlier call left on it; a cache that cannot be found or written leaves the run as it was. The
stdlib pair's small tokenizer on two short texts; the calls counted, never timed. The tokenizer is written out once
a call, and the least recently used streams are removed beyond the budget, the user told in one line."""

from __future__ import annotations

import copy
import os
from pathlib import Path

import pytest
import tokenizers
import torch
from transformers import AutoTokenizer

from specui import packaged
from specui.train import chat_data, common, streams
from tests.helpers import BUNDLED_TARGET

TEXTS = ["def main(argv=None):\n    return 0\n", "x = [i * i for i in range(10)]  # é, ü\n"]


@pytest.fixture(scope="module")
def tok():
    return AutoTokenizer.from_pretrained(BUNDLED_TARGET.parent)


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.setenv(streams.STREAMS_ENV, str(tmp_path / "streams"))
    return tmp_path / "streams"


@pytest.fixture
def tokenized(monkeypatch) -> list:
    """The texts of each `encode_stream` that was tokenized, one entry a call."""
    calls, real = [], common._encoded

    def counted(tokenizer, texts, backend):
        calls.append(list(texts))
        return real(tokenizer, texts, backend)

    monkeypatch.setattr(common, "_encoded", counted)
    return calls


def FRESH(tokenizer, texts, encoded=common._encoded) -> torch.Tensor:
    """The stream tokenized, never kept (nor counted by `tokenized`)."""
    return encoded(tokenizer, texts, streams.serialized(tokenizer))


def encode(tokenizer, texts) -> torch.Tensor:
    """`common.encode_stream` itself, not the memory tests/train/conftest.py puts in front of it."""
    return common.encode_stream.__wrapped__(tokenizer, texts)


def test_the_tests_keep_their_streams_apart_from_the_users_cache():
    assert os.environ.get(streams.STREAMS_ENV)  # tests/train/conftest.py: started commands inherit it
    assert streams.streams_folder() != packaged.cache_root() / "streams"


def test_a_second_call_reads_the_file_and_each_tokenizer_and_text_set_has_its_own(tok, folder, tokenized):
    first = encode(tok, TEXTS)
    assert len(tokenized) == 1 and len(list(folder.glob("*.ids"))) == 1
    assert torch.equal(first, FRESH(tok, TEXTS))
    again = encode(tok, list(TEXTS))
    assert len(tokenized) == 1, "read from the file, not tokenized"
    assert again.dtype == torch.long and torch.equal(again, first)
    other = copy.deepcopy(tok)
    other.add_tokens(["def main"])  # the same name and folder, another vocabulary: its own ids, its own file
    assert torch.equal(encode(other, TEXTS), FRESH(other, TEXTS)) and len(tokenized) == 2
    assert not torch.equal(FRESH(other, TEXTS), first)
    assert torch.equal(encode(tok, TEXTS[:1]), FRESH(tok, TEXTS[:1])) and len(tokenized) == 3
    assert len(list(folder.glob("*.ids"))) == 3 and not list(folder.glob("*.part"))
    assert torch.equal(encode(other, TEXTS), FRESH(other, TEXTS)) and len(tokenized) == 3


def test_the_chat_trainers_stream_is_encode_streams_kept_file(tok, folder, tokenized):
    """chat_data.code_stream tokenized through `tok(...)` before: the same ids (all of them equal for SmolLM2's
    tokenizer on the offline corpus, checked once), now one path and one file, which the heads' --windows read too."""
    kept = chat_data.code_stream.__wrapped__(tok, TEXTS)
    assert len(tokenized) == 1  # encode_stream's tokenizing
    assert torch.equal(encode(tok, TEXTS), kept) and len(tokenized) == 1  # and its file, read
    eos = tok.eos_token_id
    assert kept.tolist() == [t for ids in tok(TEXTS, add_special_tokens=False)["input_ids"] for t in [eos, *ids]]


def test_a_tokenizer_left_padding_cutting_or_splitting_specials_still_gives_every_text_whole(tok, folder):
    """A call with padding, truncation or split_special_tokens leaves them set on the tokenizer's backend (the last
    outside its serialization, so outside the key): the stream, kept or fresh, is still `tok(texts)`'s, every text
    whole and its special tokens matched (code_stream's `tok(...)` before f8e6bd3 set them back at each call)."""
    texts, eos = [*TEXTS, f"a {tok.eos_token} b"], tok.eos_token_id
    whole = [t for ids in tok(texts, add_special_tokens=False)["input_ids"] for t in [eos, *ids]]
    used = copy.deepcopy(tok)
    assert encode(used, texts).tolist() == whole  # kept
    used.backend_tokenizer.encode_special_tokens = True  # as `used(..., split_special_tokens=True)` leaves it
    assert FRESH(used, texts).tolist() == encode(used, texts).tolist() == whole
    used(texts, padding=True, truncation=True, max_length=4)
    assert chat_data.code_stream.__wrapped__(used, texts).tolist() == whole


def test_another_tokenizers_library_tokenizes_again(tok, folder, tokenized, monkeypatch):
    encode(tok, TEXTS)
    monkeypatch.setattr(tokenizers, "__version__", "0.0.1")  # an upgrade may tokenize the same file otherwise
    assert torch.equal(encode(tok, TEXTS), FRESH(tok, TEXTS)) and len(tokenized) == 2
    assert len(list(folder.glob("*.ids"))) == 2


@pytest.mark.parametrize("damage", ["torn", "a bit flipped", "foreign", "empty"])
def test_a_damaged_file_is_tokenized_again_and_written_over(tok, folder, tokenized, damage):
    first = encode(tok, TEXTS)
    (path,) = folder.glob("*.ids")
    data = path.read_bytes()
    path.write_bytes({"torn": data[:-3], "a bit flipped": data[:-1] + bytes([data[-1] ^ 1]),
                      "foreign": b"PK\x03\x04" + data[4:], "empty": b""}[damage])
    assert torch.equal(encode(tok, TEXTS), first) and len(tokenized) == 2
    assert path.read_bytes() == data  # written over, whole again
    assert torch.equal(encode(tok, TEXTS), first) and len(tokenized) == 2


def test_a_cache_that_cannot_be_written_leaves_the_run_as_it_was(tok, tmp_path, monkeypatch, tokenized):
    (tmp_path / "file").write_text("in the way")
    monkeypatch.setenv(streams.STREAMS_ENV, str(tmp_path / "file" / "streams"))
    assert torch.equal(encode(tok, TEXTS), encode(tok, TEXTS)) and len(tokenized) == 2


def test_a_cache_folder_that_cannot_be_found_leaves_the_run_as_it_was(tok, monkeypatch, tokenized):
    def homeless(cls):
        raise RuntimeError("Could not determine home directory.")  # Path.home: no $HOME, a uid without a passwd entry

    for name in (streams.STREAMS_ENV, "SPECUI_CACHE", "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(Path, "home", classmethod(homeless))
    assert torch.equal(encode(tok, TEXTS), FRESH(tok, TEXTS)) and len(tokenized) == 1


def test_a_ctrl_c_while_writing_leaves_no_file(tok, folder, monkeypatch):
    def pressed(*args):
        raise KeyboardInterrupt

    with monkeypatch.context() as patch, pytest.raises(KeyboardInterrupt):
        patch.setattr(os, "replace", pressed)  # the file written, not yet renamed into place
        encode(tok, TEXTS)
    assert not list(folder.iterdir())


class _Words:
    """A pre-tokenizer of Python code: a backend with it cannot be written out (`to_str` raises)."""

    def pre_tokenize(self, pretok):
        pretok.split(lambda i, s: s.split(" ", "isolated"))


def test_a_tokenizer_that_cannot_be_written_out_is_tokenized_by_its_own_call_and_kept_nowhere(tok, folder):
    custom = copy.deepcopy(tok)
    custom.backend_tokenizer.pre_tokenizer = tokenizers.pre_tokenizers.PreTokenizer.custom(_Words())
    with pytest.raises(Exception):
        custom.backend_tokenizer.to_str()
    want = [t for ids in custom(TEXTS, add_special_tokens=False)["input_ids"] for t in (custom.eos_token_id, *ids)]
    assert encode(custom, TEXTS).tolist() == want
    assert streams.stream_key("encode_stream", custom, TEXTS) is None
    assert not folder.exists() or not any(folder.iterdir())


def test_a_cold_cache_writes_the_tokenizer_out_once(tok, folder):
    """Its backend serialized (a vocabulary's JSON: about a second for SmolLM2's) for the key and the tokenizing alike:
    once a call, where a cold cache wrote it out twice."""
    asked = []
    counting = copy.deepcopy(tok)
    counting.__class__ = type("Counting", (type(tok),), {"backend_tokenizer": property(
        lambda self: asked.append(1) or self._tokenizer)})
    cold = encode(counting, TEXTS)
    assert len(asked) == 1  # keyed and tokenized
    warm = encode(counting, TEXTS)
    assert len(asked) == 2  # keyed and read
    assert torch.equal(cold, FRESH(tok, TEXTS)) and torch.equal(warm, cold)


def kept(folder: Path) -> list[str]:
    return sorted(path.name for path in folder.glob("*.ids"))


def test_the_least_recently_used_streams_go_beyond_the_budget_and_the_user_is_told(tok, folder, monkeypatch, capsys):
    sets = [[text * (i + 1)] for i, text in enumerate([TEXTS[0], TEXTS[1], TEXTS[0] + TEXTS[1]])]
    names = []
    for age, texts in enumerate(sets):  # three streams, the first the oldest
        encode(tok, texts)
        (name,) = set(kept(folder)) - set(names)
        names.append(name)
        os.utime(folder / name, (1000 + age, 1000 + age))
    sizes = {name: (folder / name).stat().st_size for name in names}
    monkeypatch.setattr(streams, "BUDGET", sizes[names[2]] + sizes[names[0]] + max(sizes.values()))
    encode(tok, sets[0])  # read: the most recently used now
    assert kept(folder) == sorted(names) and not capsys.readouterr().err
    encode(tok, TEXTS)  # a fourth: the budget holds three, and the second is the least recently used
    err = capsys.readouterr().err
    assert names[1] not in kept(folder) and len(kept(folder)) == 3
    assert err.count("\n") == 1 and "removed 1 older token stream (" in err and str(folder) in err, err
    monkeypatch.setattr(streams, "BUDGET", 1)  # the new one is kept, whatever its size
    before = kept(folder)
    encode(tok, [TEXTS[1] * 5])
    assert len(kept(folder)) == 1 and kept(folder)[0] not in before
    assert "removed 3 older token streams" in capsys.readouterr().err



def test_the_budget_removes_kept_streams_alone(tok, folder, monkeypatch):
    """A file of the user's that ends in .ids (a folder $SPECUI_STREAMS names may hold others), older than any
    stream, is never removed, whether or not its name looks like a kept stream's; a part file an hour old, left by a
    write killed before its rename, goes, and one being written stays."""
    encode(tok, TEXTS)
    (older,) = kept(folder)
    theirs = {"notes.ids": b"my own ids", f"encode_stream-{'0' * 32}.ids": b"not a stream of specui's"}
    for name, data in theirs.items():
        (folder / name).write_bytes(data)
        os.utime(folder / name, (1000, 1000))
    left, writing = folder / f".{older}.abcd1234.part", folder / f".{older}.efgh5678.part"
    for part in (left, writing):  # a write killed before its rename, an hour ago; another run's, now
        part.write_bytes(streams.MAGIC)
    os.utime(left, (1000, 1000))
    monkeypatch.setattr(streams, "BUDGET", 0)  # the new stream alone
    encode(tok, TEXTS[:1])
    assert older not in kept(folder) and all((folder / name).read_bytes() == data for name, data in theirs.items())
    assert not left.exists() and writing.exists()


def test_the_user_sets_the_budget_and_is_told_where(tok, folder, monkeypatch, capsys):
    """$SPECUI_STREAMS_BUDGET sets the budget (a size as people write it); a value that is no size is said in one
    line and the default taken; the removal's line names the variable."""
    monkeypatch.setenv(streams.BUDGET_ENV, "2 GB")
    assert streams.stream_budget() == 2 * 10**9
    monkeypatch.setenv(streams.BUDGET_ENV, "lots")
    assert streams.stream_budget() == streams.BUDGET
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and streams.BUDGET_ENV in err and "'lots' is not a size" in err, err
    encode(tok, TEXTS)
    monkeypatch.setenv(streams.BUDGET_ENV, "0")
    encode(tok, TEXTS[:1])
    assert len(kept(folder)) == 1
    err = capsys.readouterr().err
    assert "removed 1 older token stream (" in err and f"${streams.BUDGET_ENV}" in err, err
