"""A models.yaml from elsewhere (a shared config run with --config): a preset's name, or a text setting (its target,
its draft, a revision), that holds a control character is refused at load, the refusal showing it escaped, where
`python -m specui`'s refusals and progress lines printed it to the terminal as it was (an OSC 52 sequence in a name
wrote the clipboard, ESC [2J cleared the screen)."""

from __future__ import annotations

import pytest

from specui.presets import ConfigError, load_config

HOSTILE = "evil\x1b]52;c;cHduZWQ=\x07\x1b[2J"


def _yaml(name: str, target: str) -> str:
    quoted = lambda s: '"' + s.replace("\x1b", "\\e").replace("\x07", "\\a") + '"'  # noqa: E731 (YAML's escapes)
    return f"presets:\n  {quoted(name)}:\n    target: {quoted(target)}\n    drafter: prompt_lookup\n"


@pytest.mark.parametrize("name,target", [(HOSTILE, "org/model"), ("fine", "org/" + HOSTILE)])
def test_a_control_character_in_a_presets_name_or_setting_is_refused_escaped(tmp_path, name, target):
    path = tmp_path / "models.yaml"
    path.write_text(_yaml(name, target), encoding="utf-8")
    with pytest.raises(ConfigError, match="holds a control character") as caught:
        load_config(path)
    assert "\x1b" not in str(caught.value) and "\\x1b" in str(caught.value)


def test_a_plain_name_and_setting_load(tmp_path):
    path = tmp_path / "models.yaml"
    path.write_text(_yaml("fine – ✓ 中文", "org/model"), encoding="utf-8")
    assert load_config(path).default == "fine – ✓ 中文"


@pytest.mark.parametrize("lines", [
    ['"k\\e]52;c;cHduZWQ=\\a": 1'],  # an unknown setting's name
    ['heads: {eagle: "x\\e]52;c;cHduZWQ=\\a\\e[2J"}', "drafter: eagle"],  # a head's folder
    ['heads: {"e\\e[2J": x}'],  # a head's name
    ['drafter_tokens: {"m\\e[2J": 1}'],  # a drafter's name
])
def test_a_control_character_in_a_settings_name_or_a_heads_folder_is_refused_escaped(tmp_path, lines):
    """Every name and text under a preset, not only its name and text settings: an unknown setting's name, a head's
    name and a drafter's were refused as they were written, and a head's folder loaded, then printed as it was by the
    refusal that found no head there (the review of helper D's work: python -m specui wrote each to the terminal)."""
    path = tmp_path / "models.yaml"
    body = "".join(f"    {line}\n" for line in ["target: org/model", *lines])
    path.write_text(f"presets:\n  fine:\n{body}", encoding="utf-8")
    with pytest.raises(ConfigError, match="holds a control character") as caught:
        load_config(path)
    assert "\x1b" not in str(caught.value) and "\\x1b" in str(caught.value), caught.value
