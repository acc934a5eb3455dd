"""The benchmark's built-in stdlib prompts come from `specui.corpus.list_sources`: the same files as the walk of every
`*.py` under the stdlib (so the same prompts as before), without entering its site-packages, once per process."""

from __future__ import annotations

import os
from pathlib import Path

from specui import corpus


def every_py_file(root: Path) -> list[Path]:
    """The reference: every `*.py` file under `root` (Path.rglob), then those under an excluded folder dropped."""
    found = [p.relative_to(root) for p in root.rglob("*.py") if p.is_file()]
    return sorted((p for p in found if corpus.EXCLUDED_DIRS.isdisjoint(p.parts[:-1])), key=lambda p: p.as_posix())


def test_the_stdlibs_sources_are_those_of_a_walk_of_every_file_read_once_never_in_site_packages(monkeypatch,
                                                                                                   tmp_path):
    (tmp_path / "a" / "site-packages" / "b").mkdir(parents=True)
    (tmp_path / "a" / "test_x" / "__pycache__").mkdir(parents=True)
    (tmp_path / "dir.py").mkdir()  # a folder named like a source
    for name in ("top.py", "a/one.py", "a/site-packages/b/no.py", "a/test_x/held.py", "a/test_x/__pycache__/no.py",
                 "a/notes.txt", "a/.hidden.py"):
        (tmp_path / name).write_text("x = 1\n")
    (tmp_path / "a" / "linked.py").symlink_to(tmp_path / "top.py")
    (tmp_path / "a" / "broken.py").symlink_to(tmp_path / "gone.py")
    (tmp_path / "loop").symlink_to(tmp_path / "a")  # not entered, as rglob does not
    scanned = []
    real = os.scandir
    monkeypatch.setattr(os, "scandir", lambda path=".": scanned.append(Path(path)) or real(path))
    assert corpus.list_sources(tmp_path) == [
        Path(p) for p in ("a/.hidden.py", "a/linked.py", "a/one.py", "a/test_x/held.py", "top.py")]
    assert tmp_path / "a" / "test_x" in scanned and not any("site-packages" in p.parts for p in scanned)
    assert corpus.list_sources(tmp_path) == every_py_file(tmp_path)

    sources = corpus.list_sources()  # the stdlib's site-packages held 21,616 files here
    scanned.clear()
    assert corpus.list_sources() == sources and not scanned  # once per process
    monkeypatch.undo()
    assert sources == every_py_file(corpus.stdlib_root())  # the same files, so the same prompts
    train, held_out = corpus.split_sources()
    assert held_out and train and sorted(train + held_out) == sorted(sources)


def test_the_stdlibs_kept_list_is_of_the_stdlib_it_was_walked_for(monkeypatch, tmp_path):
    """The kept list answers for the root it was walked from: where `stdlib_root` now says another folder (a test's
    tree, as the trainers' tests may point it), list_sources and read_texts agree on that folder's files, where the
    first root's list came back and its paths were read under the new root."""
    assert corpus.list_sources()  # the real stdlib's, kept
    (tmp_path / "test_a").mkdir()
    (tmp_path / "test_a" / "held.py").write_text("x = 1\n")
    (tmp_path / "train.py").write_text("y = 2\n")
    monkeypatch.setattr(corpus, "stdlib_root", lambda: tmp_path)
    assert corpus.list_sources() == [Path("test_a/held.py"), Path("train.py")]
    assert corpus.split_sources() == ([Path("train.py")], [Path("test_a/held.py")])
    monkeypatch.undo()
    assert len(corpus.list_sources()) > 100  # the real stdlib's again
