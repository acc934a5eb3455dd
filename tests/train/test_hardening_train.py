"""`python -m specui.train` never touches the shipped pair unless asked to, and documents every option."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from specui.train import cli, model_card
from specui.train.config import TrainConfig


def test_default_output_is_not_the_shipped_pair():
    cfg, args = cli.parse_args([])
    assert Path(cfg.out).parts[0] != "assets" and cfg.out == TrainConfig().out == "runs/train"
    assert cli.parse_args(["--out", "assets"])[0].out == "assets"  # explicit: the only way to rebuild it


def test_eval_only_refuses_a_folder_without_a_pair(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.parse_args(["--eval-only", "--out", str(tmp_path / "nothing")])
    assert exit_.value.code == 2 and "--eval-only" in capsys.readouterr().err
    assert not (tmp_path / "nothing").exists()
    with pytest.raises(SystemExit):
        cli.parse_args(["--stage", "draft", "--out", str(tmp_path)])


def test_every_option_has_help_with_its_default(monkeypatch):
    captured = {}
    original = argparse.ArgumentParser.parse_args

    def keep(self, *a, **kw):
        captured["parser"] = self
        return original(self, *a, **kw)

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", keep)
    cli.parse_args([])
    actions = [a for a in captured["parser"]._actions if a.option_strings and a.dest != "help"]
    assert len(actions) == len(TrainConfig.__dataclass_fields__) + 2
    for action in actions:
        assert action.help and "default" in action.help, action.option_strings
    text = captured["parser"].format_help()
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
