"""tools.gpu_round refuses a draft shape its trainer (`python -m specui.train.chat`) would refuse as its arguments are
read, in the trainer's words naming its own flag: the trainer starts minutes into the round, on a GPU paid for by the
second, and a mistyped --new-draft or --grow-draft failed only then (in its log, the round's draft lost)."""

from __future__ import annotations

import pytest

from specui.train import chat
from tools import gpu_round


@pytest.mark.parametrize("argv, said", [
    (["--new-draft", "3"], "--new-draft 3: expected LAYERS:TARGET_LAYERS, one shape, e.g. 2:0,1"),
    (["--new-draft", "2:0,1;3:0,1,2"], "--new-draft 2:0,1;3:0,1,2: expected LAYERS:TARGET_LAYERS"),
    (["--new-draft", "0:"], "--new-draft 0:: expected LAYERS:TARGET_LAYERS"),
    (["--new-draft", "2:0,1,2"], "--new-draft 2:0,1,2: 3 target layers for 2 draft layers, one each in order"),
    (["--grow-draft", "2;3"], "--grow-draft 2;3: expected target layer indices separated by commas, e.g. 2,3"),
])
def test_a_draft_shape_the_trainer_would_refuse_is_refused_as_the_arguments_are_read(argv, said, capsys):
    with pytest.raises(SystemExit) as refused:
        gpu_round.parse_args(["--out", "OUT", *argv])
    assert refused.value.code == 2 and said in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["--new-draft", "3:0,1,2"], ["--new-draft", "4:0,1"], ["--grow-draft", "2,3"], []])
def test_a_shape_the_trainer_takes_is_taken(argv, tmp_path):
    args = gpu_round.parse_args(["--out", "OUT", *argv])
    assert (args.new_draft, args.grow_draft) == (dict(zip(argv[::2], argv[1::2])).get("--new-draft"),
                                                 dict(zip(argv[::2], argv[1::2])).get("--grow-draft"))
    answers = tmp_path / "answers"
    answers.mkdir()
    (answers / "answers-00000.pt").touch()
    if args.new_draft:  # and the trainer it is handed to takes it too
        chat.parse_args(["--answers", str(answers), "--out", str(tmp_path / "out"), "--drafts", args.new_draft])


def test_a_budget_too_short_for_any_writer_is_refused_unless_the_round_writes_none(capsys):
    """A writer starts only while more than 145 s of the budget are left (120 kept for training, 25 to start one):
    --budget 140 with answers to write started no writer and trained on nothing, without a word. With --gen-seconds 0
    (the continuation's call, training on --answers-in) that budget is taken."""
    with pytest.raises(SystemExit) as refused:
        gpu_round.parse_args(["--out", "OUT", "--budget", "140"])
    assert refused.value.code == 2 and "--budget 140 leaves no time to write answers" in capsys.readouterr().err
    assert gpu_round.parse_args(["--out", "OUT", "--budget", "140", "--gen-seconds", "0"]).budget == 140
    assert gpu_round.parse_args(["--out", "OUT", "--budget", "240"]).budget == 240


def test_writing_time_too_short_for_any_writer_is_refused(capsys):
    """--gen-seconds 20 (at any budget) started no writer either, and the log blamed the budget left after the
    conversion: a writer starts only while more than 25 s of the writing time are left."""
    with pytest.raises(SystemExit) as refused:
        gpu_round.parse_args(["--out", "OUT", "--gen-seconds", "20"])
    assert refused.value.code == 2 and "--gen-seconds 20 leaves no time to write answers" in capsys.readouterr().err
    assert gpu_round.parse_args(["--out", "OUT", "--gen-seconds", "26"]).gen_seconds == 26
