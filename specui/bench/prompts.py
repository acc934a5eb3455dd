"""The benchmark's prompts: the built-in held-out ones (stdlib test files), a --prompts file's texts, and token ids
from texts (as plain text or as a user turn in the chat template). Also the tools' way to the same prompts."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from specui import corpus
from specui.presets import ConfigError


def builtin_prompts(tokenizer, *, count: int, length: int) -> list[list[int]]:
    """Held-out prompts: `length` tokens from the middle of stdlib test files (specui.evaluate's set)."""
    _, held_out = corpus.split_sources()
    prompts = corpus.held_out_prompts(tokenizer, held_out, count=count, length=length)
    if not prompts:
        raise SystemExit("no held-out stdlib test file is long enough for a built-in prompt; use --prompts")
    return prompts


def read_prompt_texts(path: str) -> tuple[list[str], str]:
    """The prompts of a JSON Lines file, one {"prompt": "..."} per line (checked before any model loads; a bad file is a
    ConfigError: one line, as the other mistakes of the command line), and the SHA-256 of the bytes they were read
    from (the report's: the file may be edited or moved while the run goes on)."""
    try:
        data = Path(path).read_bytes()
        lines = data.decode("utf-8").splitlines()
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path}: not UTF-8 text (byte {e.start}); save it as UTF-8") from None
    except OSError as e:
        raise ConfigError(f"{path}: cannot be read ({e.strerror or e})") from None
    texts = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            text = json.loads(line)
        except json.JSONDecodeError:
            raise ConfigError(f'{path}:{n}: not JSON; the file is JSON Lines, one {{"prompt": "..."}} per line '
                              "(a plain text line needs quoting as one)") from None
        text = text.get("prompt") if isinstance(text, dict) else None
        if not isinstance(text, str) or not text:
            raise ConfigError(f'{path}:{n}: expected a JSON object {{"prompt": "<non-empty text>"}}')
        texts.append(text)
    if not texts:
        raise ConfigError(f"{path}: no prompts")
    return texts, hashlib.sha256(data).hexdigest()


def tokenize_prompts(texts: list[str], tokenizer, *, chat: bool = False) -> list[list[int]]:
    """Token ids of each text; with `chat`, as a user turn in the tokenizer's chat template."""
    if chat:
        prompts = [list(tokenizer.apply_chat_template([{"role": "user", "content": t}], add_generation_prompt=True,
                                                      tokenize=True, return_dict=True)["input_ids"]) for t in texts]
    else:
        prompts = [list(tokenizer(text)["input_ids"]) for text in texts]
    for n, ids in enumerate(prompts, 1):
        if not ids:
            raise SystemExit(f"prompt {n} is empty after tokenization")
    return prompts
