"""checkpoint.save_folder as a user's disk and kills meet it: the earlier run's folder is never lost, not when the
save is killed between its two renames (the earlier folder then lies aside, at .NAME.old), nor when the second
rename fails (a folder another program opened on Windows, a permission, a path that became a file)."""

from __future__ import annotations

import os

import pytest

from specui.train import checkpoint


def _earlier(folder):
    folder.mkdir(parents=True)
    (folder / "weights").write_text("the earlier run's")
    return {"weights": "the earlier run's"}


def _files(folder) -> dict:
    return {p.name: p.read_text() for p in folder.iterdir()}


def _fails(place):
    (place / "weights").write_text("half of the new")
    raise OSError(28, "No space left on device")


def test_a_save_killed_between_its_renames_leaves_the_earlier_folder_to_the_next_save(tmp_path):
    """A kill between the two renames left the earlier folder at .NAME.old, and no NAME: the next save deleted it
    before it wrote a byte, so a second failure (or a run the user stops) lost the earlier run for good."""
    folder = tmp_path / "eagle"
    earlier = _earlier(tmp_path / ".eagle.old")  # as a kill between the renames left it
    with pytest.raises(OSError):
        checkpoint.save_folder(folder, _fails)
    assert _files(folder) == earlier
    assert sorted(p.name for p in tmp_path.iterdir()) == ["eagle"]


def test_a_second_rename_that_fails_puts_the_earlier_folder_back(tmp_path, monkeypatch):
    """The earlier folder, renamed aside, stayed at .NAME.old (hidden, deleted by the next save) when the new one
    could not be renamed into its place."""
    folder = tmp_path / "draft"
    earlier = _earlier(folder)
    real, calls = os.replace, []

    def second_fails(src, dst):
        calls.append(src)
        if len(calls) == 2:
            raise PermissionError(13, "Permission denied", str(dst))
        return real(src, dst)

    monkeypatch.setattr(checkpoint.os, "replace", second_fails)
    with pytest.raises(PermissionError):
        checkpoint.save_folder(folder, lambda place: (place / "weights").write_text("the new run's"))
    assert _files(folder) == earlier
    assert sorted(p.name for p in tmp_path.iterdir()) == ["draft"]


def test_a_save_replaces_the_earlier_folder_whole(tmp_path):
    folder = tmp_path / "eagle"
    _earlier(folder)
    (folder / "stale-shard").write_text("the earlier run's only")
    checkpoint.save_folder(folder, lambda place: (place / "weights").write_text("the new run's"))
    assert _files(folder) == {"weights": "the new run's"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["eagle"]
