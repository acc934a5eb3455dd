"""`python -m specui.bench`'s flags: read, and their mistakes said, before torch loads (`specui.bench.__main__`
reads them first, then `specui.bench.cli.main` runs with them): a bad range or --json path answers at once."""

from __future__ import annotations

import argparse

from specui.bench.prompts import read_prompt_texts
from specui.bench.record import json_path_problem, started
from specui.command_line import DECODE_RANGES, OneLineParser, Range, refuse_empty, refuse_greedy_seed, refuse_outside
from specui.drafters.registry import DRAFTER_NAMES, LABELS, name_of
from specui.presets import ConfigError
from specui.settings import (MAX_CONFIDENCE, MAX_REPETITION_PENALTY, MAX_TEMPERATURE, MAX_TOP_K, MAX_TREE_NODES,
                             MAX_TREE_WIDTH, DecodeSettings, SettingsError, reworded)

DEFAULT_PROMPTS = 8
PROMPT_TOKENS = 128
TIMING_SAMPLES = 50
PROG = "python -m specui.bench"
ALL = "all"  # --drafter all: plain decoding and every drafter of the preset
# DecodeSettings' fields that are flags here of the same name (top_p: --top-p)
PRESETS = "leave it out for the preset's"  # (a count of 0 would read as the flag left out)
COUNTS = {"repeats": Range(1), "warmup": Range(0), "num_prompts": Range(1), "prompt_tokens": Range(1),
          "cost_samples": Range(1), "turns": Range(0), "threads": Range(1, means=PRESETS),
          "prompt_threads": Range(1, means=PRESETS)}  # None: the default
SETTINGS_FLAGS = ("max_new_tokens", "num_draft_tokens", "temperature", "top_p", "top_k", "seed", "repetition_penalty",
                  "tree_width", "tree_nodes", "draft_confidence", "drafter")


def drafter_named(given: str) -> str:
    """--drafter's value as a drafter's name: a name or the app's label for it (`name_of`), or all, in any case (as
    python -m specui reads --drafter All, to say that this command races them all)."""
    return ALL if given.strip().lower() == ALL else name_of(given)


def parse_args(argv=None) -> argparse.Namespace:
    p = OneLineParser(prog=PROG, description="specui's engine against transformers' own generation, on the same "
                                             "prompts.")
    p.add_argument("--preset", default=None, help="a preset of models.yaml (default: its default)")
    p.add_argument("--config", default=None, help="the models.yaml to read (default: specui's own, beside its app.py)")
    p.add_argument("--target", default=None, help="a pair not in models.yaml: its target (a local folder, a .gguf "
                                                  "file or a Hugging Face Hub id), in place of --preset")
    p.add_argument("--draft", default=None, help="with --target: its draft model (a folder, a .gguf file or a Hub id; "
                                                 "without one, prompt lookup drafts)")
    p.add_argument("--chat", action="store_true", help="with --target: prompts in the target's chat template")
    p.add_argument("--prompts", default=None,
                   help='JSON Lines file, one {"prompt": "..."} per line (default: the held-out chat and code prompts '
                        'of specui.chat_prompts for a chat preset, else held-out stdlib test code)')
    p.add_argument("--num-prompts", type=int, default=None,
                   help=f"how many prompts: the first N of the built-in ones (default: {DEFAULT_PROMPTS}; there are 16 "
                        "held-out chat prompts) or, with --prompts, the first N of the file's (default: all of them); "
                        "not with --turns, whose N turns are the first N prompts")
    p.add_argument("--prompt-tokens", type=int, default=None,
                   help=f"length of each built-in stdlib prompt, in tokens (default: {PROMPT_TOKENS}; not for a chat "
                        "preset's prompts or a --prompts file's, which run as written)")
    p.add_argument("--max-new-tokens", type=int, default=128,
                   help="tokens decoded per run (default: %(default)s)")
    p.add_argument("-k", "--num-draft-tokens", type=int, default=None, metavar="K",
                   help="K (default: the preset's; with --drafter all or a head, each drafter's own K from the "
                        "preset's drafter_tokens)")
    p.add_argument("--draft-confidence", type=float, default=None, metavar="C",
                   help="a round stops drafting once the draft's confidence (the product of its top probabilities) "
                        f"falls below this, 0 to {MAX_CONFIDENCE:g}; K is then the most it drafts (default: the "
                        "preset's draft_confidence, 0 with token trees; 0 = always K)")
    p.add_argument("--temperature", type=float, default=0.0,
                   help=f"0 = greedy, else sampled, up to {MAX_TEMPERATURE:g}")
    p.add_argument("--top-p", type=float, default=1.0, help="with --temperature: nucleus sampling (1 = off)")
    p.add_argument("--top-k", type=int, default=0, help=f"with --temperature: the k most likely tokens only, up to "
                                                        f"{MAX_TOP_K:,} (0 = off)")
    p.add_argument("--repetition-penalty", type=float, default=1.0, metavar="P",
                   help=f"transformers' repetition penalty on the target's logits, up to {MAX_REPETITION_PENALTY:g} "
                        "(1 = off; greedy or sampled)")
    p.add_argument("--tree-width", type=int, default=1, metavar="W",
                   help=f"token trees: children per expanded node, 1 to {MAX_TREE_WIDTH} (1 = one chain of K drafts, "
                        "the default)")
    p.add_argument("--tree-nodes", type=int, default=0, metavar="N",
                   help=f"token trees: 0 = the static tree to depth K, N (up to {MAX_TREE_NODES}) = the dynamic "
                        "(EAGLE-2) tree keeping N nodes")
    p.add_argument("--drafter", type=drafter_named, choices=(*DRAFTER_NAMES, ALL), default=None, metavar="NAME|all",
                   help=f"a drafter of the preset ({', '.join(DRAFTER_NAMES)}, or the app's labels: "
                        f"{', '.join(map(repr, LABELS.values()))}; default: the preset's), or {ALL}: plain decoding "
                        "and every drafter of the preset, side by side")
    p.add_argument("--turns", type=int, default=0,
                   help="N > 0: a conversation of N turns (the first N prompts as successive messages), each turn "
                        "decoded afresh and with the conversation's cache (specui.prompt_cache), side by side")
    p.add_argument("--repeats", type=int, default=3,
                   help="timed runs of each method per prompt, the median kept (default: %(default)s)")
    p.add_argument("--warmup", type=int, default=1,
                   help="untimed runs of each method per prompt first (default: %(default)s)")
    p.add_argument("--threads", type=int, default=None,
                   help="torch CPU threads (default: the preset's `threads`, else torch's choice)")
    p.add_argument("--prompt-threads", type=int, default=None,
                   help="torch CPU threads while specui's engine reads a prompt (default: the preset's "
                        "`prompt_threads`, else --threads)")
    p.add_argument("--cost-samples", type=int, default=None,
                   help=f"timed one-token forwards of each model for c, the median kept (default: {TIMING_SAMPLES}; "
                        "only a run of one drafter that is no head against plain decoding and transformers measures c)")
    p.add_argument("--seed", type=int, default=0, help="the runs' seed (default: %(default)s)")
    p.add_argument("--json", default=None, metavar="FILE", help="also write the results as one JSON object to FILE")
    args = p.parse_args(argv)
    refuse_empty(p, args, "preset", "config", "target", "draft", "prompts", "json")
    if args.prompt_tokens is not None and args.prompts:  # it was ignored: the file's prompts run as written
        p.error("--prompt-tokens sets the built-in prompts' length; --prompts runs the file's prompts as written")
    refuse_outside(p, args, {**DECODE_RANGES, **COUNTS})  # the settings' at the app's limits, and the run's counts
    if (args.top_p != 1.0 or args.top_k) and args.temperature == 0:
        p.error("--top-p and --top-k shape sampled decoding: give --temperature > 0 too")
    if args.turns and args.drafter == ALL:
        p.error(f"--turns runs one drafter (the preset's, or --drafter NAME), not {ALL}")
    if args.turns and args.num_prompts is not None:  # it was ignored, or cut the prompts short of --turns
        p.error("--num-prompts with --turns: the conversation's turns are the first N prompts (--turns N); leave "
                "--num-prompts out")
    if args.cost_samples is not None and (args.turns or args.drafter == ALL):  # they were ignored: c is not measured
        p.error(f"--cost-samples with {'--turns' if args.turns else '--drafter all'}: that run measures no draft cost "
                "c; leave --cost-samples out")
    if (args.draft or args.chat) and not args.target:
        p.error("--draft and --chat need --target")
    if args.target and args.preset:
        p.error("--target names a pair in place of --preset: give one of them")
    if args.prompts:  # a file that cannot be used is refused before any model loads, naming its flag
        try:
            args.prompt_texts, args.prompts_sha256 = read_prompt_texts(args.prompts)
        except ConfigError as e:
            p.error(f"--prompts {e}")
        if args.turns > len(args.prompt_texts):
            p.error(too_few_turns(args.turns, f"{args.prompts} holds {len(args.prompt_texts)}",
                                  f"add prompts to {args.prompts}"))
    if args.json:  # refused now, not after minutes of timing
        problem = json_path_problem(args.json)
        if problem:
            p.error(f"--json {args.json}: {problem}")
    try:  # what needs more than one flag and no preset (a tree's shape), refused before minutes of loading
        DecodeSettings(max_new_tokens=args.max_new_tokens, num_draft_tokens=args.num_draft_tokens or 1,
                       temperature=args.temperature, top_p=args.top_p, top_k=args.top_k, seed=args.seed,
                       repetition_penalty=args.repetition_penalty,
                       tree_width=args.tree_width, tree_nodes=args.tree_nodes,
                       draft_confidence=args.draft_confidence or 0.0,
                       drafter=None if args.drafter in (None, ALL) else args.drafter)  # one that drafts no trees
    except SettingsError as e:
        p.error(as_flags(str(e)))
    refuse_greedy_seed(p, args, argv)
    args.started = started()  # the date and the code the run starts with, not those at its end
    return args


def too_few_turns(turns: int, have: str, fix: str) -> str:
    """--turns N with fewer than N prompts, in one line: where the prompts came from and what to do."""
    return f"--turns {turns} needs {turns} prompts, one a turn: {have}; {fix}, or lower --turns"


def as_flags(message: str) -> str:
    """A settings error in the command line's words: `tree_nodes=5 needs a tree: set tree_width ...` -> `--tree-nodes 5
    needs a tree: set --tree-width ...` (the ranges are refused before, by `refuse_outside`)."""
    if message.startswith("drafter "):  # elsewhere "drafter" is a word of the sentence ("needs a drafter with ...")
        message = "--" + message
    flags = {name: f"--{name.replace('_', '-')}" for name in SETTINGS_FLAGS if name != "drafter"}
    return reworded(message, flags)
