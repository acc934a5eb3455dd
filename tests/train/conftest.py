"""The training tests' settings: the offline corpus tokenized once per tokenizer, not once per trainer run.

Every `python -m specui.train.chat` run tokenizes the whole offline corpus to pick its vocabulary
(`chat_data.code_stream`), and every `python -m specui.train` and `heads` run tokenizes the stdlib corpus for its
windows (`common.encode_stream`): tens of seconds each on a busy 2-core machine, the same ids every time.
Here both are remembered, keyed by the tokenizer's whole serialization and the exact texts, so a test still runs the
trainer it names on the same ids."""

from __future__ import annotations

import pytest

from specui.train import chat_cpu, chat_data, cli, common, evaluate, streams

_STREAMS: dict = {}


def _tokenizer_key(tok):
    """What a tokenizer's ids depend on, or None for one without a fast backend (then nothing is remembered)."""
    backend = getattr(tok, "backend_tokenizer", None)
    return None if backend is None else (type(tok).__qualname__, backend.to_str(), tok.eos_token_id)


def remembered(real, name: str):
    """`real(tok, texts)`, each distinct result computed once; a copy is returned, so a caller that writes into its
    stream cannot change the next caller's. Texts None (code_stream's default) are read here, as `real` would read
    them (`chat_data.offline_texts`, looked up at the call): the key holds the corpus's contents, so a test that gives
    the trainer another corpus gets that corpus's ids, not a stream remembered from the real one."""

    def stream(tok, texts=None):
        key = _tokenizer_key(tok)
        if key is None:
            return real(tok) if texts is None else real(tok, texts)
        texts = chat_data.offline_texts() if texts is None else texts
        key = (name, key, tuple(texts))
        if key not in _STREAMS:
            _STREAMS[key] = real(tok, texts)
        return _STREAMS[key].clone()

    stream.__wrapped__ = real
    return stream


@pytest.fixture(scope="module", autouse=True)
def corpus_tokenized_once():
    with pytest.MonkeyPatch.context() as patch:
        code_stream = remembered(chat_data.code_stream, "code_stream")
        encode_stream = remembered(common.encode_stream, "encode_stream")
        for module in (chat_data, chat_cpu):
            patch.setattr(module, "code_stream", code_stream)
        for module in (common, cli, evaluate):
            patch.setattr(module, "encode_stream", encode_stream)
        yield


@pytest.fixture(scope="session", autouse=True)
def streams_kept_apart(tmp_path_factory):
    """The token streams the trainers keep on disk (`streams.kept_stream`) go to the session's own folder, never the
    user's cache: set in the environment, so trainers a test starts as a command keep theirs there too."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(streams.STREAMS_ENV, str(tmp_path_factory.mktemp("streams")))
        yield
