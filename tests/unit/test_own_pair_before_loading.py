"""A workstation user's own models.yaml entry: mistakes that can be known before any model loads are said then, in one
line that says what to change (specui.load_checks.check_before_loading), not after the target has loaded."""

from __future__ import annotations

from pathlib import Path

import pytest

from specui.load_checks import LoadError, check_before_loading
from specui.presets import parse_config


def _preset(folder: Path, **body):
    (folder / "t").mkdir(exist_ok=True)
    (folder / "t" / "config.json").write_text("{}")
    return parse_config({"presets": {"own": {"target": "t", **body}}}, path=folder / "models.yaml").get("own")


def test_a_head_folder_that_is_not_there_is_said_before_the_target_loads(tmp_path):
    """`heads: {eagle: heads/eagle}` naming no folder was said only once the target had loaded (the head loads after
    it: a large target's minutes); now at once, naming the key and the folder."""
    preset = _preset(tmp_path, drafter="eagle", heads={"eagle": "heads/eagle"})
    with pytest.raises(LoadError) as refused:
        check_before_loading(preset)
    said = str(refused.value)
    assert f"heads.eagle: the head folder {tmp_path / 'heads' / 'eagle'} has no specui_head.json (train one" in said
    assert "\n" not in said


def test_a_folder_that_holds_a_gguf_file_says_to_give_the_file(tmp_path):
    """A folder of GGUF files given as the model (`--target models/`), where the file itself is what specui converts:
    'has no config.json' and the file to give instead, where it said to check the path alone."""
    (tmp_path / "gguf").mkdir()
    (tmp_path / "gguf" / "qwen2.5-0.5b-q8_0.gguf").write_bytes(b"GGUF")
    with pytest.raises(LoadError) as refused:
        check_before_loading(_preset(tmp_path, draft="gguf"))
    said = str(refused.value)
    assert "the draft folder" in said and "has no config.json" in said
    assert f"give that file as the draft ({tmp_path / 'gguf' / 'qwen2.5-0.5b-q8_0.gguf'})" in said


def test_four_bit_on_a_machine_without_cuda_says_which_key_to_change(tmp_path):
    """bitsandbytes' 4-bit needs CUDA: on a CPU machine the user's own preset is told which key to set to none, where
    it said only to choose another preset."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA: 4-bit quantization is allowed")
    for key in ("quantization", "draft_quantization"):
        body = {key: "4bit", "draft": "t"}
        with pytest.raises(LoadError, match=f"asks for 4bit quantization, which needs a CUDA GPU .* set {key}: none "
                                            "for presets.own in models.yaml") as refused:
            check_before_loading(_preset(tmp_path, **body))
        # the dtype it suggests instead is one the load takes: bfloat16 on a CPU for the lean forward's kinds alone
        # (check_exact_forward), where it said 'dtype: bfloat16 for half the memory' to a GPT-2 preset too
        assert "bfloat16 halves the memory of a Llama, Mistral or Qwen2 target" in str(refused.value)


def test_half_precision_for_a_kind_the_lean_forward_does_not_compute_is_said_before_the_weights_load(tmp_path):
    """A local GPT-2 folder with dtype: bfloat16 on a CPU is refused from its config.json, before its weights load (a
    large one's minutes), as the load itself refuses it (test_own_pair_loads); a Llama folder, and float32, pass."""
    import json

    import torch

    preset = _preset(tmp_path, dtype="bfloat16", device="cpu")
    (tmp_path / "t" / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    with pytest.raises(LoadError, match=r"the target .* is a 'gpt2' model, which runs its own transformers forward on "
                                        r"this CPU .* Set dtype: float32 \(or auto\) for presets.own in models.yaml"):
        check_before_loading(preset)
    check_before_loading(_preset(tmp_path, dtype="float32", device="cpu"))
    (tmp_path / "t" / "config.json").write_text(json.dumps({"model_type": "llama"}))
    check_before_loading(preset)
    if not torch.cuda.is_available():  # the device left out: this CPU, as the load would choose
        half = _preset(tmp_path, dtype="float16")
        (tmp_path / "t" / "config.json").write_text(json.dumps({"model_type": "phi3"}))
        with pytest.raises(LoadError, match="is a 'phi3' model"):
            check_before_loading(half)


def test_a_head_or_a_specui_draft_given_in_the_wrong_place_says_where_it_goes(tmp_path):
    """A trained head's folder given as the draft model said only 'has no config.json. Check the path'; a specui draft
    (borrowed embeddings, no tokenizer) given as the target failed as its tokenizer was read ('has no tokenizer ...
    save the model's tokenizer beside its weights'), which no save could fix. Each now says where it goes."""
    (tmp_path / "eagle").mkdir()
    (tmp_path / "eagle" / "specui_head.json").write_text("{}")
    with pytest.raises(LoadError, match=r"the draft folder .*eagle has no config.json. It is a specui head "
                                        r"\(specui_head.json\): list it under the preset's heads"):
        check_before_loading(_preset(tmp_path, draft="eagle"))
    (tmp_path / "chat-draft").mkdir()
    (tmp_path / "chat-draft" / "specui_draft.json").write_text("{}")
    preset = parse_config({"presets": {"own": {"target": "chat-draft"}}}, path=tmp_path / "models.yaml").get("own")
    with pytest.raises(LoadError, match=r"the target folder .*chat-draft is a specui draft \(specui_draft.json\), "
                                        r"which drafts for its target .*: give it as the draft"):
        check_before_loading(preset)
