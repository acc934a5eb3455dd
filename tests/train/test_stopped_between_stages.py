"""`python -m specui.train` stopped after its target was saved (Ctrl-C while the draft distils) and typed again: the
refusal names the cheapest command that keeps the trained target (--stage draft, without the target's own flags,
which --stage draft refuses), not --overwrite; that command trains the draft on the saved target, untouched. A pair
stopped while it was evaluated is pointed to --eval-only."""

from __future__ import annotations

import json
import shlex

import pytest

from specui.train import cli, distill
from tests.train.test_train import TOY

pytestmark = pytest.mark.slow  # trains a toy target, then its draft


def _refusal(argv, capsys) -> str:
    with pytest.raises(SystemExit) as exit_:
        cli.parse_args(argv)
    assert exit_.value.code == 2
    return capsys.readouterr().err.strip().splitlines()[-1]


def test_a_run_stopped_before_its_draft_is_pointed_to_stage_draft(tmp_path, monkeypatch, capsys):
    out, argv = tmp_path / "pair", ["--out", str(tmp_path / "pair"), *TOY]

    def ctrl_c(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(distill, "distill_draft", ctrl_c)
    with pytest.raises(KeyboardInterrupt):
        cli.main(argv)
    monkeypatch.undo()
    target = {p.name: p.read_bytes() for p in (out / "specui-target").glob("*.safetensors")}
    assert target and not (out / "specui-draft").exists()
    drop = ["--vocab-size", "--target-layers", "--target-width", "--target-heads", "--target-ffn", "--target-steps",
            "--batch-size"]
    assert _refusal(argv, capsys) == (
        f"python -m specui.train: error: --out {out} holds the target of an earlier run that stopped before its "
        f"draft ({out / 'specui-target'}, no specui-draft): the same command with --stage draft (without "
        f"{', '.join(drop)}: the target's, trained already) trains the draft on it; --overwrite trains both afresh, "
        "or give another --out")
    kept = [a for i, a in enumerate(argv) if a not in drop and (i == 0 or argv[i - 1] not in drop)]
    cli.main([*kept, "--stage", "draft"])  # the command the line says, as a user types it
    assert (out / "specui-draft" / "config.json").is_file()
    assert {p.name: p.read_bytes() for p in (out / "specui-target").glob("*.safetensors")} == target

    (out / "specui-target" / "eval_results.json").unlink()  # as a run stopped while it evaluated the pair leaves it
    assert _refusal(argv, capsys).endswith(
        f"--out {out} holds a pair an earlier run trained and stopped before it evaluated it (no "
        f"{out / 'specui-target' / 'eval_results.json'}): python -m specui.train --eval-only --out {out} "
        f"--eval-bytes 20000 --alpha-prompts 2 --alpha-new-tokens 8 --speedup-prompts 0 --seq-len 64 --threads 1 "
        "evaluates it and writes its model cards; --overwrite trains both afresh, or give another --out")


def test_a_pair_stopped_while_it_was_evaluated_is_evaluated_as_the_run_asked(tmp_path, monkeypatch, capsys):
    """A run stopped while it evaluated the pair, typed again: the --eval-only it named dropped the command's own
    evaluation settings (a toy's --alpha-prompts 2, --speedup-prompts 0 and --threads 1 gave way to 24 prompts and
    the timed speedup); and a --stage draft run stopped so left the earlier draft's eval_results.json beside the new
    draft, then was offered only --overwrite, which trains the draft again. The command named keeps the settings and,
    as printed, evaluates the pair; --stage draft is pointed to it too."""
    from specui.train import evaluate

    out, argv = tmp_path / "pair", ["--out", str(tmp_path / "pair"), *TOY]

    def ctrl_c(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(evaluate, "evaluate_folders", ctrl_c)
    with pytest.raises(KeyboardInterrupt):
        cli.main(argv)
    monkeypatch.undo()
    line = _refusal(argv, capsys)
    command = shlex.split(line.split("eval_results.json): ", 1)[1].split(" evaluates it")[0])
    assert command[:5] == ["python", "-m", "specui.train", "--eval-only", "--out"]
    cli.main(command[3:])  # as printed
    report = json.loads((out / "specui-target" / "eval_results.json").read_text())
    assert (report["alpha_prompts"], report["alpha_new_tokens"], report.get("speedup")) == (2, 8, None)

    drop = ["--vocab-size", "--target-layers", "--target-width", "--target-heads", "--target-ffn", "--target-steps",
            "--batch-size"]
    draft = [*(a for i, a in enumerate(argv) if a not in drop and (i == 0 or argv[i - 1] not in drop)), "--stage",
             "draft"]
    monkeypatch.setattr(evaluate, "evaluate_folders", ctrl_c)
    with pytest.raises(KeyboardInterrupt):
        cli.main([*draft, "--overwrite"])  # the draft trained again, then stopped while it was evaluated
    monkeypatch.undo()
    assert not (out / "specui-target" / "eval_results.json").exists()  # the replaced draft's figures
    assert _refusal(draft, capsys) == line.replace("trains both afresh", "trains the draft afresh")
