"""`python -m specui.train` end to end at a toy size (the real stdlib corpus and tokenizer training, a
few optimiser steps): it writes complete Hugging Face folders that load offline, with held-out
figures and a model card, and two runs with the same arguments write the same weights."""

from __future__ import annotations

import contextlib
import io
import json
import shlex

import pytest
from safetensors import safe_open

pytestmark = pytest.mark.slow  # trains a toy pair end to end

TOY = ["--vocab-size", "512", "--max-positions", "512", "--seq-len", "64", "--batch-size", "2",
       "--target-layers", "2", "--target-width", "32", "--target-heads", "2", "--target-ffn", "64",
       "--draft-layers", "1", "--draft-width", "32", "--draft-heads", "2", "--draft-ffn", "64",
       "--target-steps", "3", "--draft-steps", "2", "--warmup-steps", "1", "--distill-sequences", "2",
       "--eval-bytes", "20000", "--alpha-prompts", "2", "--alpha-new-tokens", "8", "--speedup-prompts", "0", "--bf16", "--threads", "1"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    from specui import train

    runs = [tmp_path_factory.mktemp(f"run{i}") for i in range(2)]
    for out in runs:
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):  # what the run says last: how to try the pair
            train.main(["--out", str(out), *TOY])
        (out / "printed.txt").write_text(printed.getvalue())
    return runs


def test_the_folders_load_offline_with_figures_and_a_card(trained, monkeypatch):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    out = trained[0]
    for name in ("specui-target", "specui-draft"):
        folder = out / name
        model = AutoModelForCausalLM.from_pretrained(folder)
        tokenizer = AutoTokenizer.from_pretrained(folder)
        assert model.config.vocab_size == len(tokenizer) == 512
        for shard in folder.glob("*.safetensors"):
            with safe_open(shard, "pt") as f:
                assert all(f.get_slice(k).get_dtype() == "F16" for k in f.keys())
        facts = json.loads((folder / "specui_training.json").read_text())
        assert facts["command"].startswith("python -m specui.train") and "--target-steps 3 " in facts["command"]
        assert facts["config"]["bf16"] is True and " --bf16" in facts["command"]
        assert "python -m specui.train" in (folder / "README.md").read_text()
    results = json.loads((out / "specui-target" / "eval_results.json").read_text())
    assert results["target_bpb"] > 0 and results["draft_bpb"] > 0 and 0 <= results["alpha"] <= 1
    assert f"{results['target_bpb']:.3f}" in (out / "specui-target" / "README.md").read_text()


def test_the_same_arguments_rebuild_the_same_weights(trained):
    first, second = trained
    for name in ("specui-target", "specui-draft"):
        shards = sorted(p.name for p in (first / name).glob("*.safetensors"))
        assert shards
        for shard in shards:
            assert (first / name / shard).read_bytes() == (second / name / shard).read_bytes(), f"{name}/{shard}"


def test_the_command_printed_at_the_end_loads_the_pair_and_drafts_exactly(trained):
    from specui.loading import load_pair
    from specui.presets import COMMAND_LINE, load_config, with_pair

    out = trained[0]
    last = (out / "printed.txt").read_text().strip().splitlines()[-1]
    argv = shlex.split(last.removeprefix("to try it: "))
    assert argv == ["python", "app.py", "--target", str(out / "specui-target"), "--draft", str(out / "specui-draft")]
    pair = load_pair(with_pair(load_config(), argv[3], argv[5]).get(COMMAND_LINE))  # as app.py reads them
    engine = pair.engine()
    prompt = pair.tokenizer("def main(argv=None):\n")["input_ids"]
    plain = engine.generate(prompt, max_new_tokens=16, speculative=False).token_ids
    assert engine.generate(prompt, max_new_tokens=16, num_draft_tokens=3, drafter="model").token_ids == plain


def test_a_draft_retrained_alone_keeps_the_targets_settings_in_both_cards(trained, tmp_path):
    """--stage draft refuses the target's settings (the target in --out is read as it was trained), and the cards
    then recorded this run's defaults for them: the target's 'command that rebuilds the pair' lost --target-layers 2,
    --target-steps 3 ..., so it built another target."""
    import shutil

    from specui import train
    from specui.train.cli import TARGET_ONLY

    out = tmp_path / "pair"
    shutil.copytree(trained[0], out)
    target_flags = {"--" + name.replace("_", "-") for name in TARGET_ONLY}
    draft_only = [a for i, a in enumerate(TOY) if a not in target_flags and TOY[i - 1] not in target_flags]
    with contextlib.redirect_stdout(io.StringIO()):
        train.main(["--out", str(out), "--stage", "draft", "--overwrite", *draft_only])
    built = json.loads((trained[0] / "specui-target" / "specui_training.json").read_text())
    for name in ("specui-target", "specui-draft"):
        facts = json.loads((out / name / "specui_training.json").read_text())
        assert {k: facts["config"][k] for k in TARGET_ONLY} == {k: built["config"][k] for k in TARGET_ONLY}, name
        assert "--target-layers 2 " in facts["command"] and "--target-steps 3 " in facts["command"], name
