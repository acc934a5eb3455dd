"""The Chat tab's download of a run, for odd names and prompts: a preset named like a Hub id ("org/model", which
had lost the download: its '/' made the file's name a folder that is not there), quotes, a newline, unicode; the
JSON gives every name and prompt back as it was."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from specui.ui.exports import NAME_CHARS, Exports, file_name
from tests.helpers import ui_config


@pytest.mark.parametrize("name, safe", [
    ("specui-run-bundled-seed0.json", "specui-run-bundled-seed0.json"),
    ("specui-run-Qwen/Qwen2.5-7B-seed1.json", "specui-run-Qwen_Qwen2.5-7B-seed1.json"),
    ('specui-run-my "fast"\npair é-seed2.json', "specui-run-my_fast_pair_-seed2.json"),
    ("../../etc/passwd", "etc_passwd"),
    ("..", "specui"),
])
def test_a_file_name_keeps_what_is_safe(name, safe):
    assert file_name(name) == safe


def test_a_long_name_loses_its_middle():
    name = file_name("specui-run-" + "x" * 300 + "-seed1.json")
    assert len(name) == NAME_CHARS and name.startswith("specui-run-xx") and name.endswith("xx-seed1.json")
    exports = Exports()  # its folder lasts as long as it does
    path = Path(exports.write({"a": 1}, "specui-run-" + "y" * 300 + "-seed1.json"))
    assert path.is_file() and len(path.name) == NAME_CHARS and json.loads(path.read_text()) == {"a": 1}


@pytest.mark.slow  # decodes on the bundled pair
def test_a_run_of_a_preset_named_like_a_hub_id_downloads():
    from specui.loading import PairCache
    from specui.ui.chat_handlers import App, _download
    from specui.ui.request import Settings
    from specui.ui.session import Showcase

    config = ui_config()
    name = 'org/bundled "fast"\nπ'
    config = replace(config, presets={name: replace(config.get(None), name=name)}, default=name)
    app = App(Showcase(config, PairCache()))
    prompt = 'def main(argv):\n    s = "ünïcode ✓ \\"quoted\\"\n'
    *_, (frame, run) = app.showcase.run(prompt, Settings(preset=name, max_new_tokens=8, seed=3))
    assert frame.done and not frame.error, frame.error
    update = _download(app, run)
    assert update["visible"] is True, "the run's download was left out"
    path = Path(update["value"])
    assert path.name == "specui-run-org_bundled_fast_-seed3.json"
    out = json.loads(path.read_text(encoding="utf-8"))
    assert out["preset"] == name and out["settings"]["preset"] == name and out["text"] == run.reply_text
