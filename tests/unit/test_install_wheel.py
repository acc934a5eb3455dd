"""specui installed as a package, not run from a clone: the wheel `pip install .` and `pip install git+https://...`
build from the tracked tree holds every file specui reads at run time (the list derived from `git ls-files`, so a
new .js or asset folder cannot be forgotten in pyproject.toml), and, installed into a fresh virtual environment, it
works from another folder."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow  # builds a wheel (a pip subprocess and a copy of the tree)


def tracked() -> list[str]:
    """The repository's tracked files, as a clone for `pip install git+https://...` has them."""
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: the tracked files are unknown")
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=True, timeout=60)
    return [name for name in out.stdout.split("\0") if name and (ROOT / name).is_file()]


def read_at_run_time(files: list[str]) -> dict[str, str]:
    """{tracked file: where the wheel must hold it} for each file the installed package reads: the package itself
    (its modules, the native sources it compiles, the app's .js and .css)."""
    return {name: name for name in files if name.startswith("specui/")}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel pip builds from a copy of the tracked tree (built there, not in the checkout: setuptools writes
    build/ beside the sources)."""
    source, out = tmp_path_factory.mktemp("tree"), tmp_path_factory.mktemp("wheel")
    for name in tracked():
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, source / name)
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(out),
                           str(source)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (built,) = out.glob("specui-*.whl")
    return built


def test_the_wheel_holds_every_file_specui_reads_at_run_time(wheel):
    with zipfile.ZipFile(wheel) as z:
        held = set(z.namelist())
    missing = sorted(name for name, inside in read_at_run_time(tracked()).items() if inside not in held)
    assert not missing, f"pyproject.toml ships no {missing} in the wheel"
