"""`python -m tools.screenshot`'s command line: --help answers without serving the app (it had taken "--help" for the
picture's path, served the app for half a minute and failed in playwright), and a path it cannot write is refused."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.helpers import ROOT
from tools.screenshot import parse_args


def test_help_answers_at_once_without_serving_the_app():
    done = subprocess.run([sys.executable, "-m", "tools.screenshot", "--help"], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0 and "usage: python -m tools.screenshot" in done.stdout
    assert "Loading" not in done.stderr


def test_the_path_and_the_config_as_documented():
    assert parse_args([]).path == "assets/screenshot.png" and parse_args([]).config is None
    args = parse_args(["runs/shot.png", "other.yaml"])
    assert (args.path, args.config) == ("runs/shot.png", "other.yaml")


@pytest.mark.parametrize("path", ["shot", "shot.gif", "--"])
def test_a_picture_playwright_cannot_write_is_refused_up_front(path, capsys):
    with pytest.raises(SystemExit) as exit_:
        parse_args([path] if path != "--" else ["--", "x.txt"])
    assert exit_.value.code == 2 and "give a .png or .jpg file name" in capsys.readouterr().err
