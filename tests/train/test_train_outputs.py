"""What the training commands leave in --out, as a user training heads or a draft for their own model meets it: a
repeated command is refused in one line before any work instead of replacing an earlier run's weights and checkpoint
(--resume goes on from them, --overwrite replaces them), and a save is whole or absent, never a folder that looks
complete but holds a mix of two runs' files."""

from __future__ import annotations

import pytest

from specui.heads import common
from specui.train import chat, cli, exit_head, heads
from tests.train.test_hardening_train import refused
from tests.train.test_heads_mistakes import TOKENIZER, _args, _tiny

pytestmark = pytest.mark.skipif(not (TOKENIZER / "tokenizer.json").exists(), reason="the bundled tokenizer is absent")


@pytest.fixture(scope="module")
def user(tmp_path_factory):
    """A user's tiny random Llama preset (models.yaml beside it) and one finished heads run's --out."""
    root = tmp_path_factory.mktemp("user")
    _tiny(root / "tiny", 32)
    config = root / "models.yaml"
    config.write_text(f"default: mine\npresets:\n  mine:\n    target: {root / 'tiny'}\n")
    heads.main([*_args(config, root / "run"), "--steps", "2"])
    return config, root / "run"


def _files(folder) -> dict:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


@pytest.mark.slow
def test_a_repeated_heads_or_exit_command_is_refused_before_it_replaces_the_earlier_run(user, capsys):
    config, out = user
    before = _files(out / "eagle")
    line = refused(heads.main, [*_args(config, out), "--steps", "2"], capsys)
    assert line.endswith(f"error: --out {out} already holds {out / 'eagle'} from an earlier run: --resume goes on "
                         "from its checkpoint, --overwrite replaces it, or give another --out")
    assert _files(out / "eagle") == before
    assert heads.parse_args([*_args(config, out), "--overwrite"]).overwrite  # said so: it starts afresh
    assert heads.parse_args([*_args(config, out), "--resume"]).resume
    line = refused(heads.parse_args, [*_args(config, out), "--resume", "--overwrite"], capsys)
    assert line.endswith("--overwrite starts afresh over an earlier run, --resume goes on from it: say one")
    # `python -m specui.train exit` saves the head in --out itself: a head (or its checkpoint) there is refused alike
    exit_args = ["--config", str(config), "--answers", str(out), "--out", str(out / "medusa")]
    line = refused(exit_head.parse_args, exit_args, capsys)
    assert f"--out {out / 'medusa'} already holds {out / 'medusa' / common.META} from an earlier run: " in line


def test_the_chat_draft_and_the_bundled_pair_are_refused_over_an_earlier_run(tmp_path, capsys):
    answers = tmp_path / "answers"
    answers.mkdir()
    (answers / "answers-00000.pt").write_bytes(b"")  # parsing looks for answer files, reading comes later
    out = tmp_path / "chat"
    (out / "draft").mkdir(parents=True)
    line = refused(chat.parse_args, ["--answers", str(answers), "--out", str(out)], capsys)
    assert line.endswith(f"--out {out} already holds {out / 'draft'} from an earlier run: --overwrite replaces it, or "
                         "give another --out")
    assert chat.parse_args(["--answers", str(answers), "--out", str(out), "--overwrite"]).overwrite
    line = refused(chat.parse_args, ["--write-answers", str(answers), "--overwrite"], capsys)
    assert "--overwrite is step 2's (--answers)" in line

    pair = tmp_path / "pair"
    (pair / "specui-target").mkdir(parents=True)
    line = refused(cli.parse_args, ["--out", str(pair)], capsys)  # a target without its draft: a run stopped
    assert line.endswith("the same command with --stage draft trains the draft on it; --overwrite trains both afresh, "
                         "or give another --out")
    assert cli.parse_args(["--out", str(pair), "--overwrite"])[1].overwrite
    assert cli.parse_args(["--out", str(pair), "--stage", "draft"])  # the draft alone: the target is read, not replaced
    (pair / "specui-draft").mkdir()
    (pair / "specui-target" / "eval_results.json").write_text("{}")  # evaluated too: a whole pair (e0eb879)
    line = refused(cli.parse_args, ["--out", str(pair), "--stage", "draft"], capsys)
    assert f"already holds {pair / 'specui-draft'} from an earlier run: --overwrite" in line
    line = refused(cli.parse_args, ["--out", str(pair), "--eval-only", "--overwrite"], capsys)
    assert "--overwrite replaces trained weights, which --eval-only does not train" in line



def fill_the_disk_at_each_save(monkeypatch) -> None:
    """Every safetensors file written from now on ends in a full disk (OSError 28) once written: a save that fails
    midway, which no real disk here does on demand."""
    import safetensors.torch

    real = safetensors.torch.save_file

    def full_disk(tensors, filename, *a, **k):
        real(tensors, filename, *a, **k)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(safetensors.torch, "save_file", full_disk)

@pytest.mark.slow
def test_a_save_that_fails_midway_leaves_the_earlier_head_whole(user, tmp_path, monkeypatch):
    """A disk that fills (or a kill) while --overwrite saves the new heads: the earlier head folder stays as it was,
    byte for byte, not its description over half of the new weights."""
    import shutil

    config, first = user
    out = tmp_path / "run"
    shutil.copytree(first, out)
    before = _files(out / "eagle")
    fill_the_disk_at_each_save(monkeypatch)
    with pytest.raises(OSError):
        heads.main([*_args(config, out), "--steps", "2", "--overwrite", "--seed", "7"])
    assert _files(out / "eagle") == before
    assert sorted(p.name for p in out.iterdir() if p.name.startswith(".")) == []  # no partial folder left behind
