"""`python -m specui.bench`'s command line: options, prompts, the environment, and `main`."""

from __future__ import annotations

import argparse
import sys

import torch

from specui import chat_prompts
from specui.arena import PLAIN, can_draft, skip_reason
from specui.bench import arena as bench_arena
from specui.bench import conversation as bench_conversation
from specui.bench.prompts import builtin_prompts, read_prompt_texts, tokenize_prompts
from specui.bench.record import environment, json_path_problem, provenance, show, started, write_json
from specui.command_line import READER_LEFT, check_preset, refuse, refuse_empty, refuse_greedy_seed
from specui.bench.report import format_table
from specui.bench.run import (
    DEFAULT_PROMPTS,
    PROMPT_TOKENS,
    TIMING_SAMPLES,
    Methods,
    Plan,
    constant_assistant_schedule,
    measure_costs,
    plan_arms,
    run_prompts,
    summarise,
)
from specui.drafters import DRAFTER_NAMES, HEAD_DRAFTERS, MODEL_DRAFTERS, PROMPT_LOOKUP
from specui.loading import load_pair
from specui.presets import ConfigError, load_config, with_pair
from specui.settings import DecodeSettings, SettingsError, reworded

PROG = "python -m specui.bench"
ALL = "all"  # --drafter all: plain decoding and every drafter of the preset
MORE_PROMPTS = 'give --prompts FILE (JSON Lines, one {"prompt": "..."} a line) with more'
# DecodeSettings' fields that are flags here of the same name (top_p: --top-p)
SETTINGS_FLAGS = ("max_new_tokens", "num_draft_tokens", "temperature", "top_p", "top_k", "seed", "repetition_penalty",
                  "tree_width", "tree_nodes", "draft_confidence", "drafter")

def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog=PROG,
                                description="specui's engine against transformers' own generation, on the same "
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
    p.add_argument("--draft-confidence", type=float, default=None,
                   help="a round stops drafting once the draft's confidence (the product of its top probabilities) "
                        "falls below this; K is then the most it drafts (default: the preset's draft_confidence, 0 "
                        "with token trees; 0 = always K)")
    p.add_argument("--temperature", type=float, default=0.0, help="0 = greedy")
    p.add_argument("--top-p", type=float, default=1.0, help="with --temperature: nucleus sampling (1 = off)")
    p.add_argument("--top-k", type=int, default=0, help="with --temperature: the k most likely tokens only (0 = off)")
    p.add_argument("--repetition-penalty", type=float, default=1.0,
                   help="transformers' repetition penalty on the target's logits (1 = off; greedy or sampled)")
    p.add_argument("--tree-width", type=int, default=1,
                   help="token trees: children per expanded node (1 = one chain of K drafts, the default)")
    p.add_argument("--tree-nodes", type=int, default=0,
                   help="token trees: 0 = the static tree to depth K, N = the dynamic (EAGLE-2) tree keeping N nodes")
    p.add_argument("--drafter", choices=(*DRAFTER_NAMES, ALL), default=None, metavar="NAME|all",
                   help=f"a drafter of the preset ({', '.join(DRAFTER_NAMES)}; default: the preset's), or {ALL}: "
                        "plain decoding and every drafter of the preset, side by side")
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
    p.add_argument("--json", default=None, help="also write the results as one JSON object to this file")
    args = p.parse_args(argv)
    refuse_empty(p, args, "preset", "config", "target", "draft", "prompts", "json")
    if args.prompt_tokens is not None and args.prompts:  # it was ignored: the file's prompts run as written
        p.error("--prompt-tokens sets the built-in prompts' length; --prompts runs the file's prompts as written")
    for name in ("max_new_tokens", "repeats", "num_prompts", "prompt_tokens", "cost_samples"):  # None: the default
        if getattr(args, name) is not None and getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1")
    for name in ("num_draft_tokens", "threads", "prompt_threads"):  # None: the preset's; 0 would read as None
        if getattr(args, name) is not None and getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1 (leave it out for the preset's)")
    for name in ("warmup", "temperature", "turns"):
        if getattr(args, name) < 0:
            p.error(f"--{name} must be >= 0, got {getattr(args, name)}")
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
    try:  # the ranges that need no preset (a seed, a tree's shape), refused before minutes of loading
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


def as_flags(message: str) -> str:
    """A settings error in the command line's words: `top_p must be ...` -> `--top-p must be ...` (and a seed is
    an integer here: the library's None is the command line's absent flag)."""
    if message.startswith("drafter "):  # elsewhere "drafter" is a word of the sentence ("needs a drafter with ...")
        message = "--" + message
    flags = {name: f"--{name.replace('_', '-')}" for name in SETTINGS_FLAGS if name != "drafter"}
    return reworded(message, flags).replace(" must be None or ", " must be ")


# -- prompts -----------------------------------------------------------------------------------------


def note_fewer_prompts(asked: int, available: int, what: str) -> None:
    """One line on stderr when --num-prompts asks for more built-in prompts than there are: the run goes on with
    all of them (the report's header and JSON show the count), said rather than done quietly."""
    if available < asked:
        print(f"{PROG}: note: --num-prompts {asked}: there are only {available} {what}; "
              f"running those {available}", file=sys.stderr)



def first_prompts(texts: list[str], count: int | None, path: str) -> list[str]:
    """The first `count` of a --prompts file's texts (None: all of them); asking for more than the file holds runs
    those it has and says so in one line."""
    if count is None:
        return texts
    note_fewer_prompts(count, len(texts), f"prompts in {path}")
    return texts[:count]



def main(argv=None) -> dict:
    from transformers.utils import logging as transformers_logging

    args = parse_args(argv)
    texts = first_prompts(args.prompt_texts, args.num_prompts, args.prompts) if args.prompts else None
    count = args.turns or args.num_prompts or DEFAULT_PROMPTS  # of the built-in prompts
    length = args.prompt_tokens or PROMPT_TOKENS
    transformers_logging.set_verbosity_error()  # generate()'s advice about its own arguments is noise here
    config = load_config(args.config)
    if args.target:
        config = with_pair(config, args.target, args.draft, chat=args.chat)
    preset = config.get(args.preset)
    refuse_ignored(args, preset)
    check_preset(PROG, preset)  # a wheel or folder missing: a usage mistake (2), as app.py says it
    pair = load_pair(preset, progress=lambda msg: print(msg, file=sys.stderr))  # applies the preset's threads
    if args.threads:
        torch.set_num_threads(args.threads)
    drafter = args.drafter or preset.drafter
    names = drafters_to_run(pair, preset.name, drafter)
    confidence = args.draft_confidence if args.draft_confidence is not None else \
        0.0 if names else preset.confidence_for(drafter, tree=args.tree_width > 1)
    # a setting the preset makes wrong (a static tree too large at its K) ends in one line: specui.command_line
    decode = DecodeSettings(max_new_tokens=args.max_new_tokens,
                            # all: drafters without a K of their own take num_draft_tokens, whatever the default's
                            num_draft_tokens=args.num_draft_tokens or (preset.num_draft_tokens if drafter == ALL
                                                                       else preset.k_for(drafter)),
                            temperature=args.temperature, top_p=args.top_p, top_k=args.top_k,
                            repetition_penalty=args.repetition_penalty,
                            drafter=None if names else drafter, seed=args.seed,
                            ignore_eos=True, tree_width=args.tree_width, tree_nodes=args.tree_nodes,
                            draft_confidence=confidence)
    skipped = tuple(name for name in names if not can_draft(name, decode))  # token trees: never run as chains
    names = tuple(name for name in names if name not in skipped)
    plan = Plan(decode=decode, repeats=args.repeats, warmup=args.warmup)
    chat = preset.chat_template
    prompts = (tokenize_prompts(texts, pair.tokenizer, chat=chat) if texts
               else tokenize_prompts(chat_prompts.HELD_OUT[:count], pair.tokenizer, chat=True) if chat
               else builtin_prompts(pair.tokenizer, count=count, length=length))
    if not texts and not args.turns:
        note_fewer_prompts(count, len(prompts), "held-out chat and code prompts" if chat
                           else f"held-out stdlib prompts of {length} tokens")
    methods = Methods(pair, plan)
    if args.prompt_threads:
        methods.engine.prompt_threads = args.prompt_threads
    if args.turns:
        return conversation(args, argv, preset, pair, methods, decode.but(drafter=drafter), texts or (
            chat_prompts.HELD_OUT if chat else [pair.tokenizer.decode(ids) for ids in prompts]))

    finished = []  # each prompt's runs as it completes: what Ctrl-C leaves to report

    def done(i, total, run):
        finished.append(run)
        print(f"prompt {i}/{total} done", file=sys.stderr)

    def measured(arms) -> list:
        """The harness's runs; Ctrl-C after a prompt or more ends it with those (the report says so)."""
        try:
            return run_prompts(methods, prompts, arms=arms, progress=done)
        except KeyboardInterrupt:
            if not finished:
                raise
            return finished

    if names:  # the drafters side by side (specui.bench.arena)
        ks = {} if args.num_draft_tokens else dict(preset.drafter_tokens)  # each its own K, as the arena gives it
        own = args.draft_confidence is None and decode.tree_width == 1  # and its own draft_confidence
        confidences = dict(preset.draft_confidence) if own else {}
        arms = bench_arena.arms(names, decode, ks=ks, confidences=confidences)
        figures = bench_arena.summarise(measured(arms), plan, arms=arms)
    else:  # one drafter against plain decoding and transformers' own generation
        assistant = methods.hf_draft if drafter in MODEL_DRAFTERS else None
        with constant_assistant_schedule(assistant, decode.num_draft_tokens, decode.draft_confidence):
            costs = measure_costs(methods, prompts[0], decode.num_draft_tokens,
                                  samples=args.cost_samples or TIMING_SAMPLES)
            figures = summarise(measured(plan_arms(decode)), costs, plan)
    report = {"preset": preset.name, "drafter": drafter, "max_new_tokens": decode.max_new_tokens,
              "temperature": decode.temperature, "top_p": decode.top_p, "top_k": decode.top_k,
              "repetition_penalty": decode.repetition_penalty,
              "tree_width": decode.tree_width, "tree_nodes": decode.tree_nodes,
              "draft_confidence": decode.draft_confidence, "repeats": plan.repeats, "warmup": plan.warmup,
              "num_prompts": len(finished),
              **({"interrupted": f"after {len(finished)} of {len(prompts)} prompts"} if len(finished) < len(prompts)
                 else {}),
              "prompts": args.prompts or ("held-out chat and code prompts (specui.chat_prompts)" if chat
                                          else "built-in held-out stdlib test code"),
              **environment(methods.device), "prompt_threads": methods.engine.prompt_threads, **figures,
              **({"skipped": {name: skip_reason(name) for name in skipped}} if names else {}),
              **provenance(args, argv)}
    return reported(args, report, format_table(report))


def reported(args, report: dict, table: str) -> dict:
    """The table printed and the JSON written; then a run cut short ends as Ctrl-C's (exit 130, specui.command_line),
    a conversation that outgrew the target's context as a user's error (exit 1), and one whose reader left as a
    pipe's (exit 141): each after its report is kept."""
    read = show(table)
    if args.json:
        write_json(args.json, report)
    if "interrupted" in report:
        raise KeyboardInterrupt
    if "outgrew_context" in report:  # --turns: the turns that fitted are reported; the run did not do what was asked
        raise SystemExit(f"{PROG}: error: --turns {args.turns}: {report['outgrew_context']}; lower --turns, "
                         "--prompt-tokens or --max-new-tokens (the turns before it are reported above)")
    if not read:
        raise SystemExit(READER_LEFT)
    return report


def conversation(args, argv, preset, pair, methods, decode, texts: list[str]) -> dict:
    """--turns: `specui.bench.conversation`'s run, reported and written like the others."""
    if len(texts) < args.turns:  # the built-in stdlib prompts: the others were counted before loading
        refuse(PROG, too_few_turns(args.turns, f"there are {len(texts)} held-out stdlib prompts of "
                                               f"{args.prompt_tokens or PROMPT_TOKENS} tokens", MORE_PROMPTS))
    figures = bench_conversation.run_conversation(
        methods.engine, pair.tokenizer, texts[: args.turns], decode, repeats=args.repeats, warmup=args.warmup,
        chat=preset.chat_template, progress=lambda i, n: print(f"turn {i}/{n} done", file=sys.stderr))
    report = {"preset": preset.name, "drafter": decode.drafter,
              "max_new_tokens": decode.max_new_tokens, "temperature": decode.temperature, "top_p": decode.top_p,
              "top_k": decode.top_k, "repetition_penalty": decode.repetition_penalty,
              "num_draft_tokens": decode.num_draft_tokens, "draft_confidence": decode.draft_confidence,
              "tree_width": decode.tree_width, "tree_nodes": decode.tree_nodes, "repeats": args.repeats,
              "warmup": args.warmup, **environment(methods.device), "prompt_threads": methods.engine.prompt_threads,
              **figures, **provenance(args, argv)}
    return reported(args, report, bench_conversation.format_conversation(report))


def drafters_to_run(pair, preset_name: str, drafter: str) -> tuple[str, ...]:
    """The arms of a side-by-side run: plain and every drafter for `all`, plain and the head for a head
    drafter (transformers has nothing to time it against); () for the model or prompt lookup alone.
    Refuses (exit 2) naming the preset's drafters when it lacks the one asked for, as `python -m specui` does."""
    available = pair.engine().drafters
    if drafter != ALL and drafter not in available:
        refuse(PROG, f"--drafter {drafter}: preset {preset_name!r} has no such drafter; its drafters: "
                     f"{', '.join(available)} (or --drafter {ALL})")
    if drafter == ALL:
        return (PLAIN, *available)
    return (PLAIN, drafter) if drafter in HEAD_DRAFTERS else ()
