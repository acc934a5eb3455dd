"""`python -m specui`: speculative decoding in a terminal, for a workstation over SSH or a fresh install.

`python -m specui "Write a haiku about the sea."` loads models.yaml's default preset (offline, as the app does),
streams the reply round by round with each token coloured by where it came from (`specui.terminal_view`), then
prints one stats line. A chat preset wraps the prompt in its chat template as the app does; a base model (`bundled`)
continues the text. `--chat` holds a conversation, each turn reading only its new message (`PromptCache`);
`--compare` runs plain decoding after, on the same prompt, settings and seed; `--json FILE` writes the run's record.

A user's mistake is one line naming the flag and exit status 2 (`specui.command_line` turns a missing model wheel, a
bad models.yaml or a prompt too long into one line and exit status 2 too, as app.py does, a model that fails as it
loads into 1, Ctrl-C into "interrupted" and 130).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

from specui.drafters.registry import name_of
from specui.settings import DecodeSettings, SettingsError
from specui.terminal_args import PROG, as_flags, parse_args, refuse
from specui.text import not_unicode

def not_text(text: str, what: str) -> str | None:
    """Why `text` is no text a tokenizer reads (bytes that are not UTF-8 reach argv as lone surrogates), or None."""
    problem = not_unicode(text, what)
    return problem and f"{problem}; give it as UTF-8"


def read_prompt(given: str | None) -> str:
    """The prompt: the argument, or stdin's text for none or `-` (a final line break dropped); refused when empty."""
    if given is None or given == "-":
        if sys.stdin.isatty():
            print("Type the prompt, then Ctrl-D (or give it as an argument).", file=sys.stderr)
        text = sys.stdin.read()
        text = text[:-1] if text.endswith("\n") else text
        where = "stdin"
    else:
        text, where = given, "the prompt"
    if not text.strip():
        refuse(f"no prompt: {where} is empty; give it as an argument ({PROG} \"Write a haiku.\") or on stdin")
    if problem := not_text(text, where):
        refuse(problem)
    return text


def write_json(path: str, data: dict) -> bool:
    """The record written to `path`; False (said in one line) when it cannot be."""
    try:
        Path(path).expanduser().write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    except OSError as e:
        print(f"{PROG}: error: --json {path}: {e.strerror or e}", file=sys.stderr)
        return False
    return True


class Session:
    """The loaded engine, the run's settings and how to show them: one turn at a time (`turn`)."""

    def __init__(self, args, engine, preset, settings: DecodeSettings, argv):
        from specui.terminal_view import wants_colour

        self.args, self.engine, self.preset, self.settings = args, engine, preset, settings
        self.colour = wants_colour(args.color, sys.stdout)
        self.safe = self.colour or sys.stdout.isatty()  # a terminal obeys no escape a model writes
        self.command = " ".join([PROG, *(sys.argv[1:] if argv is None else argv)])

    def turn(self, messages: list[dict], text: str, cache=None):
        """Decode the reply to `text` after `messages` (speculatively, then plainly with --compare), streaming it;
        prints the stats; returns (speculative Reply, plain Reply or None, the ids read)."""
        from specui.prompt_cache import turn_ids
        from specui.terminal_view import Reply, compare_line, stats_line, stream_reply
        from specui.text import reading_note

        ids = turn_ids(self.engine.tokenizer, self.preset, [*messages, {"role": "user", "content": text}],
                       system=self.args.system)
        spec, plain = Reply(), None
        if cache is not None and self.args.compare:  # both runs read the new turn alike, as the app's race does
            cache.limit = cache.reusable(ids, self.engine.target_model)
        try:
            rounds = self.engine.stream(ids, self.settings, into=spec.result, cache=cache)  # refuses before work
            reading = len(ids) - (0 if cache is None else cache.reusable(ids, self.engine.target_model))
            if note := reading_note(reading):  # a long message: seconds before the reply's first token
                print(f"({note})", file=sys.stderr, flush=True)
            # a terminal's reply wrapped at word boundaries to its width (COLUMNS, else the terminal's), read as each
            # reply starts: a window resized between turns wraps at its new width; a pipe's as written
            width = shutil.get_terminal_size().columns if sys.stdout.isatty() else None
            stream_reply(rounds, spec, tokenizer=self.engine.tokenizer, prompt_ids=ids, out=sys.stdout,
                         colour=self.colour, safe=self.safe, width=width)
            s = self.settings
            print(stats_line(spec, drafter=s.drafter, k=s.num_draft_tokens, confidence=s.draft_confidence,
                             sampled=not s.greedy, chat=self.args.chat, adaptive=s.adaptive,
                             static_tree=s.tree_width > 1 and not s.tree_nodes, penalty=s.repetition_penalty),
                  file=sys.stderr, flush=True)
            if self.args.compare:
                print("decoding plainly (the target alone) for the comparison…", file=sys.stderr, flush=True)
                plain = Reply()
                quiet = open(os.devnull, "w", encoding="utf-8")
                with quiet:
                    stream_reply(self.engine.stream(ids, s.but(speculative=False, seed=spec.result.seed),
                                                    into=plain.result, cache=cache),
                                 plain, tokenizer=self.engine.tokenizer, prompt_ids=ids, out=quiet, colour=False,
                                 safe=False)
                print(compare_line(spec, plain, greedy=s.greedy), file=sys.stderr, flush=True)
        finally:
            if cache is not None:
                cache.limit = None
        return spec, plain, ids

    def record(self, spec, plain, text: str) -> dict:
        from specui.terminal_view import record

        return record(spec, plain, preset=self.preset.name, settings=self.settings, prompt=text,
                      system=self.args.system, command=self.command)


def load(args):
    """(engine, preset) of --preset/--config, the flags that need the preset checked before its models load."""
    from specui.command_line import check_preset
    from specui.presets import load_config, with_pair

    config = load_config(args.config)
    if args.target:  # the pair as a preset of its own, checked as a models.yaml entry is
        config = with_pair(config, args.target, args.draft, chat=args.chat_template)
    preset = config.get(None if args.target else args.preset)  # a typo's error names the closest preset, before torch
    if args.system and not preset.chat_template:
        refuse(f"--system: preset {preset.name!r} is a base model with no chat template: it continues the text and "
               "reads no system prompt" + (" (an instruct --target: add --chat-template)" if args.target else ""))
    settings_for(args, None, preset)  # a static tree too big at the preset's K, refused before its models load
    check_preset(PROG, preset)  # a wheel or folder missing: a usage mistake (2), as app.py says it, before torch
    from transformers.utils import logging as transformers_logging  # torch and transformers: once the preset is sound
    from specui.loading import load_engine

    transformers_logging.set_verbosity_error()
    transformers_logging.disable_progress_bar()  # the weights' bars of a few milliseconds each
    engine = load_engine(preset, progress=lambda line: print(line, file=sys.stderr, flush=True),
                         checked=True)  # check_preset ran check_before_loading: not again (it may ask the Hub)
    return engine, preset


def settings_for(args, engine, preset) -> DecodeSettings:
    """The run's settings: the flags, and the preset's K and draft confidence for the drafter where they leave it
    (the engine None: before its models load, the drafter not yet checked against the loaded ones)."""
    drafter = name_of(args.drafter) if args.drafter else preset.drafter
    if engine is not None and drafter not in engine.drafters:
        refuse(f"--drafter {args.drafter or drafter}: preset {preset.name!r} has no such drafter; its drafters: "
               f"{', '.join(engine.drafters)}")
    k = args.num_draft_tokens if args.num_draft_tokens is not None else preset.k_for(drafter)
    confidence = (preset.confidence_for(drafter, tree=args.tree_width > 1) if args.draft_confidence is None
                  else args.draft_confidence)  # a tree takes no preset's floor, as load_engine and the benchmark
    try:
        return DecodeSettings(max_new_tokens=args.max_new_tokens, num_draft_tokens=k, temperature=args.temperature,
                              top_p=args.top_p, top_k=args.top_k, seed=args.seed, drafter=drafter,
                              draft_confidence=confidence, repetition_penalty=args.repetition_penalty,
                              adaptive=args.adaptive, tree_width=args.tree_width, tree_nodes=args.tree_nodes)
    except SettingsError as e:  # what needs the preset: its drafter can draft no trees, a static tree at its K
        refuse(as_flags(str(e)))


COMMANDS = {"/reset": "start a new conversation (the model forgets this one)", "/help": "list these commands",
            "/quit": "end the conversation (as an empty line or Ctrl-D does)",
            "//": "sends a one-word message that starts with a slash (//help sends /help)"}


def command_like(word: str) -> bool:
    """Whether a chat's line, stripped, is read as a command: one word that starts with a slash and has no other
    (/help, /nope; not a path such as /usr/lib, nor a sentence)."""
    return word.startswith("/") and " " not in word and "/" not in word[1:]


def converse(session: Session, first: str | None) -> int:
    """--chat: a message per line (`first`, the prompt given, opens it), each turn reading only its new tokens from
    the conversation's cache; an empty line, /quit or end of input ends it, the other `COMMANDS` as they say. Returns
    the exit status: 2 when a message was refused (said as it was), 1 when the record could not be written, else 0
    (a script piping messages in must not take a skipped one as answered). A conversation longer
    than the model's context leaves its oldest exchanges out, as the app's chat does; a base model continues each
    message alone, as the app's chat does too (`turn_ids`)."""
    from specui.engine import ContextLengthError
    from specui.prompt_cache import PromptCache, answer_ids, leave_out_oldest, turn_ids
    from specui.text import left_out_note

    cache, messages, turns, status = PromptCache(), [], [], 0
    ask = "> " if sys.stdin.isatty() else ""
    if not session.preset.chat_template:
        print(f"(preset {session.preset.name!r} is a base model: it continues each message alone and reads no "
              "conversation, as the app's chat does; a message that goes on from the last one reads only its new "
              "tokens)", file=sys.stderr, flush=True)
    while True:
        text, first = (first, None) if first is not None else (read_line(ask), None)
        if text is None or not text.strip():
            return status
        word = text.strip()
        if word.startswith("//") and command_like(word[1:]):  # //etc sends /etc, which alone reads as a command;
            text, word = text.lstrip()[1:], ""  # "// note" or //cdn.example.com/lib.js, never one, go as typed
        if word in ("/quit", "/exit"):
            return status
        if word == "/reset":
            cache.clear()
            messages = []
            print("(a new conversation)", file=sys.stderr, flush=True)
            continue
        if word in ("/help", "/?"):
            print("\n".join(f"  {name:7} {what}" for name, what in COMMANDS.items()), file=sys.stderr, flush=True)
            continue
        if command_like(word):  # a mistyped command, not a path
            print(f"{PROG}: error: no command {word}; the commands: {', '.join(COMMANDS)} (to send {word} as a "
                  f"message, type /{word})", file=sys.stderr, flush=True)
            continue
        if problem := not_text(text, "the message"):
            print(f"{PROG}: error: {problem}", file=sys.stderr, flush=True)
            status = 2
            continue
        try:
            try:
                spec, plain, _ = session.turn(messages, text, cache)
            except ContextLengthError as e:  # the oldest exchanges left out, as many as leave a quarter free
                if not (messages and e.limit):
                    raise
                tokenizer, user = session.engine.tokenizer, {"role": "user", "content": text}
                _, n = leave_out_oldest(messages, lambda kept: turn_ids(tokenizer, session.preset, [*kept, user],
                                                                       system=session.args.system),
                                        limit=e.limit, new_tokens=session.settings.max_new_tokens)
                print(left_out_note(n, e.limit), file=sys.stderr, flush=True)  # the app's chat's words
                messages = messages[n:]
                spec, plain, _ = session.turn(messages, text, cache)
        except ContextLengthError as e:  # this message alone is too long: say so, and take the next
            print(f"{PROG}: error: {as_flags(str(e))}", file=sys.stderr, flush=True)
            status = 2
            continue
        if session.preset.chat_template:  # a base model reads no conversation: only its cache is kept
            messages = [*messages, {"role": "user", "content": text},
                        {"role": "assistant", "content": spec.text, "token_ids": answer_ids(spec.result),
                         "ids_of": session.preset.name}]
        if session.args.json:  # rewritten after every turn: a conversation ended by Ctrl-C keeps its record
            turns.append(session.record(spec, plain, text))
            if not write_json(session.args.json, {"preset": session.preset.name, "turns": turns}):
                status = max(status, 1)


def read_line(ask: str) -> str | None:
    """One line of input, None at its end (Ctrl-D)."""
    try:
        return input(ask)
    except EOFError:
        if ask:
            print(file=sys.stderr)
        return None


def main(argv=None) -> None:
    args = parse_args(argv)  # --help and the flags' mistakes answer before torch and transformers load (seconds)
    if hasattr(sys.stdin, "reconfigure"):  # bytes that are no UTF-8 as lone surrogates, which `not_text` names: a
        sys.stdin.reconfigure(errors="surrogateescape")  # UTF-8 locale but C's decodes strictly (UnicodeDecodeError)
    if args.system and (problem := not_text(args.system, "--system")):
        refuse(problem)
    text = None if args.chat and args.prompt in (None, "-") else read_prompt(args.prompt)
    engine, preset = load(args)  # a preset's mistakes refused before torch loads
    from specui.engine import ContextLengthError
    session = Session(args, engine, preset, settings_for(args, engine, preset), argv)
    # a reader that leaves (`| head`): specui.command_line ends the run quietly, exit status 141
    if session.colour:
        from specui.terminal_view import legend

        print(legend(), file=sys.stderr, flush=True)
    if args.chat:
        raise SystemExit(converse(session, text))
    try:
        spec, plain, _ = session.turn([], text)
    except ContextLengthError as e:  # before any work: the prompt or --max-new-tokens is too long
        refuse(as_flags(str(e)))
    if args.json and not write_json(args.json, session.record(spec, plain, text)):
        raise SystemExit(1)  # the reply was shown, its record not written: a script must not take it as done
