"""`python -m specui.train` stopped after its target was saved (Ctrl-C while the draft distils) and typed again: the
refusal names the cheapest command that keeps the trained target (--stage draft, without the target's own flags,
which --stage draft refuses), not --overwrite; that command trains the draft on the saved target, untouched. A pair
stopped while it was evaluated is pointed to --eval-only."""

from __future__ import annotations

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
        f"{out / 'specui-target' / 'eval_results.json'}): python -m specui.train --eval-only --out {out} evaluates "
        "it and writes its model cards; --overwrite trains both afresh, or give another --out")
