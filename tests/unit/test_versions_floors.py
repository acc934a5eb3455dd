"""requirements.txt's floors and tools/oldest_versions.py in step: the tool pins every floor the files say (or says
why it leaves one as installed), its subset names tests that exist, and the floors raised after a run on the oldest
versions stay raised (each with the reason it was found)."""

import re
from pathlib import Path

import pytest
from packaging.version import Version

from tools import oldest_versions as tool

ROOT = Path(__file__).resolve().parents[2]

# Found by python -m tools.oldest_versions: below these, pip installs versions on which the app does not work
RAISED = {
    "torch": ("2.5", "scaled_dot_product_attention's enable_gqa (specui/lean.py), new in 2.5: read, not run"),
    "tokenizers": ("0.22.1", "transformers 5.0 needs >=0.22; 0.22.0 caps huggingface-hub below gradio 6.31's floor"),
    "safetensors": ("0.4.3", "transformers 5.0 and accelerate ask it"),
    "accelerate": ("1.2.0", "1.0 cannot load a preset (transformers 5.0: device_map needs accelerate>=1.1, and "
                            "imports get_module_size_with_ties, new in 1.2.0)"),
    "gguf": ("0.11", "0.10 imports sentencepiece without requiring it: the default preset cannot convert"),
    "gradio-client": ("2.7.2", "gradio 6.31.0 pins it"),
}


def test_the_tool_pins_every_floor_the_requirements_say():
    said = tool.floors()
    pinned = dict(pin.split("==") for pin in tool.pins())
    assert {name: v for name, v in pinned.items() if name not in tool.TRANSITIVE} == {
        name: v for name, v in said.items() if name not in tool.SKIP}
    assert set(tool.SKIP) <= set(said), "a package the tool leaves as installed is no longer a requirement"
    assert said["transformers"] == "5.0" and said["gradio"] == "6.31.0"  # both files read, `,<6` left out


@pytest.mark.parametrize("name", sorted(RAISED))
def test_a_floor_raised_for_a_reason_stays_raised(name):
    floor, why = RAISED[name]
    assert Version(tool.floors()[name]) >= Version(floor), f"{name}: {why}"


def test_floors_reads_pins_extras_and_comments_and_refuses_a_line_with_no_floor(tmp_path):
    good = tmp_path / "good.txt"
    good.write_text("-r other.txt\n# a comment\nfoo_bar>=1.2  # why\nbaz[extra]==3.0\nqux>=0.4,<1\n")
    assert tool.floors([good]) == {"foo-bar": "1.2", "baz": "3.0", "qux": "0.4"}
    bad = tmp_path / "bad.txt"
    bad.write_text("foo>=1\nbar\n")
    with pytest.raises(ValueError, match="bad.txt: 'bar' has no floor"):
        tool.floors([bad])


def test_the_subset_names_tests_that_exist():
    for part in tool.SUBSET:
        files = [ROOT / a for a in part if a.endswith(".py")]
        assert files and all(f.is_file() for f in files), part
        if "-k" in part:
            names = " ".join(re.findall(r"^def (test_\w+)", "".join(f.read_text() for f in files), re.M))
            words = [w for w in part[part.index("-k") + 1].split() if w not in ("or", "and", "not")]
            assert all(w in names for w in words), (part, words)


def test_a_transitive_pin_that_became_a_requirement_takes_the_files_floor(monkeypatch):
    """TRANSITIVE's huggingface-hub overrode the files' floor: a requirement `huggingface-hub>=1.20` was pinned 1.16.0,
    below what the files allow, and the check above, which leaves TRANSITIVE's names out, did not see it."""
    monkeypatch.setattr(tool, "floors", lambda: {"transformers": "5.0", "huggingface-hub": "1.20"})
    assert tool.pins() == ["huggingface-hub==1.20", "transformers==5.0"]


def test_no_install_without_a_venv_is_refused_in_a_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:
        tool.main(["--no-install", "--venv", str(tmp_path / "none")])
    assert stop.value.code == 2 and "holds no venv; build it first" in capsys.readouterr().err
