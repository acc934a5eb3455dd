"""A workstation user's own models.yaml (`--config`) full of the mistakes people make: each is refused in one line that
names the file and the key and says what to change, before anything loads (where it was refused later in words about
something else, or silently ignored)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from specui.load_checks import LoadError, check_before_loading
from specui.presets import ConfigError, load_config
from tests.helpers import ROOT, save_tiny_model


def _own(tmp_path, preset: str):
    """The preset `own` of a models.yaml in tmp_path whose one line of settings is `preset`."""
    (tmp_path / "models.yaml").write_text(f"presets:\n  own: {{{preset}}}\n")
    return load_config(tmp_path / "models.yaml").get("own")


def _refusal(tmp_path, preset: str) -> str:
    with pytest.raises(ConfigError) as refused:
        _own(tmp_path, preset)
    said = str(refused.value)
    assert "\n" not in said and said.startswith("models.yaml: presets.own."), said
    return said


@pytest.mark.parametrize("setting", ["draft_quantization: 4bit", "draft_quantization: 8bit", "draft_device: cpu",
                                     "draft_revision: main"])
def test_a_draft_setting_in_a_preset_without_a_draft_says_it_needs_a_draft(tmp_path, setting):
    """draft_quantization: 4bit in a prompt-lookup preset was refused as needing a CUDA GPU (bitsandbytes), and on a
    GPU machine ignored, as draft_device and draft_revision were everywhere: settings of a draft model it lacks."""
    key = setting.split(":")[0]
    said = _refusal(tmp_path, f"target: org/model, {setting}")
    assert said.startswith(f"models.yaml: presets.own.{key}: ") and "is for a draft model, and this preset has none" \
        in said and f"remove {key}, or name the draft (draft: its folder or Hub id)" in said, said
    assert "CUDA" not in said
    assert _own(tmp_path, "target: org/model, draft_quantization: none").draft is None  # the default: fine


def test_a_revision_of_a_model_that_is_no_hub_model_is_refused_not_ignored(tmp_path):
    """revision: (a Hub branch, tag or commit) for a local folder or a packaged model was silently ignored by
    from_pretrained: the user meant one revision and got whatever the folder holds."""
    (tmp_path / "mine").mkdir()
    said = _refusal(tmp_path, "target: ./mine, revision: v1.1")
    assert f"presets.own.revision: 'v1.1' is a Hub branch, tag or commit, and the target is no Hub model " \
           f"({tmp_path / 'mine'}): remove revision, or give the target as a Hub id" in said
    said = _refusal(tmp_path, "target: org/model, draft: ./mine, draft_revision: main")
    assert "presets.own.draft_revision: 'main' is a Hub branch" in said and "the draft is no Hub model" in said
    assert _own(tmp_path, "target: org/model, revision: v1.1").revision == "v1.1"  # a Hub model's: kept


@pytest.mark.parametrize("setting, meant", [("drafter: eagel", "eagle"), ("quantization: 4-bit", "4bit"),
                                            ("dtype: bfloat", "bfloat16"), ("device_map: atuo", "auto"),
                                            ("device: cdua", "cuda"), ("dtype: fp16", "float16"),
                                            ("dtype: bf16", "bfloat16"), ("dtype: half", "float16"),
                                            ("device: gpu", "cuda"), ("device: CUDA", "cuda"),
                                            ("quantization: int8", "8bit"), ("drafter: EAGLE", "eagle")])
def test_a_misspelt_value_is_answered_with_the_one_meant(tmp_path, setting, meant):
    """A value one letter off (drafter: eagel, quantization: 4-bit, device_map: atuo) listed the choices alone; a key
    one letter off was answered with the key meant already (test_presets). Other tools' words for a choice (fp16, bf16,
    half, gpu, int8) and another case (CUDA, EAGLE) are too far for the closest spelling, and are answered too."""
    said = _refusal(tmp_path, f"target: org/model, draft: org/draft, {setting}")
    assert said.endswith(f"; did you mean {meant!r}?"), said


def test_a_weights_file_given_for_its_folder_says_to_give_the_folder(tmp_path):
    """`target: ./model/model.safetensors` said 'the target folder ... has no config.json', of a file."""
    save_tiny_model(tmp_path / "model", "llama", layers=1, seed=0)
    weights = next((tmp_path / "model").glob("*.safetensors"))
    preset = _own(tmp_path, f"target: ./model/{weights.name}")
    with pytest.raises(LoadError) as refused:
        check_before_loading(preset)
    said = str(refused.value)
    assert f"(it is a file: give the folder that holds it and config.json, {tmp_path / 'model'})" in said, said
    check_before_loading(_own(tmp_path, "target: ./model"))  # the folder: fine


def test_the_command_line_says_a_config_mistake_in_one_line_before_torch_loads(tmp_path):
    """`python -m specui --config mine.yaml`: the refusal is one line, exit status 2, no traceback, torch not loaded."""
    config = Path(tmp_path / "mine.yaml")
    config.write_text("presets:\n  own: {target: org/model, draft_quantization: 4bit}\n")
    watch = ("import atexit, runpy, sys; atexit.register(lambda: print('torch loaded:', 'torch' in sys.modules, "
             "file=sys.stderr)); runpy.run_module('specui', run_name='__main__')")
    done = subprocess.run([sys.executable, "-c", watch, "--config", str(config), "hi"], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert "error: mine.yaml: presets.own.draft_quantization: '4bit' is for a draft model" in done.stderr
    assert "torch loaded: False" in done.stderr


def test_a_preset_built_in_code_with_a_draft_setting_and_no_draft_is_refused_as_models_yaml_is(tmp_path):
    """`dataclasses.replace(preset, draft_quantization="4bit")` on a preset without a draft: the same refusal before
    loading, where it said 4bit needs a CUDA GPU (or, on a GPU machine, loaded and ignored it)."""
    from dataclasses import replace

    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "config.json").write_text("{}")
    preset = _own(tmp_path, "target: ./mine")
    with pytest.raises(LoadError, match=r"^Preset 'own': draft_quantization: 4bit is for a draft model, and this "
                                        r"preset has none \(its drafter is prompt_lookup\): leave draft_quantization "
                                        r"out, or give a draft$"):
        check_before_loading(replace(preset, draft_quantization="4bit"))


def test_an_apple_gpu_asked_for_on_a_machine_without_one_is_said_before_loading(tmp_path):
    """device: mps where torch has no MPS failed once the tokenizer had loaded, as the weights moved ('PyTorch is not
    linked with support for mps devices'); it is said before anything loads, as a missing CUDA GPU is."""
    import torch

    if torch.backends.mps.is_available():
        pytest.skip("this machine has an Apple GPU")
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "config.json").write_text("{}")
    with pytest.raises(LoadError, match=r"^Preset 'own' asks for device: mps, and this machine has no Apple GPU that "
                                        r"torch can use \(MPS: a Mac with Apple silicon\)\. Leave the device out"):
        check_before_loading(_own(tmp_path, "target: ./mine, device: mps"))


def test_a_refusal_before_loading_names_the_config_file_it_was_read_from(tmp_path):
    """`--config mine.yaml`: a refusal said 'Check the path in models.yaml' and 'set quantization: none ... in
    models.yaml', of a file the user never wrote (specui's own models.yaml, which they might go and edit); it names
    mine.yaml, as a ConfigError of the same file does."""
    import torch

    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "config.json").write_text("{}")
    config = tmp_path / "mine.yaml"
    config.write_text("presets:\n  own: {target: ./mine, draft: ./draft}\n"
                      "  small: {target: ./mine, quantization: 4bit}\n")
    with pytest.raises(LoadError, match=r"the draft folder .* has no config\.json\. Check the path in mine\.yaml "
                                        r"\(local paths are relative to that file\)\.$"):
        check_before_loading(load_config(config).get("own"))
    if not torch.cuda.is_available():
        with pytest.raises(LoadError, match=r"set quantization: none for presets\.small in mine\.yaml "):
            check_before_loading(load_config(config).get("small"))
    (tmp_path / "models.yaml").write_text(config.read_text())
    assert load_config(config).get("own") == load_config(tmp_path / "models.yaml").get("own")  # the same preset



@pytest.mark.parametrize("preset, key, got", [
    ("target: org/model, revision: 1234567", "revision", "1234567, a number"),
    ("target: org/model, revision: 1.0", "revision", "1.0, a number"),
    ("target: 2024", "target", "2024, a number"),
    ("target: org/model, draft: org/draft, draft_revision: yes", "draft_revision", "True, true or false")])
def test_a_text_setting_that_yaml_reads_as_a_number_says_to_quote_it(tmp_path, preset, key, got):
    """`revision: 1234567` (a commit's short hash of digits alone) or `revision: 1.0` (a tag): YAML reads a number,
    which was refused as 'must be a non-empty string' of a value the user sees written there as text; it says what
    YAML read and to put the value in quotes."""
    said = _refusal(tmp_path, preset)
    assert said.startswith(f"models.yaml: presets.own.{key}: ") and \
        said.endswith(f"must be a non-empty string (YAML read {got}: put the value in quotes)"), said
