"""`python -m specui.bench`'s run: prompts, the environment, and `main` (its flags: specui.bench.flags)."""

from __future__ import annotations

import sys

import torch

from specui import chat_prompts
from specui.arena import PLAIN, can_draft, skip_reason
from specui.bench import arena as bench_arena
from specui.bench import conversation as bench_conversation
from specui.bench.flags import (  # noqa: F401 (parse_args, as_flags and the defaults are the command line's, here too)
    ALL, DEFAULT_PROMPTS, PROG, PROMPT_TOKENS, TIMING_SAMPLES, as_flags, parse_args, too_few_turns)
from specui.bench.preflight import (  # noqa: F401 (refuse_ignored: the docs' commands' test reads it here)
    MORE_PROMPTS, checked_preset, refuse_ignored)
from specui.bench.prompts import builtin_prompts, tokenize_prompts
from specui.bench.record import environment, provenance, show, write_json
from specui.command_line import READER_LEFT, refuse
from specui.bench.report import format_table
from specui.bench.costs import measure_costs
from specui.bench.run import Methods, Plan, constant_assistant_schedule, plan_arms, run_prompts, summarise
from specui.drafters import HEAD_DRAFTERS, MODEL_DRAFTERS
from specui.engine_checks import ContextLengthError, check_context
from specui.loading import load_pair
from specui.settings import DecodeSettings


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



def main(argv=None, *, args=None) -> dict:
    """The benchmark of `argv`'s flags (args: those flags read already, `specui.bench.__main__`)."""
    from transformers.utils import logging as transformers_logging

    args = parse_args(argv) if args is None else args
    texts = first_prompts(args.prompt_texts, args.num_prompts, args.prompts) if args.prompts else None
    count = args.turns or args.num_prompts or DEFAULT_PROMPTS  # of the built-in prompts
    length = args.prompt_tokens or PROMPT_TOKENS
    transformers_logging.set_verbosity_error()  # generate()'s advice about its own arguments is noise here
    transformers_logging.disable_progress_bar()  # the weights' bars of a few milliseconds each, as python -m specui
    preset = checked_preset(args)  # what the preset makes of the flags, its models missing: refused before torch
    pair = load_pair(preset, progress=lambda msg: print(msg, file=sys.stderr),  # applies the preset's threads
                     checked=True)  # check_before_loading ran in checked_preset: not again (it may ask the Hub)
    if args.threads:
        torch.set_num_threads(args.threads)
    drafter = args.drafter or preset.drafter
    engine = pair.engine()  # one engine: its drafters say what runs, and it runs them (`Methods`)
    names = drafters_to_run(engine, preset.name, drafter)
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
    for ids in prompts if not args.turns else ():  # a prompt too long for the target: said now, not after minutes
        try:
            check_context(len(ids), decode.max_new_tokens, target=pair.target)  # (the engine says it as it starts)
        except ContextLengthError as e:
            refuse(PROG, as_flags(str(e)))  # in the flags' words, as python -m specui says it
    if not texts and not args.turns:
        note_fewer_prompts(count, len(prompts), "held-out chat and code prompts" if chat
                           else f"held-out stdlib prompts of {length} tokens")
    methods = Methods(pair, plan, engine=engine)
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


def drafters_to_run(engine, preset_name: str, drafter: str) -> tuple[str, ...]:
    """The arms of a side-by-side run: plain and every drafter for `all`, plain and the head for a head
    drafter (transformers has nothing to time it against); () for the model or prompt lookup alone.
    Refuses (exit 2) naming the preset's drafters (`engine.drafters`) when it lacks the one asked for, as
    `python -m specui` does."""
    available = engine.drafters
    if drafter != ALL and drafter not in available:
        refuse(PROG, f"--drafter {drafter}: preset {preset_name!r} has no such drafter; its drafters: "
                     f"{', '.join(available)} (or --drafter {ALL})")
    if drafter == ALL:
        return (PLAIN, *available)
    return (PLAIN, drafter) if drafter in HEAD_DRAFTERS else ()
