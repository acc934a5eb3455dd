"""python -m specui.bench's command line: a user's mistakes refused in one line naming the flag, before minutes of
loading where they can be (an unknown drafter, counts out of range, settings in the flags' words, a report path that
cannot be written; a prompt longer than the context: test_bench_cli_context.py), and --num-prompts with built-in prompts
or a --prompts file."""

from __future__ import annotations

import json

import pytest

from tests.helpers import ROOT

BUNDLED = ROOT / "assets" / "specui-target" / "config.json"


def test_an_unknown_drafter_is_refused_with_the_names_there_are(capsys):
    from specui.bench.cli import parse_args

    with pytest.raises(SystemExit) as exit_:
        parse_args(["--drafter", "nonsense"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'nonsense'" in err and "prompt_lookup" in err and "all" in err


@pytest.mark.parametrize("flag, said", [
    ("--num-draft-tokens", "--num-draft-tokens must be an integer from 1 to 64, got 0"),
    ("--threads", "--threads must be an integer from 1 up (leave it out for the preset's), got 0"),
    ("--prompt-threads", "--prompt-threads must be an integer from 1 up (leave it out for the preset's), got 0"),
])
def test_a_zero_count_is_refused_not_read_as_the_presets(flag, said, capsys):
    from specui.bench.cli import parse_args

    with pytest.raises(SystemExit) as exit_:
        parse_args([flag, "0"])
    assert exit_.value.code == 2 and said in capsys.readouterr().err
    assert getattr(parse_args([flag, "2"]), flag[2:].replace("-", "_")) == 2


@pytest.mark.parametrize("flag, said", [
    ("--warmup", "--warmup must be an integer from 0 up, got -1"),
    ("--temperature", "--temperature must be a number from 0 (greedy) to 5, got -1"),  # refused once (it was twice)
    ("--turns", "--turns must be an integer from 0 up, got -1"),
    ("--repeats", "--repeats must be an integer from 1 up, got -1"),
])
def test_a_negative_value_is_refused_naming_its_option(flag, said, capsys):
    from specui.bench.cli import parse_args

    with pytest.raises(SystemExit) as exit_:
        parse_args([flag, "-1"])
    assert exit_.value.code == 2 and said in capsys.readouterr().err


@pytest.mark.parametrize("args, said", [
    (["--seed", "-5"], "--seed must be an integer from 0 to 9,223,372,036,854,775,807, got -5"),  # the app's limits,
    (["--tree-width", "0"], "--tree-width must be an integer from 1 (no tree) to 8, got 0"),  # as python -m specui's
    (["--draft-confidence", "3"], "--draft-confidence must be a number from 0 (always K drafts) to 0.95, got 3"),
    (["--temperature", "50"], "--temperature must be a number from 0 (greedy) to 5, got 50"),
    (["--temperature", "nan"], "--temperature must be a number from 0 (greedy) to 5, got nan"),
    (["--top-k", "10000000", "--temperature", "1"],
     "--top-k must be an integer from 0 (off) to 1,000,000, got 10000000"),
    (["--top-p", "2", "--temperature", "1"], "--top-p must be a number above 0 and up to 1 (1 = off), got 2"),
    (["--repetition-penalty", "0"], "--repetition-penalty must be a number above 0 and up to 10 (1 = off), got 0"),
])
def test_a_setting_out_of_range_is_refused_in_the_command_lines_words(args, said, capsys):
    """In the words of every range a command line refuses (specui.command_line.Range), not the engine's settings
    check's (`top_p must be in (0, 1] ...`, and a seed that may be None)."""
    from specui.bench.cli import parse_args

    with pytest.raises(SystemExit) as exit_:
        parse_args(args)
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and said in err and "None" not in err
    assert parse_args(["--temperature", "5", "--top-k", "1000000"]).top_k == 1_000_000  # the limits themselves taken


def test_a_json_path_that_cannot_be_written_is_refused_before_the_run(tmp_path, capsys):
    from specui.bench.cli import parse_args, write_json

    for path, why in ((tmp_path / "missing" / "x.json", "does not exist"), (tmp_path, "is a folder")):
        with pytest.raises(SystemExit) as exit_:
            parse_args(["--json", str(path)])
        assert exit_.value.code == 2 and why in capsys.readouterr().err
    assert parse_args(["--json", str(tmp_path / "x.json")]).json == str(tmp_path / "x.json")
    (tmp_path / "gone").mkdir()
    path = tmp_path / "gone" / "x.json"
    (tmp_path / "gone").rmdir()  # the folder went away during the run: one line, the report already printed
    with pytest.raises(SystemExit, match="--json .*x.json: No such file or directory"):
        write_json(str(path), {"a": 1})
    write_json(str(tmp_path / "ok.json"), {"a": 1})
    assert json.loads((tmp_path / "ok.json").read_text()) == {"a": 1}


def test_a_drafter_the_preset_lacks_is_refused_with_the_presets_drafters(capsys):
    from types import SimpleNamespace

    from specui.bench.cli import drafters_to_run

    engine = SimpleNamespace(drafters=("model", "prompt_lookup"))
    assert drafters_to_run(engine, "p", "all") == ("plain", "model", "prompt_lookup")
    assert drafters_to_run(engine, "p", "model") == ()  # the one-drafter report, against transformers too
    with pytest.raises(SystemExit, match="^2$"):
        drafters_to_run(engine, "p", "eagle")
    assert "--drafter eagle: preset 'p' has no such drafter; its drafters: model, prompt_lookup" in \
        capsys.readouterr().err
    engine = SimpleNamespace(drafters=("eagle", "prompt_lookup"))
    assert drafters_to_run(engine, "p", "eagle") == ("plain", "eagle")  # a head runs beside plain decoding


@pytest.mark.skipif(not BUNDLED.exists(), reason="the bundled pair's built-in stdlib prompts")
def test_more_prompts_than_there_are_is_said_in_one_line(monkeypatch, capsys):
    """--num-prompts beyond the built-in prompts runs those there are and says so, not quietly. (The EAGLE head runs
    beside plain decoding alone: the prompts are what is tested, not the costs and transformers' arms.)"""
    from specui import corpus
    from specui.bench.cli import main

    real = corpus.held_out_prompts
    monkeypatch.setattr(corpus, "held_out_prompts", lambda *a, count, **kw: real(*a, count=min(count, 2), **kw))
    report = main(["--preset", "bundled", "--num-prompts", "1000", "--max-new-tokens", "2", "--repeats", "1",
                   "--warmup", "0", "--drafter", "eagle", "--threads", "1"])
    assert report["num_prompts"] == 2
    err = capsys.readouterr().err
    assert "--num-prompts 1000: there are only 2 held-out stdlib prompts of 128 tokens; running those 2" in err
    main(["--preset", "bundled", "--num-prompts", "2", "--max-new-tokens", "2", "--repeats", "1", "--warmup", "0",
          "--drafter", "eagle", "--threads", "1"])
    assert "--num-prompts" not in capsys.readouterr().err  # as many as asked: nothing to say


@pytest.mark.skipif(not BUNDLED.exists(), reason="the bundled pair")
def test_the_preset_is_checked_once_before_its_models_load(monkeypatch):
    """check_before_loading (folders, a GPU, the Hub asked for each Hub model) ran in the preflight and then again in
    load_pair; the run stops where load_pair would read the first model, after its own check."""
    from specui import load_checks, loading
    from specui.bench import cli

    checked, real = [], load_checks.check_before_loading
    for module in (load_checks, loading):  # the preflight's (through check_preset), and load_pair's
        monkeypatch.setattr(module, "check_before_loading", lambda preset: checked.append(preset.name) or real(preset))

    class Loading(Exception):
        pass

    def reading(ref, say):
        raise Loading

    monkeypatch.setattr(loading, "_folder", reading)
    with pytest.raises(Loading):
        cli.main(["--preset", "bundled", "--drafter", "eagle", "--max-new-tokens", "2", "--threads", "1"])
    assert checked == ["bundled"]


@pytest.mark.skipif(not BUNDLED.exists(), reason="the bundled pair")
@pytest.mark.parametrize("drafter", ["eagle", "all"])
def test_the_run_builds_one_engine_and_its_checks_stand(monkeypatch, drafter):
    """The engine whose drafters say what runs (`drafters_to_run`) is the one that runs them (`Methods`), where the
    pair built one for each; the greedy identity check is made as before."""
    from specui import loading
    from specui.bench.cli import main

    built, real = [], loading.LoadedPair.engine
    monkeypatch.setattr(loading.LoadedPair, "engine", lambda pair: built.append(pair.preset.name) or real(pair))
    report = main(["--preset", "bundled", "--drafter", drafter, "--max-new-tokens", "4", "--repeats", "1",
                   "--warmup", "0", "--num-prompts", "1", "--threads", "1"])
    assert built == ["bundled"]
    assert report["identical_to_plain"] is True and len(report["drafters"]) == (2 if drafter == "eagle" else 8)


@pytest.mark.skipif(not BUNDLED.exists(), reason="the bundled pair")
def test_num_prompts_takes_the_first_n_of_a_prompts_file(tmp_path, capsys):
    """--num-prompts N with --prompts FILE runs the file's first N prompts (it was ignored: all of them ran); more than
    the file holds runs those it has and says so; without it, every prompt of the file."""
    from specui.bench.cli import main

    prompts = tmp_path / "three.jsonl"
    prompts.write_text("".join(json.dumps({"prompt": f"def {name}(x):\n"}) + "\n" for name in "abc"), encoding="utf-8")
    quick = ["--preset", "bundled", "--prompts", str(prompts), "--max-new-tokens", "2", "--repeats", "1", "--warmup",
             "0", "--drafter", "eagle", "--threads", "1"]
    assert main([*quick, "--num-prompts", "2"])["num_prompts"] == 2
    assert "--num-prompts" not in capsys.readouterr().err
    assert main([*quick, "--num-prompts", "5"])["num_prompts"] == 3
    assert f"--num-prompts 5: there are only 3 prompts in {prompts}; running those 3" in capsys.readouterr().err
    assert main(quick)["num_prompts"] == 3


def test_num_prompts_says_it_cuts_a_prompts_file(capsys):
    from specui.bench.cli import parse_args

    with pytest.raises(SystemExit):
        parse_args(["--help"])
    assert "with --prompts, the first N of the file's" in " ".join(capsys.readouterr().out.split())
    assert parse_args([]).num_prompts is None  # the built-in default, or all of a file's


def test_a_drafter_that_drafts_no_trees_is_refused_before_loading(capsys):
    from specui.bench.cli import parse_args

    with pytest.raises(SystemExit) as exit_:
        parse_args(["--tree-width", "2", "--drafter", "prompt_lookup"])
    assert exit_.value.code == 2 and "drafter 'prompt_lookup' cannot draft trees" in capsys.readouterr().err
    assert parse_args(["--tree-width", "2", "--drafter", "all"]).drafter == "all"  # all skips those that cannot


@pytest.mark.parametrize("content, said", [
    (None, ": cannot be read (No such file or directory)"),
    (b"", ": no prompts"),
    (b"Write a haiku about the sea.\n", ':1: not JSON; the file is JSON Lines, one {"prompt": "..."} per line'),
    (b'{"prompt": "caf\xe9"}\n', ": not UTF-8 text (byte 15); save it as UTF-8"),
    (b'[{"prompt": "a"}]\n', ':1: expected a JSON object {"prompt": "<non-empty text>"}'),
])
def test_a_prompts_file_that_cannot_be_used_is_refused_naming_the_flag_before_loading(content, said, tmp_path,
                                                                                        capsys):
    """Exit 2 with --prompts named, as every other flag's mistake (it was exit 1, naming only the path, after the
    preset's config was read); a plain text file is told it needs JSON Lines."""
    from specui.bench.cli import parse_args

    path = tmp_path / "mine.jsonl"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(SystemExit) as exit_:
        parse_args(["--prompts", str(path)])
    assert exit_.value.code == 2 and f"python -m specui.bench: error: --prompts {path}{said}" in capsys.readouterr().err


def test_k_is_short_for_num_draft_tokens_as_in_the_terminal_command():
    from specui.bench.cli import parse_args

    assert parse_args(["-k", "3"]).num_draft_tokens == 3 == parse_args(["--num-draft-tokens", "3"]).num_draft_tokens


def test_prompt_tokens_with_a_prompts_file_is_refused_not_ignored(tmp_path, capsys):
    from specui.bench.cli import parse_args

    path = tmp_path / "mine.jsonl"
    path.write_text('{"prompt": "def f(x):"}\n', encoding="utf-8")
    with pytest.raises(SystemExit) as exit_:
        parse_args(["--prompts", str(path), "--prompt-tokens", "64"])
    assert exit_.value.code == 2 and "--prompt-tokens sets the built-in prompts' length" in capsys.readouterr().err
    assert parse_args([]).prompt_tokens is None and parse_args(["--prompt-tokens", "64"]).prompt_tokens == 64


@pytest.mark.parametrize("args, said", [
    (["--cost-samples", "5", "--drafter", "all"], "--cost-samples with --drafter all: that run measures no draft"),
    (["--cost-samples", "5", "--turns", "2"], "--cost-samples with --turns: that run measures no draft cost"),
    (["--num-prompts", "2", "--turns", "3"], "--num-prompts with --turns: the conversation's turns are the first N"),
    (["--seed", "7"], "--seed with greedy decoding (--temperature 0, the default): a greedy run draws nothing"),
    (["--seed", "0", "--drafter", "all"], "--seed with greedy decoding"),  # named, whatever its value
])
def test_a_flag_the_run_would_ignore_is_refused_naming_both(args, said, capsys):
    """They were ignored without a word (--num-prompts with --turns cut the prompts short of the turns instead)."""
    from specui.bench.cli import parse_args

    with pytest.raises(SystemExit) as exit_:
        parse_args(args)
    assert exit_.value.code == 2 and said in capsys.readouterr().err
    assert parse_args(["--cost-samples", "5"]).cost_samples == 5 and parse_args([]).cost_samples is None
    assert parse_args(["--seed", "7", "--temperature", "0.7"]).seed == 7 and parse_args([]).seed == 0  # sampled: kept


@pytest.mark.parametrize("args, said", [
    (["--cost-samples", "5"], "--cost-samples with --drafter eagle (preset smollm2-chat's default): a head is"),
    (["--drafter", "medusa", "--cost-samples", "5"], "--cost-samples with --drafter medusa: a head is measured"),
    (["--prompt-tokens", "64"], "--prompt-tokens sets the built-in stdlib prompts' length; preset 'smollm2-chat' is "
                                "a chat preset, whose built-in prompts (specui.chat_prompts) run as written"),
    (["--turns", "17"], "--turns 17 needs 17 prompts, one a turn: preset 'smollm2-chat' has 16 built-in held-out chat "
                        'prompts (specui.chat_prompts); give --prompts FILE (JSON Lines, one {"prompt": "..."} a '
                        "line) with more, or lower --turns"),
    (["--drafter", "prompt_lookup", "--draft-confidence", "0.3"], "--draft-confidence with --drafter prompt_lookup: "
                                                                  "prompt lookup copies tokens with no confidence"),
    (["--config", "BUNDLED_LOOKUP", "--draft-confidence", "0.3"], "--draft-confidence with --drafter prompt_lookup "
                                                                  "(preset alone's default): prompt lookup copies"),
])
def test_what_the_preset_would_ignore_is_refused_before_its_models_load(args, said, monkeypatch, tmp_path, capsys):
    """The default preset (a chat preset whose drafter is its EAGLE head): --cost-samples and --prompt-tokens were
    ignored without a word; more --turns than its chat prompts said '(16 given)' after the models had loaded; and
    --draft-confidence with prompt lookup (BUNDLED_LOOKUP: a preset whose only drafter it is)."""
    from specui.bench import cli
    from tests.helpers import BUNDLED_TARGET

    if "BUNDLED_LOOKUP" in args:
        config = tmp_path / "models.yaml"
        config.write_text(f"default: alone\npresets:\n  alone:\n    target: {BUNDLED_TARGET.parent}\n")
        args = [str(config) if a == "BUNDLED_LOOKUP" else a for a in args]

    def no_loading(*args, **kwargs):
        raise AssertionError("the models loaded before the flags were refused")

    monkeypatch.setattr(cli, "load_pair", no_loading)
    with pytest.raises(SystemExit) as exit_:
        cli.main(args)
    assert exit_.value.code == 2 and f"python -m specui.bench: error: {said}" in capsys.readouterr().err


def test_more_turns_than_a_prompts_file_holds_is_refused_naming_the_file(tmp_path, capsys):
    from specui.bench.cli import parse_args

    path = tmp_path / "two.jsonl"
    path.write_text('{"prompt": "a"}\n{"prompt": "b"}\n', encoding="utf-8")
    with pytest.raises(SystemExit) as exit_:
        parse_args(["--prompts", str(path), "--turns", "3"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and f"--turns 3 needs 3 prompts, one a turn: {path} holds 2; add prompts to {path}, " \
                                     "or lower --turns" in err
    assert parse_args(["--prompts", str(path), "--turns", "2"]).turns == 2


@pytest.mark.slow
@pytest.mark.skipif(not BUNDLED.exists(), reason="the bundled pair's built-in stdlib prompts")
def test_turns_take_as_many_built_in_prompts_as_there_are_turns(monkeypatch, capsys):
    """--turns 10 on bundled ran into '--turns 10 needs 10 prompts (8 given)' (the built-in default of 8, though the
    user gave no prompts); it takes 10 now, and fewer held-out prompts than turns says where they come from."""
    from specui import corpus
    from specui.bench.cli import main

    quick = ["--preset", "bundled", "--prompt-tokens", "16", "--max-new-tokens", "2", "--repeats", "1", "--warmup",
             "0", "--threads", "1"]
    assert [t["turn"] for t in main([*quick, "--turns", "10"])["turns"]] == list(range(1, 11))
    real = corpus.held_out_prompts
    monkeypatch.setattr(corpus, "held_out_prompts", lambda *a, count, **kw: real(*a, count=min(count, 2), **kw))
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_:
        main([*quick, "--turns", "3"])
    assert exit_.value.code == 2 and "--turns 3 needs 3 prompts, one a turn: there are 2 held-out stdlib prompts of " \
                                     '16 tokens; give --prompts FILE (JSON Lines, one {"prompt": "..."} a line) with ' \
                                     "more, or lower --turns" in capsys.readouterr().err
