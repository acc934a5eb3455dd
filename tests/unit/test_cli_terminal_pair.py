"""`python -m specui --target T [--draft D] [--chat-template]`: a pair not in models.yaml, as app.py and the benchmark
take it; --draft beside --drafter is never one taken for the other."""

from __future__ import annotations

import pytest

from tests.helpers import refused, save_tiny_model


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    root = tmp_path_factory.mktemp("pair")
    return (save_tiny_model(root / "target", "llama", layers=2, seed=0),
            save_tiny_model(root / "draft", "llama", layers=1, seed=1))


def test_a_pair_given_on_the_command_line_decodes_and_matches_plain_decoding(pair, capsys):
    from specui.terminal import main

    target, draft = pair
    main(["--target", target, "--draft", draft, "--max-new-tokens", "12", "--compare", "--color", "never",
          "def fib(n):"])
    err = capsys.readouterr().err
    assert "identical: yes" in err, err


def test_the_pair_flags_are_read_as_named(pair):
    from specui.terminal import load, parse_args

    target, draft = pair
    args = parse_args(["--target", target, "--draft", draft, "--chat-template", "x"])
    assert (args.target, args.draft, args.chat_template, args.drafter) == (target, draft, True, None)
    engine, preset = load(parse_args(["--target", target, "--draft", draft, "x"]))
    assert preset.name == "command-line" and preset.draft == draft and engine.draft_model is not None


@pytest.mark.parametrize("argv, said", [
    (["--draft", "eagle", "x"], "python -m specui: error: --draft needs --target (a pair not in models.yaml); to "
                                "choose how a preset drafts, --drafter eagle"),
    (["--target", "t", "--draft", "eagle", "x"], "python -m specui: error: --draft 'eagle' names a drafter; --draft "
                                                 "takes a draft model (a folder, a .gguf file or a Hub id): for the "
                                                 "drafter, --drafter eagle"),
    (["--target", "t", "--draft", "Prompt Lookup", "x"], "python -m specui: error: --draft 'Prompt Lookup' names a "
                                                         "drafter; --draft takes a draft model (a folder, a .gguf file "
                                                         "or a Hub id): for the drafter, --drafter Prompt Lookup"),
    (["--draft", "org/draft-model", "x"], "python -m specui: error: --draft needs --target (a pair not in models.yaml)"),
    (["--chat-template", "x"], "python -m specui: error: --chat-template needs --target (a pair not in models.yaml)"),
    (["--target", "t", "--preset", "bundled", "x"], "python -m specui: error: --target and --preset both name the "
                                                    "models: give one (--target: a pair not in models.yaml)"),
    (["--target", "t", "--drafter", "draft model", "x"], "python -m specui: error: --drafter draft model: the pair "
                                                         "of --target drafts with prompt_lookup; give its draft model "
                                                         "as --draft MODEL"),
    (["--target", "t", "--draft", "d", "--drafter", "eagle", "x"], "python -m specui: error: --drafter eagle: the pair "
                                                                   "of --target drafts with prompt_lookup, model, "
                                                                   "model_lookup; a head is listed under a preset's "
                                                                   "heads in a models.yaml (--config)"),
    (["--target", "", "x"], "python -m specui: error: --target '' is empty: give a value, or leave --target out"),
])
def test_a_pair_flag_misused_is_one_line(argv, said, capsys):
    from specui.terminal import parse_args

    assert refused(parse_args, argv, capsys) == said


def test_draft_is_not_a_prefix_of_drafter(capsys):
    """argparse takes a flag's unique prefix: with --draft beside --drafter, --draft is itself, and --draf names
    neither (both, refused), where a user who meant one must not get the other."""
    from specui.terminal import parse_args

    assert parse_args(["--drafter", "eagle", "x"]).draft is None
    assert "ambiguous option: --draf could match --draft, --drafter" in refused(parse_args, ["--draf", "m", "x"],
                                                                               capsys)


def test_chat_template_on_a_base_target_names_the_terminals_flag(tmp_path):
    """A base --target with --chat-template is refused as it loads, naming the flag to leave out: it said 'leave out
    --chat', app.py's flag, which python -m specui spells --chat-template (--chat here holds a conversation)."""
    from specui.load_checks import LoadError
    from specui.terminal import main

    target = save_tiny_model(tmp_path / "base", "llama", layers=1, seed=0)
    with pytest.raises(LoadError, match=r"has no chat template in its tokenizer \(a base model\?\): leave out --chat "
                                        r"\(python -m specui's --chat-template\), and prompts are continued as text"):
        main(["--target", target, "--chat-template", "--max-new-tokens", "2", "x"])
