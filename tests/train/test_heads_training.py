"""`python -m specui.train heads` end to end at toy size on the bundled target: every head trains,
checkpoints, resumes from its checkpoint and cached target states, saves a folder that a preset's
`heads:` loads, and drafts exactly (greedy output equals plain decoding)."""

import json

import pytest
import torch

from specui.loading import load_pair
from specui.presets import load_config
from specui.train import chat, heads
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
    assert engine.drafters == ("model", "model_lookup", "eagle", "medusa", "early_exit", "early_exit_lookup",
                               "prompt_lookup")
    meta = json.loads((out / "eagle" / "specui_head.json").read_text())
    assert meta["kind"] == "eagle" and meta["steps"] == 9 and meta["preset"] == "bundled"
    prompt = pair.tokenizer("def main(argv=None):\n    parser = ")["input_ids"]
    plain = engine.generate(prompt, max_new_tokens=40, speculative=False).token_ids
    for name in ("eagle", "medusa", "early_exit"):
        assert engine.generate(prompt, max_new_tokens=40, num_draft_tokens=3, drafter=name).token_ids == plain


def test_warm_start_from_saved_heads_on_weighted_answer_folders(tmp_path, capsys):
    """--init keeps the saved heads' settings and vocabulary and trains them on; --answers takes several
    folders, FOLDER:WEIGHT drawing one more often."""
    import torch

    from specui.heads.common import load_state
    from specui.train.heads import parse_args, sequences_for

    first = tmp_path / "first"
    common = ["--preset", "bundled", "--seq", "64", "--batch", "4", "--threads", "1", "--head", "medusa,early_exit"]
    main([*common, "--out", str(first), "--windows", "16", "--steps", "2", "--vocab", "300", "--exit-layer", "8",
          "--medusa-heads", "2"])

    gen = torch.Generator().manual_seed(0)
    folders = []
    for name, count in (("a", 3), ("b", 2)):  # answers as python -m specui.train.chat writes them
        folder = tmp_path / name
        folder.mkdir()
        torch.save([{"ids": torch.randint(0, 500, (40,), generator=gen), "prompt_len": 10} for _ in range(count)],
                   folder / "answers-00000.pt")
        folders.append(folder)
    answers = f"{folders[0]},{folders[1]}:3"
    sequences, weights = sequences_for(parse_args(["--answers", answers]), None, None, chat=False)
    assert len(sequences) == 5 and weights == [1.0, 1.0, 1.0, 3.0, 3.0]
    few, few_weights = sequences_for(parse_args(["--answers", answers, "--max-sequences", "3"]), None, None, chat=False)
    kept = [next(i for i, s in enumerate(sequences) if torch.equal(s[0], f[0])) for f in few]
    assert len(kept) == len(set(kept)) == 3 and few_weights == [weights[i] for i in kept]  # a draw, weights kept

    second = tmp_path / "second"
    main([*common, "--out", str(second), "--answers", answers, "--init", str(first), "--steps", "2",
          "--held-out", "0.2", "--states", "none", "--state-batch", "3"])  # --init's settings (a shape flag: refused)
    log = capsys.readouterr().out
    assert "kept from" in log and "ids this data uses most would cover" in log  # and what --vocab would give
    assert (first / "states.pt").exists() and not (second / "states.pt").exists()  # none: kept in memory only
    for name in ("medusa", "early_exit"):
        before, after = load_state(first / name), load_state(second / name)
        assert torch.equal(before["output.token_ids"], after["output.token_ids"]) and len(after["output.token_ids"]) <= 300
        assert json.loads((second / name / "specui_head.json").read_text())["arguments"] == \
            json.loads((first / name / "specui_head.json").read_text())["arguments"]
        assert any(not torch.equal(before[k], after[k]) for k in before)  # trained on

    with pytest.raises(SystemExit) as exit_:  # refused by the parser, before the target loads
        main([*common, "--out", str(tmp_path / "x"), "--answers", answers, "--init", str(first), "--head", "eagle"])
    assert exit_.value.code == 2 and "--init" in (err := capsys.readouterr().err) and "no saved head for eagle" in err


def test_target_continuations_and_a_new_vocabulary_on_a_warm_start(tmp_path, capsys):
    """--continuations trains on the target's own greedy continuations of stdlib windows (written once,
    read back by the next run); --vocab with --init re-picks the draft vocabulary from what the target
    wrote, keeping every trained weight (the output rows are the target's own), --eagle-steps overrides the
    saved head's training-time-test steps, and the head stays exact."""
    import torch

    from specui.heads.common import load_state

    first = tmp_path / "first"
    common = ["--preset", "bundled", "--seq", "48", "--continue-tokens", "16", "--batch", "4", "--threads", "1",
              "--head", "eagle", "--steps", "2"]
    main([*common, "--out", str(first), "--continuations", "6", "--vocab", "300"])
    saved = torch.load(first / "continuations.pt")["sequences"]
    assert saved.shape == (6, 48)

    pair = load_pair(load_config().get("bundled"))
    prompt = saved[0, :32].tolist()  # the target's greedy tokens after the window are the last 16
    plain = pair.engine().generate(prompt, max_new_tokens=16, speculative=False, ignore_eos=True).token_ids
    assert saved[0, 32:].tolist() == plain

    second = tmp_path / "second"
    capsys.readouterr()
    main([*common, "--out", str(second), "--continuations", "6", "--init", str(first), "--vocab", "40",
          "--eagle-steps", "2"])
    log = capsys.readouterr().out
    assert "kept from" not in log and "draft vocabulary: 40 ids" in log and "the target wrote" in log
    before, after = load_state(first / "eagle"), load_state(second / "eagle")
    wrote = torch.cat([s[32:] for s in saved]).unique()
    ids = after["output.token_ids"]
    assert len(ids) == 40 and (len(wrote) > 39 or torch.isin(wrote, ids).all())
    assert before["fc.weight"].shape == after["fc.weight"].shape
    assert json.loads((second / "eagle" / "specui_head.json").read_text())["arguments"]["train_steps"] == 2  # 3 before

    config_file = tmp_path / "models.yaml"
    bundled = load_config().get("bundled")
    config_file.write_text(f"default: b\npresets:\n  b:\n    target: {bundled.target}\n    draft: {bundled.draft}\n"
                           f"    dtype: float32\n    heads:\n      eagle: {second / 'eagle'}\n")
    engine = load_pair(load_config(config_file).get("b")).engine()
    plain = engine.generate(prompt, max_new_tokens=30, speculative=False).token_ids
    assert engine.generate(prompt, max_new_tokens=30, num_draft_tokens=4, drafter="eagle").token_ids == plain


@pytest.mark.parametrize("trainer", [heads, chat])
def test_training_runs_with_tf32_products_and_puts_the_switch_back(trainer, monkeypatch):
    """Both trainers run on a GPU's TF32 tensor cores (the EAGLE head's training ran in plain float32 before), and
    leave the switch as they found it: later CUDA work in the process (tests, benchmarks) keeps float32 products."""
    switches = lambda: (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    seen = []
    monkeypatch.setattr(trainer, "_main", lambda argv=None: seen.append(switches()) or "done")
    monkeypatch.setattr(torch.backends.cuda.matmul, "allow_tf32", False)
    monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", False)
    assert trainer.main(["--anything"]) == "done"
    assert seen == [(True, True)] and switches() == (False, False)
