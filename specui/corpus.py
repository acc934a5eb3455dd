"""The training corpus: the Python standard library's source code of the running interpreter.

Every machine that runs specui has this corpus, so the bundled model pair can be rebuilt anywhere
without a download. Files under a test folder (`test`, `tests`, `idle_test`, `test_*`, ...) are the
held-out evaluation set; everything else is training data. `site-packages` is never read.
File order is sorted by relative path, so every function here is deterministic.
"""

import fnmatch
import functools
import os
import sysconfig
from pathlib import Path

PROMPT_TOKENS = 256  # held-out prompt length for alpha and speedup
EXCLUDED_DIRS = frozenset({"site-packages", "dist-packages", "__pycache__"})


def stdlib_root() -> Path:
    """The directory that holds the standard library's pure-Python modules."""
    return Path(sysconfig.get_paths()["stdlib"])


def is_test_dir(name: str) -> bool:
    """True for a directory name that holds tests: test, tests, idle_test, test_json, ..."""
    return name in {"test", "tests"} or name.startswith("test_") or name.endswith(("_test", "_tests"))


def is_held_out(relative: Path) -> bool:
    """True when any directory component of `relative` is a test folder."""
    return any(is_test_dir(part) for part in relative.parts[:-1])


def list_sources(root: Path | None = None) -> list[Path]:
    """Every `*.py` file under `root` (the stdlib by default: walked once per process, as it does not change while one
    runs), sorted, relative to `root`. The walk never enters an excluded folder: the stdlib's own site-packages may
    hold ten times its files."""
    return list(_stdlib_sources(stdlib_root()) if root is None else _walk(Path(root)))


@functools.cache
def _stdlib_sources(root: Path) -> tuple[Path, ...]:
    """The stdlib's files, kept per root: `stdlib_root` pointed elsewhere (a test, a caller) is walked afresh."""
    return _walk(root)


def _walk(root: Path) -> tuple[Path, ...]:
    paths = []
    for folder, dirs, files in os.walk(root):  # as Path.rglob: symlinked folders are not entered
        dirs[:] = [d for d in dirs if d not in EXCLUDED_DIRS]
        base = Path(folder).relative_to(root)
        paths += [base / name for name in files
                  if fnmatch.fnmatchcase(name, "*.py") and (Path(folder) / name).is_file()]
    return tuple(sorted(paths, key=lambda p: p.as_posix()))


def split_sources(root: Path | None = None) -> tuple[list[Path], list[Path]]:
    """(training files, held-out files), both sorted and relative to `root`."""
    sources = list_sources(root)
    train = [p for p in sources if not is_held_out(p)]
    held_out = [p for p in sources if is_held_out(p)]
    return train, held_out


def read_text(path: Path) -> str | None:
    """A file's text if it is valid UTF-8 (a few stdlib test files are not), else None."""
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        return None


def read_texts(paths: list[Path], *, root: Path | None = None) -> list[str]:
    """The UTF-8 texts of `paths` (relative to `root`), in order, skipping undecodable files."""
    root = stdlib_root() if root is None else Path(root)
    texts = (read_text(root / p) for p in paths)
    return [t for t in texts if t]


def held_out_prompts(tokenizer, held_out: list[Path], *, count: int, length: int = PROMPT_TOKENS) -> list[list[int]]:
    """`count` prompts of `length` tokens, cut from the middle of evenly spaced held-out files."""
    texts = read_texts(held_out)
    prompts = []
    for i in range(len(texts)):
        text = texts[(i * 7919) % len(texts)]  # a fixed stride through the sorted files
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        if len(ids) >= 2 * length:
            middle = len(ids) // 2
            prompts.append(ids[middle - length : middle])
        if len(prompts) == count:
            break
    return prompts
