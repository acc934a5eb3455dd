"""`python -m specui.train heads` end to end at toy size on the bundled target: every head trains,
checkpoints, resumes from its checkpoint and cached target states, saves a folder that a preset's
`heads:` loads, and drafts exactly (greedy output equals plain decoding)."""

import json

import pytest

from specui.loading import load_pair
from specui.presets import load_config
from specui.train.heads import main
from tests.helpers import BUNDLED_TARGET

pytestmark = pytest.mark.skipif(not BUNDLED_TARGET.exists(), reason="the bundled pair is not built")


def test_train_resume_save_load_and_draft(tmp_path, capsys):
    out = tmp_path / "heads"
    args = ["--preset", "bundled", "--out", str(out), "--windows", "24", "--seq", "64", "--batch", "4",
            "--steps", "6", "--checkpoint-every", "3", "--threads", "1", "--exit-layer", "8", "--medusa-heads", "3"]
    main(args)
    assert json.loads((out / "run.json").read_text())["steps"] == 6
    main([*args[:-6], "--steps", "9", "--threads", "1", "--exit-layer", "8", "--medusa-heads", "3", "--resume"])
    log = capsys.readouterr().out
    assert "resumed from" in log and "at step 6" in log and "target states read from" in log
    assert json.loads((out / "run.json").read_text())["steps"] == 9

    config_file = tmp_path / "models.yaml"
    bundled = load_config().get("bundled")
    config_file.write_text(
        "default: b\npresets:\n  b:\n"
        f"    target: {bundled.target}\n    draft: {bundled.draft}\n    dtype: float32\n    heads:\n"
        + "".join(f"      {name}: {out / name}\n" for name in ("eagle", "medusa", "early_exit")))
    pair = load_pair(load_config(config_file).get("b"))
    engine = pair.engine()
    assert engine.drafters == ("model", "eagle", "medusa", "early_exit", "prompt_lookup")
    meta = json.loads((out / "eagle" / "specui_head.json").read_text())
    assert meta["kind"] == "eagle" and meta["steps"] == 9 and meta["preset"] == "bundled"
    prompt = pair.tokenizer("def main(argv=None):\n    parser = ")["input_ids"]
    plain = engine.generate(prompt, max_new_tokens=40, speculative=False).token_ids
    for name in ("eagle", "medusa", "early_exit"):
        assert engine.generate(prompt, max_new_tokens=40, num_draft_tokens=3, drafter=name).token_ids == plain
