"""`python -m specui.train heads` as a hostile user drives it, on a user's own tiny random Llama preset: each mistake
is one line naming the flag (before the target loads where it can be), a kill never leaves a checkpoint or cache
that a later run misreads, Ctrl-C or SIGTERM saves a checkpoint that --resume goes on from."""

from __future__ import annotations

import os
import re
import shutil
import signal
from pathlib import Path

import pytest
import torch

from specui.train import checkpoint as files
from specui.train import heads
from tests.helpers import ROOT, make_config

TOKENIZER = ROOT / "assets" / "specui-target"
pytestmark = pytest.mark.skipif(not (TOKENIZER / "tokenizer.json").exists(), reason="the bundled tokenizer is absent")


def _tiny(folder: Path, hidden: int) -> None:
    from transformers import AutoTokenizer, LlamaForCausalLM

    tok = AutoTokenizer.from_pretrained(TOKENIZER)
    torch.manual_seed(0)
    LlamaForCausalLM(make_config("llama", vocab_size=len(tok), layers=2, hidden=hidden)).save_pretrained(folder)
    tok.save_pretrained(folder)


@pytest.fixture(scope="module")
def user(tmp_path_factory):
    """A models.yaml with the user's presets (mine: width 32; wide: width 48) and one short run's --out."""
    root = tmp_path_factory.mktemp("user")
    _tiny(root / "tiny", 32)
    _tiny(root / "wide", 48)
    config = root / "models.yaml"
    config.write_text(f"default: mine\npresets:\n  mine:\n    target: {root / 'tiny'}\n"
                      f"  wide:\n    target: {root / 'wide'}\n")
    heads.main([*_args(config, root / "first"), "--steps", "2"])
    return config, root / "first"


def _args(config, out, *extra) -> list[str]:
    return ["--config", str(config), "--out", str(out), "--windows", "12", "--seq", "32", "--batch", "2",
            "--vocab", "64", "--threads", "1", "--checkpoint-every", "1", "--head", "eagle,medusa", *extra]


def _copy(first: Path, tmp_path: Path) -> Path:
    out = tmp_path / "run"
    shutil.copytree(first, out)
    return out


def test_resume_init_and_empty_or_missing_answers_are_refused_before_the_target_loads(tmp_path, capsys):
    for extra, words in ((["--resume"], "--resume: no checkpoint in"),
                         (["--init", str(tmp_path / "missing")], "no saved head for eagle, medusa"),
                         (["--answers", str(tmp_path / "none")], "none is not a folder"),
                         (["--answers", str(tmp_path)], "no answers-*.pt or sampled-*.pt files")):
        with pytest.raises(SystemExit) as exit_:
            heads.parse_args(["--out", str(tmp_path / "out"), *extra])
        assert exit_.value.code == 2 and words in capsys.readouterr().err


def test_a_checkpoint_of_other_heads_in_out_is_refused_with_the_head_that_goes_on(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    files.save({"heads": {"eagle": {}}, "step": 2}, out / "checkpoint.pt")  # an EAGLE run's, as heads.main saves it
    for extra, words in (([], f"--out {out} already holds {out / 'checkpoint.pt'} of the heads eagle from an earlier "
                              "run: --resume --head eagle goes on from it, --overwrite replaces it"),
                         (["--resume"], f"--resume: {out / 'checkpoint.pt'} holds the heads eagle, this run trains "
                                        "medusa: give --head eagle, or another --out")):
        with pytest.raises(SystemExit) as exit_:  # before the target loads, not after
            heads.parse_args(["--out", str(out), "--head", "medusa", *extra])
        assert exit_.value.code == 2 and words in capsys.readouterr().err
    assert heads.parse_args(["--out", str(out), "--head", "medusa", "--overwrite"]).heads == ["medusa"]
    assert heads.parse_args(["--out", str(out), "--head", "eagle", "--resume"]).heads == ["eagle"]


@pytest.mark.slow
def test_a_truncated_or_foreign_checkpoint_is_refused_in_one_line(user, tmp_path):
    config, first = user
    out = _copy(first, tmp_path)
    whole = (out / "checkpoint.pt").read_bytes()
    for broken in (whole[:len(whole) // 2], b"not a checkpoint"):
        (out / "checkpoint.pt").write_bytes(broken)
        with pytest.raises(SystemExit) as exit_:
            heads.main([*_args(config, out), "--steps", "3", "--resume"])
        assert str(exit_.value).startswith(f"--resume: {out / 'checkpoint.pt'} cannot be read (")
    torch.save({"something": "else"}, out / "checkpoint.pt")
    with pytest.raises(SystemExit, match="not a checkpoint of this command"):
        heads.main([*_args(config, out), "--steps", "3", "--resume"])


@pytest.mark.slow
def test_resume_with_other_heads_or_another_vocabulary_is_refused_in_one_line(user, tmp_path, capsys):
    config, first = user
    out = _copy(first, tmp_path)
    with pytest.raises(SystemExit) as exit_:  # as the arguments are parsed
        heads.main([*_args(config, out), "--head", "eagle", "--steps", "3", "--resume"])
    assert exit_.value.code == 2
    assert "holds the heads eagle, medusa, this run trains eagle: give --head" in capsys.readouterr().err
    with pytest.raises(SystemExit, match=r"^--resume: .* heads of another shape \(size mismatch"):
        heads.main([*_args(config, out), "--vocab", "80", "--steps", "3", "--resume"])


@pytest.mark.slow
def test_an_unreadable_states_cache_is_computed_again(user, tmp_path, capsys):
    config, first = user
    out = _copy(first, tmp_path)
    (out / "states.pt").write_bytes((out / "states.pt").read_bytes()[:1000])  # a kill mid-write, before it was atomic
    heads.main([*_args(config, out), "--steps", "3", "--resume"])
    log = capsys.readouterr().out
    assert "states.pt cannot be read" in log and "resumed from" in log and "at step 2" in log


def test_a_write_killed_midway_leaves_the_previous_file(tmp_path, monkeypatch):
    path = tmp_path / "checkpoint.pt"
    files.save({"step": 1}, path)

    def dies(obj, f):  # writes half, then the process "dies"
        Path(f).write_bytes(b"PK\x03\x04half")
        raise KeyboardInterrupt

    monkeypatch.setattr(torch, "save", dies)
    with pytest.raises(KeyboardInterrupt):
        files.save({"step": 2}, path)
    monkeypatch.undo()
    assert files.load_checkpoint(path)["step"] == 1


def signal_during_second_step(monkeypatch, module, signum, *, step_at: int) -> list[int]:
    """`module.lr_at` (a trainer's learning rate, asked once a step; the step its argument `step_at`) made to note each
    step and send `signum` during step 1, the second; returns the steps noted."""
    calls = []

    def signalled(args, *rest):
        step = rest[step_at - 1]
        calls.append(step)
        if step == 1:
            os.kill(os.getpid(), signum)
        return args.lr

    monkeypatch.setattr(module, "lr_at", signalled)
    return calls


@pytest.mark.slow
@pytest.mark.parametrize("signum, word", [(signal.SIGINT, "interrupted"), (signal.SIGTERM, "terminated")])
def test_ctrl_c_or_sigterm_saves_the_step_in_hand_and_resume_goes_on(user, tmp_path, monkeypatch, capsys, signum,
                                                                      word):
    config, first = user
    out = tmp_path / "run"
    calls = signal_during_second_step(monkeypatch, heads, signum, step_at=1)
    argv = _args(config, out, "--steps", "50", "--checkpoint-every", "100")
    with pytest.raises(SystemExit) as exit_:
        heads.main(argv)
    assert exit_.value.code == 128 + signum  # the shell's status for the signal: a stop to resume, not a failure
    assert re.fullmatch(f"{word} at step 2: checkpoint saved in .* with --resume goes on from it",
                        capsys.readouterr().err.splitlines()[-1])
    state = files.load_checkpoint(out / "checkpoint.pt")
    assert state["step"] == 2 and "generator" in state and calls == [0, 1]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # put back
    monkeypatch.undo()
    heads.main([*argv[:-4], "--steps", "3", "--resume"])
    assert "at step 2" in capsys.readouterr().out


@pytest.mark.slow
def test_init_from_heads_of_another_target_and_a_gpt2_target_are_one_line(user, tmp_path):
    from transformers import GPT2LMHeadModel

    config, first = user
    with pytest.raises(SystemExit, match=r"^--init: .*eagle: this head was trained for a target with"):
        heads.main(_args(config, tmp_path / "w", "--preset", "wide", "--init", str(first), "--steps", "1"))

    class Preset:
        name = "g2"

    gpt2 = GPT2LMHeadModel(make_config("gpt2", vocab_size=64, layers=1, hidden=32))
    with pytest.raises(SystemExit, match=r"^--preset g2: its target \(gpt2, GPT2LMHeadModel\) is not a decoder"):
        heads.check_supported(Preset, gpt2)


def test_ctrl_c_anywhere_is_one_line_and_exit_status_130(capsys):
    from specui.command_line import run

    def main(argv):
        raise KeyboardInterrupt  # e.g. inside torch, during the target-states pass

    with pytest.raises(SystemExit) as exit_:
        run(main, "python -m specui.train heads", [])
    assert exit_.value.code == 130 and capsys.readouterr().err == "python -m specui.train heads: interrupted\n"
