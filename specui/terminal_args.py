"""`python -m specui`'s command line: its flags (`parse_args`, with the examples and environment its --help lists),
each flag's mistake refused in one line before torch loads, and `refuse` for a mistake found after (exit status 2);
`specui.terminal` runs what they ask."""

from __future__ import annotations

import argparse
import sys

from specui.command_line import (DECODE_RANGES, OneLineParser, refuse_empty, refuse_greedy_seed, refuse_outside,
                                 refuse_pair)
from specui.drafters.registry import DRAFTER_NAMES, LABELS, name_of
from specui.settings import (MAX_CONFIDENCE, MAX_REPETITION_PENALTY, MAX_TEMPERATURE, MAX_TOP_K,
                             MAX_TREE_NODES, MAX_TREE_WIDTH, TREE_DRAFTERS, DecodeSettings, SettingsError)

PROG = "python -m specui"
EXAMPLES = """examples:
  python -m specui "Write a haiku about the sea."
  python -m specui --compare --drafter "draft model" -k 4 "Explain recursion briefly."
  python -m specui --compare --tree-width 2 --tree-nodes 8 "Explain recursion briefly."
  echo "def fibonacci(n):" | python -m specui --preset bundled --max-new-tokens 64
  python -m specui --chat --system "You answer in one sentence."

environment:
  COLUMNS                   the reply's wrap width (else the terminal's)
  SPECUI_AMBIGUOUS_WIDE=1   a terminal set to draw East Asian Ambiguous characters (Greek, Cyrillic, the
                            degree sign, the ellipsis) two columns wide, as a CJK one may be: the wrap counts
                            them two
"""


class _Help(argparse.HelpFormatter):
    """The description and options wrapped; the examples (the epilog) as written."""

    def _fill_text(self, text, width, indent):
        return text if text.startswith("examples:") else super()._fill_text(text, width, indent)


def refuse(message: str):
    """A mistake found after the flags were read (a preset's drafters, the prompt): one line, exit status 2."""
    print(f"{PROG}: error: {message}", file=sys.stderr)
    raise SystemExit(2)


def parse_args(argv=None) -> argparse.Namespace:
    p = OneLineParser(prog=PROG, description="Speculative decoding in the terminal: the reply streams as each round "
                                             "is decided, every token coloured by where it came from (green: an "
                                             "accepted draft, red: the target's token at a rejection, blue: the bonus "
                                             "token).", epilog=EXAMPLES, formatter_class=_Help)
    p.add_argument("prompt", nargs="?", default=None,
                   help="a chat preset: your message; a base model: the text to continue. Leave it out, or give -, to "
                        "read it from stdin (one final line break dropped)")
    p.add_argument("--preset", default=None, help="a preset of models.yaml (default: its default)")
    p.add_argument("--config", default=None, help="the models.yaml to read (default: specui's own, beside its app.py)")
    pair = p.add_argument_group("a pair not in models.yaml (as app.py takes it)")
    pair.add_argument("--target", metavar="MODEL", help="the target: a folder, a .gguf file or a Hub id (not --preset)")
    pair.add_argument("--draft", metavar="MODEL", help="with --target: its draft model, as --target names one (without "
                                                       "one, prompt lookup drafts); how a run drafts is --drafter")
    pair.add_argument("--chat-template", action="store_true",
                      help="with --target: the prompt in the target's chat template (app.py's --chat)")
    p.add_argument("--drafter", default=None, metavar="NAME",
                   help=f"{', '.join(DRAFTER_NAMES)}, or the app's labels ({', '.join(map(repr, LABELS.values()))}); "
                        "default: the preset's")
    p.add_argument("-k", "--num-draft-tokens", type=int, default=None, metavar="K",
                   help="K, the most tokens drafted a round (default: the preset's K for the drafter)")
    p.add_argument("--adaptive", action="store_true",
                   help="adaptive K: K moves between 1 and max(2K, 8) with the acceptance (not with token trees)")
    p.add_argument("--draft-confidence", type=float, default=None, metavar="C",
                   help="the confidence stop: a chain stops drafting once the draft's chance of being accepted whole "
                        f"falls below C, 0 to {MAX_CONFIDENCE:g} (0 = always K; default: the preset's for the drafter, "
                        "0 with a tree); a dynamic tree keeps no node whose path is less likely")
    p.add_argument("--tree-width", type=int, default=1, metavar="W",
                   help=f"token trees: children per expanded node, 1 to {MAX_TREE_WIDTH} (1 = one chain of K drafts, "
                        f"the default); drafters {', '.join(TREE_DRAFTERS)}")
    p.add_argument("--tree-nodes", type=int, default=0, metavar="N",
                   help="with --tree-width above 1: 0 = the static tree to depth K (the default), N (up to "
                        f"{MAX_TREE_NODES}) = a dynamic tree of N nodes (on a CPU, 7 to 11 pay best)")
    p.add_argument("--temperature", type=float, default=0.0, help=f"0 = greedy (default), else sampled, up to "
                                                                  f"{MAX_TEMPERATURE:g}")
    p.add_argument("--top-p", type=float, default=1.0, help="with --temperature: nucleus sampling (1 = off)")
    p.add_argument("--top-k", type=int, default=0, help=f"with --temperature: the k most likely tokens only, up to "
                                                        f"{MAX_TOP_K:,} (0 = off)")
    p.add_argument("--repetition-penalty", type=float, default=1.0, metavar="P",
                   help=f"transformers' repetition penalty, up to {MAX_REPETITION_PENALTY:g} (1 = off, the default; "
                        "above 1, tokens already in the prompt or the reply become less likely); greedy or sampled, "
                        "the output stays exactly the target's")
    p.add_argument("--seed", type=int, default=None,
                   help="with --temperature: the run's seed (default: a fresh one, shown in a sampled run's stats)")
    p.add_argument("--max-new-tokens", type=int, default=128, help="the most tokens to write (default: %(default)s)")
    p.add_argument("--system", default="", help="a chat preset's system prompt")
    p.add_argument("--compare", action="store_true",
                   help="then decode plainly (the target alone) with the same prompt, settings and seed: the speedup "
                        "and, greedy, whether the outputs are identical")
    p.add_argument("--json", default=None, metavar="FILE", help="write the run's record (with --chat, every turn's)")
    p.add_argument("--chat", action="store_true",
                   help="a conversation: type a message per line (the prompt, if given, is the first); an empty "
                        "line, /quit or Ctrl-D ends it, /reset starts over, /help lists the commands")
    p.add_argument("--color", choices=("auto", "always", "never"), default="auto",
                   help="colour the tokens: auto (default) on a terminal unless NO_COLOR is set")
    args = p.parse_args(argv)
    refuse_empty(p, args, "preset", "config", "json", "target", "draft")
    refuse_pair(p, args)
    if args.drafter is not None and args.drafter.strip().lower() == "all":  # the benchmark's word, which races them all
        p.error(f"--drafter {args.drafter}: a reply is decoded by one drafter; to race every drafter of a preset, "
                "run python -m specui.bench --drafter all, or the app's Arena")
    if args.drafter is not None and name_of(args.drafter) not in DRAFTER_NAMES:
        p.error(f"--drafter {args.drafter!r}: no such drafter; choose one of {', '.join(DRAFTER_NAMES)} (or the app's "
                f"labels: {', '.join(map(repr, LABELS.values()))})")
    if (args.top_p != 1.0 or args.top_k) and args.temperature == 0:
        p.error("--top-p and --top-k shape sampled decoding: give --temperature > 0 too")
    if args.json:
        from specui.bench.record import json_path_problem  # torch-free: a folder that is not there answers at once

        if problem := json_path_problem(args.json):
            p.error(f"--json {args.json}: {problem}")
    refuse_outside(p, args, DECODE_RANGES)  # the app's limits
    try:  # what takes more flags than one, before any model loads (a static tree at the preset's K: before its models)
        DecodeSettings(max_new_tokens=args.max_new_tokens, temperature=args.temperature, top_p=args.top_p,
                       top_k=args.top_k, seed=args.seed, num_draft_tokens=1 if args.num_draft_tokens is None
                       else args.num_draft_tokens, repetition_penalty=args.repetition_penalty,
                       adaptive=args.adaptive, tree_width=args.tree_width, tree_nodes=args.tree_nodes,
                       draft_confidence=args.draft_confidence or 0.0, drafter=args.drafter and name_of(args.drafter))
    except SettingsError as e:
        p.error(as_flags(str(e)))
    refuse_greedy_seed(p, args, argv)
    return args


def as_flags(message: str) -> str:
    """A settings error in the flags' words (`specui.bench.flags.as_flags`, torch-free: a range's mistake answers at
    once; imported as a mistake is said, which --help never waits for)."""
    from specui.bench.flags import as_flags as worded

    return worded(message).replace("adaptive K and token trees", "--adaptive and token trees (--tree-width above 1)")
