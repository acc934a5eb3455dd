"""What a training run says last: how to use what it saved, in lines a user pastes as they are.

Heads: the `heads:` lines of the preset's entry in its models.yaml (each folder relative to that file where it lies
beside it, as models.yaml reads a folder, else absolute) and the app's command for that preset. A draft (the chat
draft, or the bundled pair's): the app's command for the pair (`python app.py --target T --draft D`, read relative to
the working directory, as specui.presets.with_pair does) and the `draft:` line of a models.yaml entry. app.py is
named as typed there too: `app.py` in the repository, its path from anywhere else. The chat target's answers (step 1
of `specui.train.chat`): the commands that train from them.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

import yaml


def as_config_reads(folder, config) -> str:
    """`folder` as models.yaml `config` reads it: relative to the file's folder where it lies beside it, else
    absolute."""
    folder, base = Path(folder).resolve(), Path(config).resolve().parent
    return folder.relative_to(base).as_posix() if folder.is_relative_to(base) else str(folder)


def as_typed(folder) -> str:
    """`folder` as a command typed in the working directory reads it: relative where it lies below it."""
    folder = Path(folder).resolve()
    return os.path.relpath(folder) if folder.is_relative_to(Path.cwd()) else str(folder)


def _block(mapping: dict, indent: int) -> list[str]:
    """`mapping` as YAML lines (paths quoted where YAML needs it), indented by `indent` spaces."""
    return [" " * indent + line for line in yaml.safe_dump(mapping, sort_keys=False).splitlines()]


def heads_lines(saved: dict, *, preset: str, config) -> list[str]:
    """The lines that make the preset `preset` of models.yaml `config` draft with the heads `saved` ({name: folder})."""
    default = Path(config).resolve() == _default_config()
    heads = {name: as_config_reads(folder, config) for name, folder in saved.items()}
    command = [*_app(), "--preset", preset, *([] if default else ["--config", as_typed(config)])]
    return [f"to draft with {'them' if len(saved) > 1 else 'it'}: in {config}, under presets: {preset}: put (beside "
            "any other heads it lists)", *_block({"heads": heads}, 4),
            f"then: {shlex.join(command)} (the Drafter list offers {', '.join(saved)})"]


def say_heads(saved: dict, *, preset: str | None, config) -> None:
    """Print heads_lines for a run's --preset (default: models.yaml's default) and --config (default: specui's)."""
    from specui.presets import load_config

    config = Path(config) if config else _default_config()
    preset = preset or load_config(config).default
    print("\n".join(heads_lines(saved, preset=preset, config=config)), flush=True)


def app_line(*, target: str, draft, chat: bool) -> str:
    """The app's command for `target` (as typed: a folder, a .gguf file, pypi:... or a Hub id) drafted for by the model
    or specui draft in the folder `draft`."""
    command = [*_app(), "--target", target, "--draft", as_typed(draft), *(["--chat"] if chat else [])]
    return f"to try it: {shlex.join(command)}"


def draft_lines(folder, *, target: str, chat: bool, config=None) -> list[str]:
    """app_line, and the `draft:` line of an entry of the models.yaml `config` (default: specui's own)."""
    config = Path(config) if config else _default_config()
    return [app_line(target=target, draft=folder, chat=chat), f"or in {config}, in a preset whose target is {target}:",
            *_block({"draft": as_config_reads(folder, config)}, 4)]


def answers_lines(folder, *, gguf: str | None = None, ids_only: bool = False, sampled: bool = False) -> list[str]:
    """What step 2 does with the chat target's answers written into `folder`: the chat draft's command (with the
    target's --gguf where the answers were written with one, and --on-the-fly where they hold ids alone, `ids_only`:
    the CPU recipe learns the stored log-probs and refuses them), and for the default chat target (the smollm2-chat
    preset's: no `gguf`) the heads' and the early exit's, which learns greedy tokens: `sampled` answers get them
    from specui.train.greedy_labels first."""
    answers = as_typed(folder)
    draft = ["python", "-m", "specui.train.chat", *(["--gguf", as_typed(gguf)] if gguf else []), "--answers", answers,
             "--out", "runs/chat-draft", *(["--on-the-fly"] if ids_only else [])]
    lines = [f"answers written in {answers}; the draft from them: {shlex.join(draft)}"]
    if not gguf:
        heads = ["python", "-m", "specui.train", "heads", "--preset", "smollm2-chat", "--answers", answers]
        labels = f"{shlex.join(['python', '-m', 'specui.train.greedy_labels', '--answers', answers])}, then " \
            if sampled else ""
        lines.append(f"or heads for the smollm2-chat preset: {shlex.join([*heads, '--out', 'runs/heads-chat'])} (or "
                     f"{labels}{shlex.join(['python', '-m', 'specui.train', 'exit', *heads[4:], '--out', 'runs/exit'])}"
                     " for the early exit alone)")
    return lines


def _app() -> list[str]:
    """The command that starts specui's app: `specui-app` where specui is installed from a wheel (its app.py lies deep
    in site-packages), else `python app.py` beside its models.yaml, as typed where the run was."""
    config = _default_config()
    if config.parent.name == "shipped":  # an installed wheel's specui/shipped/ (specui.presets)
        return ["specui-app"]
    return ["python", as_typed(config.parent / "app.py")]


def _default_config() -> Path:
    from specui.presets import DEFAULT_CONFIG

    return DEFAULT_CONFIG.resolve()
