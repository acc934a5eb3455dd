"""`python -m specui.train`'s command line: the stages in order, and the held-out evaluation."""

import argparse
import json
import time
from dataclasses import fields
from pathlib import Path

import torch

from specui import corpus
from specui.train import distill, evaluate, model_card
from specui.train.common import encode_stream, make_model, save_pair_member, train_target, train_tokenizer
from specui.train.config import DEFAULT_OUT, DRAFT_DIR, TARGET_DIR, TrainConfig


def parse_args(argv=None) -> tuple[TrainConfig, argparse.Namespace]:
    parser = argparse.ArgumentParser(
        prog="python -m specui.train",
        description="Train the bundled model pair from the Python standard library. Writes into --out "
                    f"(default {DEFAULT_OUT}); the shipped pair in assets/ changes only with --out assets.")
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
    args = parser.parse_args(argv)
    cfg = TrainConfig(**{f.name: getattr(args, f.name) for f in fields(TrainConfig)})
    needed = [TARGET_DIR, DRAFT_DIR] if args.eval_only else [TARGET_DIR] if args.stage == "draft" else []
    missing = [name for name in needed if not (Path(cfg.out) / name).is_dir()]
    if missing:
        what = "--eval-only" if args.eval_only else "--stage draft"
        parser.error(f"{what} reads an existing pair, but {Path(cfg.out) / missing[0]} is not a folder "
                     f"(train one first, or pass --out assets for the shipped pair)")
    return cfg, args


def main(argv=None) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    cfg, args = parse_args(argv)
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
        save_pair_member(draft, tokenizer, out / DRAFT_DIR)
        minutes = (time.perf_counter() - started) / 60
        print(f"trained in {minutes:.1f} min on {device}")
        if args.stage == "all":
            model_card.save_training_facts(out / TARGET_DIR, cfg=cfg, train_minutes=target_minutes, device=device)
        else:
            model_card.refresh_training_command(out / TARGET_DIR, cfg=cfg)
        model_card.save_training_facts(out / DRAFT_DIR, cfg=cfg, train_minutes=minutes - target_minutes, device=device)

    report = evaluate.evaluate_folders(out / TARGET_DIR, out / DRAFT_DIR, held_out_files, cfg=cfg, device=device)
    model_card.write_model_cards(out, report=report, target_dir=TARGET_DIR, draft_dir=DRAFT_DIR, out_arg=cfg.out)
    (out / TARGET_DIR / "eval_results.json").write_text(json.dumps(report, indent=2) + "\n")
    print(evaluate.format_report(report))

