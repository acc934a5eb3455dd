"""What `python -m specui.bench`'s preset makes of its flags, refused in one line before torch and the models load
(`specui.bench.__main__` runs it straight after the flags, `specui.bench.cli.main` before `load_pair`): a flag the
preset would ignore, more turns than its built-in prompts, built-in stdlib prompts that with --max-new-tokens
overflow the target's context, read from its config.json, and a model wheel, folder or Hub model missing."""

from __future__ import annotations

import json
from pathlib import Path

from specui import chat_prompts, settings
from specui.bench.flags import PROG, PROMPT_TOKENS, as_flags, too_few_turns
from specui.command_line import check_preset, refuse
from specui.drafters.registry import HEAD_DRAFTERS, PROMPT_LOOKUP
from specui.presets import load_config, with_pair

MORE_PROMPTS = 'give --prompts FILE (JSON Lines, one {"prompt": "..."} a line) with more'


def checked_preset(args):
    """The preset `args` name (models.yaml's, or the pair of --target), once what it makes of the flags is refused
    (`refuse_ignored`, `refuse_overflow`) and what is known of its models before any loads (`check_preset`: a wheel, a
    folder, the Hub); kept on `args`, so that the command's main reads and checks it once."""
    if getattr(args, "checked_preset", None) is None:
        config = load_config(args.config)
        if args.target:
            config = with_pair(config, args.target, args.draft, chat=args.chat)
        preset = config.get(args.preset)
        refuse_ignored(args, preset)
        refuse_overflow(args, preset)
        check_preset(PROG, preset)  # a wheel or folder missing: a usage mistake (2), as app.py says it
        args.checked_preset = preset
    return args.checked_preset


def refuse_ignored(args, preset) -> None:
    """What `preset` makes of the flags, refused in one line (exit 2) before its models load: a flag it would ignore,
    or more turns than its built-in prompts."""
    drafter = args.drafter or preset.drafter
    whose = "" if args.drafter else f" (preset {preset.name}'s default)"
    if args.draft_confidence is not None and drafter == PROMPT_LOOKUP:  # copies from the context: no probabilities
        refuse(PROG, f"--draft-confidence with --drafter {drafter}{whose}: prompt lookup copies tokens with no "
                     "confidence to stop on; leave --draft-confidence out, or choose a drafter that is a model")
    if args.cost_samples is not None and drafter in HEAD_DRAFTERS:  # a head runs beside plain decoding: no c
        refuse(PROG, f"--cost-samples with --drafter {drafter}{whose}: a head is measured beside plain decoding, with "
                     "no draft cost c; leave --cost-samples out")
    if not preset.chat_template or args.prompts:
        return
    if args.prompt_tokens is not None:  # the chat prompts run as written
        refuse(PROG, f"--prompt-tokens sets the built-in stdlib prompts' length; preset {preset.name!r} is a chat "
                     "preset, whose built-in prompts (specui.chat_prompts) run as written: leave --prompt-tokens out")
    if args.turns > len(chat_prompts.HELD_OUT):
        refuse(PROG, too_few_turns(args.turns, f"preset {preset.name!r} has {len(chat_prompts.HELD_OUT)} built-in "
                                               "held-out chat prompts (specui.chat_prompts)", MORE_PROMPTS))


def refuse_overflow(args, preset) -> None:
    """Built-in stdlib prompts (each exactly --prompt-tokens long) and --max-new-tokens that overflow the target's
    context, refused with the engine's own words (`specui.settings.context_overflow`, `check_context`'s too: the
    target first, as the first run would say it minutes later). Only where the length is known from the flags (not a
    chat preset's prompts, a --prompts file's or --turns') and the target is a folder whose config.json gives its
    context."""
    if preset.chat_template or args.prompts or args.turns:
        return
    length = args.prompt_tokens or PROMPT_TOKENS
    message = settings.context_overflow(length, args.max_new_tokens, folder_context(preset.target), "target",
                                        "lower --prompt-tokens")  # built in: no prompt of the user's to shorten
    if message:
        refuse(PROG, as_flags(message))  # --max-new-tokens, as python -m specui says it


def folder_context(ref: str | None) -> int | None:
    """max_position_embeddings of a model folder's config.json (what `specui.kv.context_limit` reads once it is
    loaded); None for anything else (a Hub id, a GGUF file, a config that does not say)."""
    path = Path(ref) / "config.json" if ref and Path(ref).is_absolute() else None
    if path is None or not path.is_file():
        return None
    try:
        limit = json.loads(path.read_text(encoding="utf-8")).get("max_position_embeddings")
    except (OSError, ValueError, AttributeError):
        return None  # the load says what is wrong with it
    return limit if isinstance(limit, int) and not isinstance(limit, bool) else None
