"""Every trainer refuses, in one line before any work, a flag that the rest of its command line would ignore (a user
who gives one means it to do something): the chat draft's step-1 flags in step 2 and back, --drafts with
--init-draft, --new-vocab without it, --vocab with it (without --new-vocab), --on-the-fly with --hard-labels and --seq
on the CPU's soft-label recipe; the heads' shape flags for a head not trained or an --init's, --continue-tokens
without --continuations; the exit head's --vocab with --init. A flag a combination uses still passes."""

from __future__ import annotations

import pytest
import torch

from specui import chat_draft
from specui.train import chat, exit_head, greedy_labels, heads
from tests.train.test_chat_mistakes import _answers_folder
from tests.train.test_exit_init import save_exit_head


def _refused(parse, argv, capsys) -> str:
    with pytest.raises(SystemExit) as exit_:
        parse(argv)
    assert exit_.value.code == 2
    return capsys.readouterr().err.strip().splitlines()[-1]


@pytest.fixture
def folders(tmp_path):
    init = tmp_path / "draft"
    init.mkdir()
    (init / chat_draft.META).write_text("{}")  # the parser looks for the file, not into it
    return _answers_folder(tmp_path / "a"), init, tmp_path / "out"


def test_the_chat_trainer_refuses_a_flag_its_combination_ignores(folders, tmp_path, capsys):
    answers, init, out = folders
    step2 = ["--answers", str(answers), "--out", str(out)]
    cases = [
        ([*step2, "--prompt-set", "extra"], "--prompt-set is step 1's (--write-answers); --answers (step 2) would "
                                            "ignore it"),
        ([*step2, "--sample"], "--sample is step 1's"),
        (["--write-answers", str(tmp_path / "w"), "--vocab", "4096"], "--vocab is step 2's (--answers); "
                                                                     "--write-answers (step 1) would ignore it"),
        (["--write-answers", str(tmp_path / "w"), *step2], "--answers is step 2's"),
        ([*step2, "--init-draft", str(init), "--drafts", "3:0,1,2"], "--drafts shapes a new draft; --init-draft's "
                                                                     "keeps its own shape"),
        ([*step2, "--new-vocab"], "--new-vocab picks --init-draft's vocabulary afresh"),
        ([*step2, "--init-draft", str(init), "--vocab", "4096"], "--vocab is ignored with --init-draft, whose draft "
                                                                 "keeps its vocabulary: add --new-vocab"),
        ([*step2, "--hard-labels", "--on-the-fly"], "--on-the-fly recomputes the target's distributions, which "
                                                    "--hard-labels does not learn"),
    ]
    if not torch.cuda.is_available():  # a CUDA run takes the GPU recipe, which cuts at --seq
        cases.append(([*step2, "--seq", "256"], "--seq cuts the conversations of --on-the-fly and --hard-labels"))
    for argv, words in cases:
        line = _refused(chat.parse_args, argv, capsys)
        assert line.startswith(f"python -m specui.train.chat: error: {words}"), (argv, line)
    for argv in ([*step2, "--init-draft", str(init), "--new-vocab", "--vocab", "4096", "--grow", "2"],
                 [*step2, "--drafts", "3:0,1,2", "--vocab", "4096", "--seq", "256", "--on-the-fly"],
                 [*step2, "--seq", "256", "--hard-labels", "--max-minutes", "3"],
                 ["--write-answers", str(tmp_path / "w"), "--prompt-set", "extra", "--sample", "--labels", "0"]):
        chat.parse_args(argv)  # each flag used


def test_the_heads_trainer_refuses_a_flag_its_combination_ignores(tmp_path, capsys):
    out = ["--out", str(tmp_path / "out")]
    for argv, words in (
            ([*out, "--head", "eagle", "--medusa-heads", "3"], "--medusa-heads shapes the medusa head, which --head "
                                                              "eagle leaves out"),
            ([*out, "--head", "medusa", "--eagle-steps", "2"], "--eagle-steps shapes the eagle head"),
            ([*out, "--head", "eagle,medusa", "--exit-layer", "2"], "--exit-layer shapes the early_exit head"),
            ([*out, "--init", str(tmp_path), "--medusa-heads", "3"], f"--medusa-heads shapes a new head; --init "
                                                                     f"{tmp_path}'s heads keep their own"),
            ([*out, "--continue-tokens", "64"], "--continue-tokens is the length of --continuations, which is 0")):
        line = _refused(heads.parse_args, argv, capsys)
        assert line.startswith(f"python -m specui.train heads: error: {words}"), (argv, line)
    heads.parse_args([*out, "--head", "medusa,early_exit", "--medusa-heads", "3", "--exit-layer", "2",
                      "--continuations", "4", "--continue-tokens", "64"])


def test_the_exit_trainer_refuses_vocab_with_init(tmp_path, capsys):
    init = save_exit_head(tmp_path / "head")
    argv = ["--answers", str(tmp_path), "--out", str(tmp_path / "out"), "--init", str(init)]
    line = _refused(exit_head.parse_args, [*argv, "--vocab", "512"], capsys)
    assert line == f"python -m specui.train exit: error: --vocab picks a fresh head's ids; --init {init}'s head " \
                   "keeps its own"
    exit_head.parse_args(argv)


def test_asked_is_refused_where_the_prompt_set_is_not_asked(tmp_path, capsys):
    """--asked counts the prompts the target writes for --prompt-set asked; the other sets are the project's own."""
    line = _refused(chat.parse_args, ["--write-answers", str(tmp_path / "w"), "--prompt-set", "main", "--asked", "8"],
                    capsys)
    assert line.endswith("error: --asked is how many prompts --prompt-set asked writes; --prompt-set main's prompts "
                         "are the project's: drop it")
    assert chat.parse_args(["--write-answers", str(tmp_path / "w"), "--prompt-set", "asked", "--asked", "8"]).asked == 8


def test_the_bundled_trainer_refuses_what_eval_only_or_stage_draft_ignores(tmp_path, capsys):
    """`python -m specui.train --eval-only` trains nothing, and --stage draft keeps the target in --out as it was: a
    training setting, or a setting of the target, given beside them is refused, not dropped in silence."""
    from specui.train import cli

    for name in ("specui-target", "specui-draft"):
        (tmp_path / name).mkdir()
    out = ["--out", str(tmp_path)]
    cases = [([*out, "--eval-only", "--stage", "draft"], "--stage picks what to train, and --eval-only trains nothing"),
             ([*out, "--eval-only", "--target-steps", "5"], "--target-steps is a training setting, and --eval-only "
                                                            "trains nothing (it reads --eval-bytes, "),
             ([*out, "--eval-only", "--no-bf16"], "--bf16 is a training setting"),
             ([*out, "--stage", "draft", "--target-layers", "4", "--overwrite"],
              "--target-layers is the target's, and --stage draft reads the target in --out as it was trained")]
    for argv, words in cases:
        assert words in _refused(cli.parse_args, argv, capsys), argv
    assert cli.parse_args([*out, "--eval-only", "--alpha-prompts", "3", "--seq-len", "64"])[0].alpha_prompts == 3
    assert cli.parse_args([*out, "--stage", "draft", "--draft-steps", "3", "--overwrite"])[0].draft_steps == 3


@pytest.mark.parametrize("parse, argv", [(heads.parse_args, []), (greedy_labels.parse_args, ["--answers", "A"])])
def test_bf16_is_refused_where_the_run_goes_to_a_cuda_gpu(parse, argv, tmp_path, monkeypatch, capsys):
    """--bf16 makes a bfloat16 copy of the target on a CPU only; a run on a CUDA GPU (none here: torch told there is
    one) trained in float32 without a word."""
    argv = [*argv, "--out", str(tmp_path / "out")] if parse is heads.parse_args else argv
    assert parse([*argv, "--bf16"]).bf16  # a CPU takes it
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert _refused(parse, [*argv, "--bf16"], capsys).endswith(
        "--bf16 is for a CPU (a bfloat16 copy of the target, for its AMX), and this run goes to the CUDA GPU, which "
        "trains in float32 on its TF32 tensor cores: drop --bf16")
    assert not parse(argv).bf16


@pytest.mark.parametrize("parse", [heads.parse_args, exit_head.parse_args], ids=["heads", "exit"])
@pytest.mark.parametrize("flag", ["--preset", "--config", "--out"])
def test_an_empty_preset_config_or_out_is_refused_naming_it(parse, flag, tmp_path, capsys):
    """`--preset "$PRESET"` with the variable unset read as left out: the default preset's target trained."""
    answers = ["--answers", str(tmp_path)] if parse is exit_head.parse_args else []
    assert f"{flag} '' is empty" in _refused(parse, [*answers, flag, ""], capsys)
