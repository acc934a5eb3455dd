"""Token streams kept on disk between training runs (`kept_stream`, `common.encode_stream`'s): the next run with the
same tokenizer and texts reads its stream instead of tokenizing again, and the kept streams stay within a budget.

The budget (`BUDGET`, 256 MB; `$SPECUI_STREAMS_BUDGET` sets another, e.g. 1GB): after a stream is written, the
least recently used others (read or written, by their files' times) are removed until all of them fit, the new one
always kept. A size, not a count, since what fills the disk is bytes and a stream's size is its corpus's (the chat
corpus's is about 14 MB, the stdlib's about 13 MB: about 18 such streams fit, more than the corpora and tokenizers a
user trains with at a time). What was removed is said in one line on stderr. Only kept streams are ever removed (a
file named and headed as `kept_stream` writes them): another file in the folder stays.
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
import tempfile
import time
from pathlib import Path

import numpy
import torch

STREAMS_ENV = "SPECUI_STREAMS"  # where they are kept instead (the tests' own folder)
STREAM_FORMAT = 2  # raised whenever what a kept stream holds changes (its ids, the file's layout): older files unread
MAGIC = b"specui token stream\n"
BUDGET = 256 * 2**20  # the bytes the kept streams may take in all (the newest one whatever its size)
BUDGET_ENV = "SPECUI_STREAMS_BUDGET"  # another budget: a size as people write it ("1GB", "512MB"; 0: the newest alone)
ABANDONED = 3600  # seconds after which a stream's part file (`kept_stream` writes one, then renames it) is left over
NAMED = re.compile(r"\w+-[0-9a-f]{32}\.ids")  # a kept stream's file name (`kept_stream`'s path)


def serialized(tokenizer) -> str | None:
    """The tokenizer's fast backend as JSON; None for a slow tokenizer or a backend that cannot be written out (a
    pre-tokenizer or normalizer of Python code)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    try:
        return None if backend is None else backend.to_str()
    except Exception:  # noqa: BLE001 - tokenizers raises its own Exception for a custom component
        return None


def streams_folder() -> Path:
    """Where token streams are kept: $SPECUI_STREAMS, else streams/ in specui's cache folder (`packaged.cache_root`:
    $SPECUI_CACHE, else $XDG_CACHE_HOME/specui or ~/.cache/specui), where the converted GGUF and the native build
    are."""
    from specui.packaged import cache_root

    return Path(os.environ[STREAMS_ENV]).expanduser() if os.environ.get(STREAMS_ENV) else cache_root() / "streams"


def stream_key(name: str, tokenizer, texts: list[str], backend: str | None = None) -> str | None:
    """A SHA-256 of everything `name`'s ids depend on: the function and STREAM_FORMAT, the tokenizers library's
    version (its code does the tokenizing), the tokenizer's class, EOS and whole serialization (its vocabulary,
    merges, normalizer, added tokens: not its name; `backend`, when the caller has it already), every text's bytes.
    None for a tokenizer without a fast backend that can be written out (nothing is kept)."""
    import tokenizers

    backend = serialized(tokenizer) if backend is None else backend
    if backend is None:
        return None
    digest = hashlib.sha256()
    head = f"{name} {STREAM_FORMAT} {tokenizers.__version__} {type(tokenizer).__qualname__} " \
           f"{tokenizer.eos_token_id} {getattr(tokenizer, 'split_special_tokens', None)}"
    for part in (head, backend, *texts):  # each after its length: no two lists give the same bytes
        data = part.encode("utf-8", "surrogatepass")
        digest.update(len(data).to_bytes(8, "little") + data)
    return digest.hexdigest()


def kept_stream(name: str, tokenizer, texts: list[str], tokenize) -> torch.Tensor:
    """`tokenize(backend)`'s stream (backend: the tokenizer's `serialized`, read once), read from the file an earlier
    run kept for the same `stream_key` (in `streams_folder`), else tokenized and kept: written under a temporary name
    and renamed, so runs at once or a Ctrl-C never leave half a file, then older streams removed beyond the budget
    (`prune`). A file that is not whole, or not this key's (its header and the SHA-256 of its ids checked), is never
    trusted: tokenized again and written over. A cache that cannot be written leaves the run as it was."""
    backend = serialized(tokenizer)
    key = stream_key(name, tokenizer, texts, backend)
    try:
        folder = streams_folder()
    except RuntimeError:  # no home folder to find the cache in (Path.home: no $HOME, a uid without a passwd entry)
        key = None
    if key is None:
        return tokenize(backend)
    path = folder / f"{name}-{key[:32]}.ids"
    head = MAGIC + key.encode() + b"\n"
    try:
        data = path.read_bytes()
    except OSError:
        data = b""
    digest, payload = data[len(head):len(head) + 65], data[len(head) + 65:]
    if data.startswith(head) and digest == hashlib.sha256(payload).hexdigest().encode() + b"\n" \
            and len(payload) % 4 == 0:
        try:
            os.utime(path)  # used now: the last that `prune` removes
        except OSError:
            pass
        return torch.from_numpy(numpy.frombuffer(payload, dtype="<i4").astype(numpy.int64))
    stream = tokenize(backend)
    payload = stream.numpy().astype("<i4").tobytes()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, part = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
    except OSError:
        return stream
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(head + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload)
        os.replace(part, path)
    except BaseException as e:  # a full disk, Ctrl-C: no part left behind
        Path(part).unlink(missing_ok=True)
        if not isinstance(e, OSError):
            raise
        return stream
    prune(folder, path, stream_budget())
    return stream


def stream_budget() -> int:
    """The bytes the kept streams may take: `$SPECUI_STREAMS_BUDGET`'s size, else `BUDGET`; a value that is no size is
    said in one line on stderr, and `BUDGET` taken (the stream is a cache: the run goes on)."""
    from specui.cache_pool import parse_bytes

    text = os.environ.get(BUDGET_ENV, "").strip()
    try:
        return parse_bytes(text) if text else BUDGET
    except ValueError as e:
        print(f"specui: ${BUDGET_ENV}: {e}; kept token streams take at most {BUDGET // 2**20} MB", file=sys.stderr,
              flush=True)
        return BUDGET


def is_kept_stream(path: Path) -> bool:
    """Whether `path` is a stream `kept_stream` wrote: its name's form and its header (a file of the user's that
    happens to end in .ids is none)."""
    if not NAMED.fullmatch(path.name):
        return False
    try:
        with path.open("rb") as file:
            return file.read(len(MAGIC)) == MAGIC
    except OSError:
        return False


def prune(folder: Path, new: Path, budget: int) -> list[Path]:
    """Remove the least recently used kept streams of `folder` (`is_kept_stream`, by modification time) but `new`
    until those left take at most `budget` bytes, and say so in one line on stderr; a part file older than
    `ABANDONED` goes too. Returns the streams removed; a file gone meanwhile (another run's prune) or that cannot be
    removed is passed over, and no other file is touched."""
    for part in folder.glob(".*.ids.*.part"):  # a write killed before its rename (SIGKILL, a crash): an hour old
        try:
            if time.time() - part.stat().st_mtime > ABANDONED:
                part.unlink()
        except OSError:
            pass
    found = []
    for path in folder.glob("*.ids"):
        if path != new and not is_kept_stream(path):
            continue
        try:
            info = path.stat()
        except OSError:
            continue
        found.append((path != new, -info.st_mtime, info.st_size, path))  # `new` first, then the newest
    total, removed, freed = 0, [], 0
    for _, _, size, path in sorted(found):
        total += size
        if total > budget and path != new:
            try:
                path.unlink()
            except OSError:
                continue
            removed.append(path)
            freed += size
    if removed:
        print(f"specui: removed {len(removed)} older token stream{'s' * (len(removed) > 1)} ({freed / 2**20:.0f} MB) "
              f"from {folder}: kept streams take at most {budget // 2**20} MB (${BUDGET_ENV}), the most recently used "
              "kept", file=sys.stderr, flush=True)
    return removed
