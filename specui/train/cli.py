"""`python -m specui.train`'s command line: the stages in order, and the held-out evaluation."""

import argparse
import json
import shlex
import time
from dataclasses import fields
from pathlib import Path

import torch

from specui import corpus
from specui.train import distill, evaluate, model_card, next_step
from specui.train.checkpoint import refuse_overwrite
from specui.command_line import named_options, refuse_ignored
from specui.train.common import (above, at_least, check_folders, check_ranges, encode_stream, make_model,
                                 save_pair_member, train_target, train_tokenizer, within)
from specui.train.config import DEFAULT_OUT, DRAFT_DIR, TARGET_DIR, TrainConfig

DESCRIPTION = f"""Train the bundled model pair from the Python standard library. Writes into --out
(default {DEFAULT_OUT}); the shipped pair in assets/ changes only with --out assets --overwrite."""

EPILOG = """other training commands:
  python -m specui.train heads ...         EAGLE, Medusa and early-exit heads for a preset's target
  python -m specui.train exit ...          an early-exit head from the target's greedy answers
  python -m specui.train.chat ...          the chat target's draft: its answers (step 1), then the draft (step 2)
  python -m specui.train.greedy_labels ... the target's greedy tokens at its sampled answers' positions
each takes --help."""

# the allowed values of TrainConfig's numbers (the fields not named take any value: --seed)
RANGES = {
    "vocab_size": at_least(257, "the 256 byte tokens and the end-of-text token"),
    **{f"{who}_{part}": at_least(1) for who in ("target", "draft") for part in ("layers", "width", "heads", "ffn")},
    "max_positions": at_least(1), "seq_len": at_least(4, "a quarter of it prompts the draft's distillation data"),
    "long_fraction": within(0, 1), "batch_size": at_least(1), "target_steps": at_least(1),
    "draft_steps": at_least(1), "lr": above(0), "draft_lr": above(0), "warmup_steps": at_least(0),
    "weight_decay": at_least(0), "grad_clip": above(0), "distill_ce_weight": at_least(0),
    "distill_sequences": at_least(1), "checkpoint_every": at_least(1),
    "eval_bytes": at_least(100 * evaluate.EVAL_FILES, f"100 bytes for each of {evaluate.EVAL_FILES} held-out files"),
    "alpha_prompts": at_least(1), "alpha_new_tokens": at_least(1), "speedup_prompts": at_least(0),
    "threads": at_least(1),
}


# what --eval-only reads of the settings (the rest train); the settings of the target alone (--stage draft reuses it)
EVAL_READS = ("eval_bytes", "alpha_prompts", "alpha_new_tokens", "speedup_prompts", "seq_len", "threads")
TARGET_ONLY = ("vocab_size", "target_layers", "target_width", "target_heads", "target_ffn", "target_steps", "lr",
               "batch_size", "long_fraction", "checkpoint_dir", "checkpoint_every")


def check_shapes(ap, cfg: TrainConfig, *, training: bool) -> None:
    """Refuse a model shape transformers would refuse (after the tokenizer's minutes), and a context too short for
    the training windows or the evaluation's prompts."""
    for who in ("target", "draft"):
        width, heads = getattr(cfg, f"{who}_width"), getattr(cfg, f"{who}_heads")
        if width % heads:
            ap.error(f"--{who}-width must be a multiple of --{who}-heads ({heads}), got {width}")
        if width // heads % 2:
            ap.error(f"--{who}-width / --{who}-heads must be even (rotary position embeddings turn pairs of each "
                     f"head's dimensions), got {width} / {heads} = {width // heads}")
    if not training:
        return  # --eval-only: the saved pair's own context counts
    prompt, timed = corpus.PROMPT_TOKENS, evaluate.SPEEDUP_TOKENS if cfg.speedup_prompts else 0
    need, why = max((cfg.seq_len + 1, f"--seq-len {cfg.seq_len} and the next token"),
                    (prompt + cfg.alpha_new_tokens, f"a {prompt}-token held-out prompt and --alpha-new-tokens "
                                                    f"{cfg.alpha_new_tokens}"),
                    (prompt + timed, f"a {prompt}-token held-out prompt and the {timed} tokens timed after it; "
                                     "--speedup-prompts 0 skips the timing"))
    if cfg.max_positions < need:
        ap.error(f"--max-positions must be >= {need} ({why}), got {cfg.max_positions}")


def refuse_stopped_run(parser, args, argv) -> None:
    """Refuse, in one line, a run into an --out that an earlier run left half done, naming the command that keeps its
    work (not --overwrite, which refuse_overwrite would offer): a target without its draft (stopped while the draft
    distilled; a run of both stages): --stage draft trains the draft on it; a pair without eval_results.json (stopped
    while it was evaluated, after both stages or --stage draft): --eval-only evaluates it, with the evaluation's
    settings this command names."""
    out = Path(args.out)
    if args.eval_only or args.overwrite or not (out / TARGET_DIR).is_dir():
        return
    named = named_options(parser, args, argv)
    if not (out / DRAFT_DIR).exists():
        if args.stage != "all":
            return
        drop = sorted(named & set(TARGET_ONLY), key=TARGET_ONLY.index)
        drop = f" (without {', '.join('--' + n.replace('_', '-') for n in drop)}: the target's, trained already)" \
            if drop else ""
        parser.error(f"--out {args.out} holds the target of an earlier run that stopped before its draft "
                     f"({out / TARGET_DIR}, no {DRAFT_DIR}): the same command with --stage draft{drop} trains the "
                     "draft on it; --overwrite trains both afresh, or give another --out")
    if not (out / TARGET_DIR / "eval_results.json").exists():
        kept = [part for n in EVAL_READS if n in named for part in ("--" + n.replace("_", "-"), str(getattr(args, n)))]
        command = shlex.join(["python", "-m", "specui.train", "--eval-only", "--out", args.out, *kept])
        parser.error(f"--out {args.out} holds a pair an earlier run trained and stopped before it evaluated it (no "
                     f"{out / TARGET_DIR / 'eval_results.json'}): {command} evaluates it and writes its model cards; "
                     f"--overwrite trains {'both' if args.stage == 'all' else 'the draft'} afresh, or give another "
                     "--out")


def parse_args(argv=None, *, create: bool = False) -> tuple[TrainConfig, argparse.Namespace]:
    """The configuration and the other options; every number checked against its range and --out against the
    file system (no file written; with `create`, as main runs, --out and --checkpoint-dir are made now)."""
    parser = argparse.ArgumentParser(prog="python -m specui.train", description=DESCRIPTION, epilog=EPILOG,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    for f in fields(TrainConfig):
        flag = "--" + f.name.replace("_", "-")
        help_text = f"{f.metadata['help']} (default: %(default)r)"
        if isinstance(f.default, bool):
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=f.default, help=help_text)
        else:
            parser.add_argument(flag, type=type(f.default), default=f.default, help=help_text)
    parser.add_argument("--eval-only", action="store_true",
                        help="train nothing: re-evaluate the pair in --out and rewrite its model cards (default: off)")
    parser.add_argument("--stage", choices=["all", "draft"], default="all",
                        help="all: tokenizer, target and draft; draft: reuse the target saved in --out "
                             "(default: %(default)s)")
    parser.add_argument("--overwrite", action="store_true",
                        help="train over the pair an earlier run left in --out (default: refused)")
    args = parser.parse_args(argv)
    check_ranges(parser, args, RANGES)
    cfg = TrainConfig(**{f.name: getattr(args, f.name) for f in fields(TrainConfig)})
    check_shapes(parser, cfg, training=not args.eval_only)
    needed = [TARGET_DIR, DRAFT_DIR] if args.eval_only else [TARGET_DIR] if args.stage == "draft" else []
    missing = [name for name in needed if not (Path(cfg.out) / name).is_dir()]
    if missing:
        what = "--eval-only" if args.eval_only else "--stage draft"
        parser.error(f"{what} reads an existing pair, but {Path(cfg.out) / missing[0]} is not a folder "
                     f"(train one first, or pass --out assets for the shipped pair)")
    written = [] if args.eval_only else [DRAFT_DIR] if args.stage == "draft" else [TARGET_DIR, DRAFT_DIR]
    refuse_ignored(parser, args, argv, [
        ("overwrite", args.eval_only, "replaces trained weights, which --eval-only does not train"),
        ("stage", args.eval_only, "picks what to train, and --eval-only trains nothing: say one of them"),
        *((f.name, args.eval_only, "is a training setting, and --eval-only trains nothing (it reads "
                                   f"{', '.join('--' + n.replace('_', '-') for n in EVAL_READS)}): drop one of them")
          for f in fields(TrainConfig) if f.name not in {"out", *EVAL_READS}),
        *((name, args.stage == "draft", "is the target's, and --stage draft reads the target in --out as it was "
                                        "trained: drop it, or train both (--stage all)") for name in TARGET_ONLY)])
    refuse_stopped_run(parser, args, argv)
    refuse_overwrite(parser, args, [Path(cfg.out) / name for name in written])
    check_folders(parser, args, ["out", "checkpoint_dir"], create=create)
    return cfg, args


def main(argv=None) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    cfg, args = parse_args(argv, create=True)
    torch.set_num_threads(cfg.threads)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    out = Path(cfg.out)
    train_files, held_out_files = corpus.split_sources()
    print(f"stdlib {corpus.stdlib_root()}: {len(train_files)} training files, {len(held_out_files)} held out")
    started = time.perf_counter()

    if not args.eval_only:
        texts = corpus.read_texts(train_files)
        if args.stage == "all":
            tokenizer = train_tokenizer(texts, vocab_size=cfg.vocab_size, max_positions=cfg.max_positions)
            stream = encode_stream(tokenizer, texts)
            print(f"training stream: {len(stream):,} tokens from {sum(len(t.encode()) for t in texts):,} bytes")
            target = train_target(make_model(cfg, kind="target", tokenizer=tokenizer), stream, cfg=cfg, device=device,
                                  tokenizer=tokenizer)
            save_pair_member(target, tokenizer, out / TARGET_DIR)
        else:
            tokenizer = AutoTokenizer.from_pretrained(out / TARGET_DIR)
            target = AutoModelForCausalLM.from_pretrained(out / TARGET_DIR, dtype=torch.float32).to(device).eval()
            stream = encode_stream(tokenizer, texts)
        target_minutes = (time.perf_counter() - started) / 60
        draft = make_model(cfg, kind="draft", tokenizer=tokenizer)
        draft = distill.distill_draft(draft, target, stream, cfg=cfg, device=device)
        (out / TARGET_DIR / "eval_results.json").unlink(missing_ok=True)  # the figures of the draft it replaces
        save_pair_member(draft, tokenizer, out / DRAFT_DIR)
        minutes = (time.perf_counter() - started) / 60
        print(f"trained in {minutes:.1f} min on {device}")
        built = cfg  # the pair's settings: with --stage draft, the target's own as it was trained (refused here)
        if args.stage == "all":
            model_card.save_training_facts(out / TARGET_DIR, cfg=cfg, train_minutes=target_minutes, device=device)
        else:
            built = model_card.refresh_training_command(out / TARGET_DIR, cfg=cfg, kept=TARGET_ONLY)
        model_card.save_training_facts(out / DRAFT_DIR, cfg=built, train_minutes=minutes - target_minutes,
                                       device=device)

    report = evaluate.evaluate_folders(out / TARGET_DIR, out / DRAFT_DIR, held_out_files, cfg=cfg, device=device)
    model_card.write_model_cards(out, report=report, target_dir=TARGET_DIR, draft_dir=DRAFT_DIR, out_arg=cfg.out)
    (out / TARGET_DIR / "eval_results.json").write_text(json.dumps(report, indent=2) + "\n")
    print(evaluate.format_report(report))
    if not args.eval_only:
        print(next_step.app_line(target=next_step.as_typed(out / TARGET_DIR), draft=out / DRAFT_DIR, chat=False))

