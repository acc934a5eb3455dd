"""The training command lines never touch the shipped pair unless asked to, refuse a bad number or folder in one
argparse line before anything starts (no corpus, no model, no file), and document every option."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from specui.train import cli, model_card
from specui.train.config import TrainConfig


def test_default_output_is_not_the_shipped_pair():
    cfg, args = cli.parse_args([])
    assert Path(cfg.out).parts[0] != "assets" and cfg.out == TrainConfig().out == "runs/train"
    assert cli.parse_args(["--out", "assets", "--overwrite"])[0].out == "assets"  # explicit: the only way to rebuild it


def test_eval_only_refuses_a_folder_without_a_pair(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.parse_args(["--eval-only", "--out", str(tmp_path / "nothing")])
    assert exit_.value.code == 2 and "--eval-only" in capsys.readouterr().err
    assert not (tmp_path / "nothing").exists()
    with pytest.raises(SystemExit):
        cli.parse_args(["--stage", "draft", "--out", str(tmp_path)])


def _parser_of(parse, argv, monkeypatch) -> argparse.ArgumentParser:
    """The parser `parse(argv)` builds."""
    captured = {}
    original = argparse.ArgumentParser.parse_args

    def keep(self, *a, **kw):
        captured["parser"] = self
        return original(self, *a, **kw)

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", keep)
    parse(argv)
    return captured["parser"]


def test_every_option_has_help_with_its_default(monkeypatch):
    parser = _parser_of(cli.parse_args, [], monkeypatch)
    actions = [a for a in parser._actions if a.option_strings and a.dest != "help"]
    assert len(actions) == len(TrainConfig.__dataclass_fields__) + 3  # --eval-only, --stage, --overwrite
    for action in actions:
        assert action.help and "default" in action.help, action.option_strings
    text = parser.format_help()
    assert "(default: 'runs/train')" in text and "(default: 1234)" in text


def test_model_card_names_the_folder_it_recomputes():
    facts, report = {}, {"eval_files": 1, "eval_bytes": 10, "target_bpb": 2.0, "draft_bpb": 3.0, "alpha_prompts": 1,
                         "alpha": 0.5}
    config = {"num_hidden_layers": 1, "hidden_size": 8, "num_attention_heads": 1, "intermediate_size": 8,
              "vocab_size": 16, "max_position_embeddings": 32}
    text = model_card.card(role="target", config=config, params=1000, facts=facts, report=report, other="d",
                           out_arg="assets")
    assert "python -m specui.train --out assets --eval-only" in text


@pytest.mark.parametrize("command, flag, value, rule", [
    ("heads", "--minutes", "-1", "> 0"), ("heads", "--lr", "0", "> 0"), ("heads", "--steps", "0", ">= 1"),
    ("exit", "--held-out", "1.5", "in [0, 1)"), ("exit", "--batch", "0", ">= 1"), ("exit", "--threads", "-2", ">= 0")])
def test_a_training_budget_that_would_do_nothing_is_refused_in_one_line(command, flag, value, rule, capsys):
    from specui.train import exit_head, heads

    parse = {"heads": heads.parse_args, "exit": exit_head.parse_args}[command]
    extra = ["--answers", "unused"] if command == "exit" else []
    with pytest.raises(SystemExit) as exit_:
        parse([*extra, flag, value])
    assert exit_.value.code == 2 and f"{flag} must be {rule}, got " in capsys.readouterr().err
    parse(extra)  # the defaults pass


# -- every bad number refused in one argparse line, before the corpus, a model or a file ----------------------------

CLI_CASES = [  # (flag, value, what the line says)
    ("--target-steps", "-1", "--target-steps must be >= 1, got -1"),
    ("--long-fraction", "2", "--long-fraction must be in [0, 1], got 2.0"),
    ("--checkpoint-every", "0", "--checkpoint-every must be >= 1, got 0"),
    ("--vocab-size", "0", "--vocab-size must be >= 257 (the 256 byte tokens"),
    ("--max-positions", "10", "--max-positions must be >= 513 (--seq-len 512 and the next token), got 10"),
    ("--seq-len", "0", "--seq-len must be >= 4"),
    ("--batch-size", "0", "--batch-size must be >= 1, got 0"),
    ("--lr", "-1", "--lr must be > 0, got -1.0"),
    ("--lr", "nan", "--lr must be > 0, got nan"),
    ("--draft-lr", "0", "--draft-lr must be > 0"),
    ("--threads", "0", "--threads must be >= 1, got 0"),
    ("--target-width", "97", "--target-width must be a multiple of --target-heads (3), got 97"),
    ("--draft-width", "99", "--draft-width / --draft-heads must be even"),
    ("--grad-clip", "0", "--grad-clip must be > 0"),
    ("--eval-bytes", "10", "--eval-bytes must be >= 4000"),
    ("--alpha-new-tokens", "900",
     "--max-positions must be >= 1156 (a 256-token held-out prompt and --alpha-new-tokens 900), got 1024"),
]


def refused(main, argv, capsys) -> str:
    """The one line `main(argv)` ends with (exit status 2, argparse's form)."""
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert exit_.value.code == 2 and "Traceback" not in "\n".join(err)
    return err[-1]


@pytest.mark.parametrize("flag, value, message", CLI_CASES)
def test_the_pair_trainer_refuses_a_bad_number_before_it_starts(flag, value, message, tmp_path, capsys):
    line = refused(cli.main, ["--out", str(tmp_path / "out"), flag, value], capsys)
    assert line.startswith("python -m specui.train: error: ") and message in line
    assert not (tmp_path / "out").exists()


def test_the_pair_trainer_checks_its_folders_before_it_starts(tmp_path, capsys):
    (tmp_path / "file").write_text("")
    assert "--out " + str(tmp_path / "file") + ": is a file, not a folder" in refused(
        cli.main, ["--out", str(tmp_path / "file")], capsys)
    assert f"{tmp_path / 'file'} is a file, not a folder" in refused(
        cli.main, ["--checkpoint-dir", str(tmp_path / "file" / "ckpt"), "--out", str(tmp_path / "out")], capsys)
    if Path("/proc/self").is_dir():  # a folder nobody can create, not even root: only the attempt tells
        assert "--out /proc/specui-out: cannot create the folder" in refused(cli.main, ["--out", "/proc/specui-out"],
                                                                          capsys)
    cli.parse_args(["--out", str(tmp_path / "new" / "out")])  # parsing alone writes nothing
    assert not (tmp_path / "new").exists()
    cli.parse_args(["--out", str(tmp_path / "new" / "out")], create=True)  # as main runs: made at once
    assert (tmp_path / "new" / "out").is_dir()


def _modules():
    """The other training commands' modules by name (each with `main` and `parse_args`)."""
    from specui.train import chat, exit_head, greedy_labels, heads

    return {"heads": heads, "exit": exit_head, "chat": chat, "greedy_labels": greedy_labels}


OTHER_CASES = [  # (command, argv, what the line says)
    ("heads", ["--seq", "0"], "--seq must be >= 2 (a token and the next), got 0"),
    ("heads", ["--vocab", "0"], "--vocab must be >= 1, got 0"),
    ("heads", ["--state-batch", "0"], "--state-batch must be >= 1"),
    ("heads", ["--warmup", "-1"], "--warmup must be >= 0"),
    ("heads", ["--extra-layers", "a"], "--extra-layers a: expected hidden_states indices"),
    ("heads", ["--continuations", "4", "--continue-tokens", "400"], "--continue-tokens must be < --seq (320)"),
    ("exit", ["--answers", "x", "--mlp-hidden", "-1"], "--mlp-hidden must be >= 0"),
    ("exit", ["--answers", "x", "--eval-every", "0"], "--eval-every must be >= 1"),
    ("chat", ["--max-answer", "0"], "--max-answer must be >= 1, got 0"),
    ("chat", ["--gen-batch", "0"], "--gen-batch must be >= 1, got 0"),
    ("chat", ["--minutes", "-1"], "--minutes must be >= 0 (0: all prompts)"),
    ("chat", ["--labels", "-1"], "--labels must be >= 0"),
    ("chat", ["--asked", "0"], "--asked must be >= 1"),
    ("chat", ["--drafts", "0:1"], "--drafts 0:1: expected LAYERS:TARGET_LAYERS"),
    ("greedy_labels", ["--answers", "x", "--batch", "0"], "--batch must be >= 1"),
]


@pytest.mark.parametrize("command, argv, message", OTHER_CASES)
def test_the_other_trainers_refuse_a_bad_number_before_the_target_loads(command, argv, message, tmp_path, capsys):
    out = tmp_path / "out"
    folder = {"chat": ["--write-answers", str(out)], "greedy_labels": []}.get(command, ["--out", str(out)])
    line = refused(_modules()[command].main, [*folder, *argv], capsys)
    assert message in line and ": error: " in line
    assert not out.exists()


@pytest.mark.parametrize("command", ["heads", "exit", "chat"])
def test_the_other_trainers_check_their_folder_before_the_target_loads(command, tmp_path, capsys):
    (tmp_path / "file").write_text("")
    flag, extra = {"heads": ("--out", []), "exit": ("--out", ["--answers", "x"]),
                   "chat": ("--write-answers", [])}[command]
    line = refused(_modules()[command].main, [*extra, flag, str(tmp_path / "file" / "out")], capsys)
    assert f"{flag} {tmp_path / 'file' / 'out'}: {tmp_path / 'file'} is a file, not a folder" in line


@pytest.mark.parametrize("command", ["heads", "exit", "chat", "greedy_labels"])
def test_every_number_of_the_other_trainers_has_help_with_its_default(command, tmp_path, monkeypatch):
    parse = _modules()[command].parse_args
    argv = {"heads": [], "exit": ["--answers", "x"], "chat": ["--write-answers", str(tmp_path / "a")],
            "greedy_labels": ["--answers", "x"]}[command]
    parser = _parser_of(parse, argv, monkeypatch)
    for action in parser._actions:
        if action.option_strings and action.dest != "help":
            assert action.help, action.option_strings
            if action.type in (int, float):
                assert "default" in action.help, action.option_strings


def test_the_pair_trainers_help_names_every_training_command(capsys):
    import re

    dispatcher = (Path(cli.__file__).parent / "__main__.py").read_text()
    subcommands = re.findall(r'sys\.argv\[1:2\] == \["(\w+)"\]', dispatcher)
    assert {"heads", "exit"} <= set(subcommands)
    with pytest.raises(SystemExit) as exit_:
        cli.parse_args(["--help"])
    text = capsys.readouterr().out
    assert exit_.value.code == 0
    for name in subcommands:
        assert f"python -m specui.train {name} " in text
    assert "python -m specui.train.chat" in text and "python -m specui.train.greedy_labels" in text


def test_no_warmup_is_the_full_rate_at_once():
    from specui.train import chat_data, heads

    args = argparse.Namespace(lr=1.0, warmup=0)
    assert heads.lr_at(args, 0, 0.0) == chat_data.lr_at(args, 0.0, 0) == 1.0
