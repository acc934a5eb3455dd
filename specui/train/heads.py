"""`python -m specui.train heads`: train EAGLE, Medusa and early-exit heads for a preset's target.

The target is frozen. Its states are cached once over the data (specui.train.head_data), then every
head named by --head learns from the same batches: the cross-entropy from the target's distributions
to the head's (soft targets, over the head's reduced vocabulary; with --hard-labels, to the target's greedy
tokens). Progress is logged; a checkpoint (heads, optimiser, step, the batches' generator) is written whole every
--checkpoint-every steps, at the end and on Ctrl-C or SIGTERM (specui.train.checkpoint), and --resume goes on from it
(the target's states are kept in --out/states.pt, so a resumed run skips them). Each head is saved as a head folder
(specui.heads.common) under --out/<head>, which a preset's `heads:` names. Runs on a CUDA GPU when there is one.

    python -m specui.train heads --preset bundled --head eagle,medusa,early_exit --out runs/heads-bundled
    python -m specui.train heads --preset smollm2-chat --answers DIR --out runs/heads-chat --minutes 30
    python -m specui.train heads --preset smollm2-chat --answers DIR1,DIR2:3 --init assets/smollm2-heads ...  # warm start
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch

from specui.drafters.registry import HEADS
from specui.heads import common
from specui.command_line import refuse_empty, refuse_ignored
from specui.train import checkpoint as files
from specui.train import head_data, next_step
from specui.train.head_files import held_out_loss, init_heads, log, resume, save_heads
from specui.train.common import (at_least, check_budgets, check_folders, cpu_bf16_rule, device_name, tf32_products,
                                 warmup_cosine)


def parse_args(argv=None, *, create: bool = False) -> argparse.Namespace:
    """The options, each number in its range and --out writable (with `create`, as a run starts: made now)."""
    ap = argparse.ArgumentParser(prog="python -m specui.train heads", description=__doc__.split("\n")[0])
    ap.add_argument("--preset", default=None, help="the preset whose target the heads serve (default: models.yaml's default)")
    ap.add_argument("--config", default=None, help="a models.yaml (default: specui's own, beside its app.py)")
    ap.add_argument("--head", default=",".join(HEADS), help="comma-separated: " + ", ".join(HEADS) + " (default: all)")
    ap.add_argument("--out", default="runs/heads", help="folder for the heads and the checkpoint (default: %(default)s)")
    ap.add_argument("--answers", help="the target's chat answers (python -m specui.train.chat --write-answers DIR): "
                                      "a folder, or several separated by commas, each optionally FOLDER:WEIGHT (drawn "
                                      "WEIGHT times as often); without it: windows of the stdlib corpus")
    ap.add_argument("--init", help="warm start: a folder of saved heads (one subfolder per head, as --out writes "
                                   "them); their settings and draft vocabulary are kept")
    ap.add_argument("--windows", type=int, default=None,
                    help="windows of the offline corpus (stdlib code, and pydoc's topics for a chat target), added to "
                         "--answers (default: 4000 without --answers, none with it)")
    ap.add_argument("--continuations", type=int, default=0,
                    help="the target's own greedy continuations of this many windows of the stdlib corpus (the last "
                         "--continue-tokens of each sequence; written once into OUT/continuations.pt), added to the "
                         "rest (default: %(default)s)")
    ap.add_argument("--continue-tokens", type=int, default=128,
                    help="tokens the target writes per continuation (default: %(default)s, as the benchmark decodes)")
    ap.add_argument("--states", help="file for the target's states (default: OUT/states.pt; none: kept in memory "
                                     "only, e.g. on a borrowed GPU); runs that share data can share it")
    ap.add_argument("--hard-labels", action="store_true",
                    help="learn the target's greedy tokens, as greedy acceptance asks: each greedy answer's (and "
                         "continuation's) next token over the heads' ids, by cross-entropy; sampled answers left "
                         "out (default: the target's distributions, from its cached final state)")
    ap.add_argument("--bf16", action="store_true",
                    help="on a CPU: the target's states from a bfloat16 copy of it and the heads' products in "
                         "bfloat16 (weights and optimiser stay float32): on a CPU with AMX the states about 3x faster, "
                         "the EAGLE head's steps about 1.8x, the states "
                         "within about 1%% of float32's")
    ap.add_argument("--max-sequences", type=int, default=0,
                    help="train on at most this many sequences, drawn at random (0: all): their target states are "
                         "cached in memory, 3.4 KB a token for EAGLE's (default: %(default)s)")
    ap.add_argument("--state-batch", type=int, default=8,
                    help="sequences per target pass while caching its states (default: %(default)s)")
    ap.add_argument("--extra-layers", default="", help="cache these hidden_states indices too (comma-separated), "
                                                       "so later runs for other heads reuse the file")
    ap.add_argument("--seq", type=int, default=320, help="tokens per sequence (default: %(default)s)")
    ap.add_argument("--vocab", type=int, default=None,
                    help="the heads' draft vocabulary: the most frequent ids of the data (default: 8192; with --init, "
                         "the saved heads' ids unless given: their output rows are the target's own, so a new "
                         "vocabulary loses nothing trained)")
    ap.add_argument("--exit-layer", type=int, default=0,
                    help="early exit: layers the draft runs (0: a quarter of the target's; default: %(default)s)")
    ap.add_argument("--medusa-heads", type=int, default=4, help="Medusa: positions ahead (default: %(default)s)")
    ap.add_argument("--eagle-steps", type=int, default=None,
                    help="EAGLE: training-time-test steps (default: 3; with --init, the saved head's unless given)")
    ap.add_argument("--steps", type=int, default=100000, help="optimiser steps at most (default: %(default)s)")
    ap.add_argument("--minutes", type=float, default=20, help="stop after this long (default: %(default)s)")
    ap.add_argument("--batch", type=int, default=8, help="sequences per optimiser step (default: %(default)s)")
    ap.add_argument("--lr", type=float, default=1e-3, help="peak learning rate (default: %(default)s)")
    ap.add_argument("--warmup", type=int, default=50, help="steps of linear warmup (0: none; default: %(default)s)")
    ap.add_argument("--held-out", type=float, default=0.05,
                    help="share of sequences held out for the loss report, whole prompts at a time "
                         "(default: %(default)s)")
    ap.add_argument("--checkpoint-every", type=int, default=200,
                    help="steps between checkpoints (default: %(default)s)")
    ap.add_argument("--resume", action="store_true", help="go on from --out/checkpoint.pt")
    ap.add_argument("--overwrite", action="store_true",
                    help="start afresh over the heads and checkpoint an earlier run left in --out (default: refused)")
    ap.add_argument("--threads", type=int, default=0,
                    help="torch CPU threads (0: torch's default; default: %(default)s)")
    ap.add_argument("--seed", type=int, default=1234,
                    help="seed of the windows, the batches and the held-out split (default: %(default)s)")
    args = ap.parse_args(argv)
    refuse_empty(ap, args, "preset", "config", "out")  # read as left out: the default preset trained
    args.heads = [h.strip() for h in args.head.split(",") if h.strip()]
    if not all(x.strip().isdigit() for x in args.extra_layers.split(",") if x.strip()):
        ap.error(f"--extra-layers {args.extra_layers}: expected hidden_states indices separated by commas, e.g. 2,4")
    args.extra_layers = [int(x) for x in args.extra_layers.split(",") if x.strip()]
    check_budgets(ap, args, windows=at_least(0), continuations=at_least(0), continue_tokens=at_least(1),
                  max_sequences=at_least(0), state_batch=at_least(1), exit_layer=at_least(0),
                  medusa_heads=at_least(1), eagle_steps=at_least(1))
    if args.continuations and args.continue_tokens >= args.seq:
        ap.error(f"--continue-tokens must be < --seq ({args.seq}): each continuation follows a window of the corpus, "
                 f"got {args.continue_tokens}")
    if args.windows is None:
        args.windows = 0 if args.answers or args.continuations else 4000
    if args.hard_labels and args.windows:
        ap.error("--hard-labels learns the target's greedy tokens, and --windows are text the target did not write: "
                 "give --answers or --continuations, with --windows 0")
    unknown = [h for h in args.heads if h not in HEADS]
    if unknown or not args.heads:
        ap.error(f"--head: unknown {', '.join(unknown) or '(none)'}; choose from {', '.join(HEADS)}")
    refuse_ignored(ap, args, argv, [
        *((dest, head not in args.heads, f"shapes the {head} head, which --head {args.head} leaves out")
          for dest, head in (("medusa_heads", "medusa"), ("eagle_steps", "eagle"), ("exit_layer", "early_exit"))),
        *((dest, bool(args.init), f"shapes a new head; --init {args.init}'s heads keep their own")
          for dest in ("medusa_heads", "exit_layer")),
        ("continue_tokens", not args.continuations, "is the length of --continuations, which is 0: give both"),
        ("overwrite", args.resume, "starts afresh over an earlier run, --resume goes on from it: say one"),
        cpu_bf16_rule()])
    check_inputs(ap, args)
    files.refuse_other_heads(ap, args)
    files.refuse_overwrite(ap, args, [*(Path(args.out) / h for h in args.heads), Path(args.out) / "checkpoint.pt"])
    check_folders(ap, args, ["out"], create=create)
    return args


def check_inputs(ap, args) -> None:
    """Refuse, in one line before the target loads, a --resume without a checkpoint, an --init folder without the
    heads asked for and an --answers folder that does not exist or holds no answers."""
    files.check_resume(ap, args)
    if args.init:
        missing = [n for n in args.heads if not common.is_head_folder(Path(args.init) / n)]
        if missing:
            ap.error(f"--init {args.init}: no saved head for {', '.join(missing)} "
                     f"(expected {Path(args.init) / missing[0] / common.META})")
    if args.answers:  # a folder that is not there, holds no answers, or has a weight that is no positive number
        from specui.train.chat_data import answers_problem

        if problem := answers_problem(args.answers):
            ap.error(f"--answers: {problem}")


def load_target(args):
    from specui.loading import load_pair
    from specui.presets import load_config

    preset = load_config(args.config).get(args.preset)
    pair = load_pair(preset)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    target = pair.target.to(device).eval()
    check_supported(preset, target)
    for p in target.parameters():
        p.requires_grad_(False)
    return preset, target, pair.tokenizer


def check_supported(preset, target) -> None:
    """Refuse, in one line, a target whose layout the heads cannot read: they read a Llama-style decoder's
    `model.layers` and `model.norm` and its config's widths (Llama, Mistral, Qwen2 and their kin)."""
    config, body = target.config, getattr(target, "model", None)
    needs = [n for n in ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size")
             if not hasattr(config, n)]
    if body is None or not hasattr(body, "layers") or not hasattr(body, "norm") or needs:
        raise SystemExit(f"--preset {preset.name}: its target ({getattr(config, 'model_type', '?')}, "
                         f"{type(target).__name__}) is not a decoder the heads can read: they need a Llama-style "
                         "model (model.layers, model.norm, hidden_size, intermediate_size), as Llama, Mistral and "
                         "Qwen2 are")


def sequences_for(args, target, tokenizer, *, chat: bool):
    """The target's chat answers (--answers), then --windows windows of the offline corpus and the target's
    --continuations of such windows (weight 1); returns the sequences and how often each is drawn, relative
    to the others."""
    sequences, weights = ([], []) if not args.answers else \
        head_data.answer_sequences(args.answers, max_len=args.seq, greedy_only=args.hard_labels)
    if args.windows or args.continuations:
        from specui import corpus
        from specui.train.chat_data import offline_texts
        from specui.train.common import encode_stream

        code = corpus.read_texts(corpus.split_sources()[0])  # training files only
    if args.windows:  # a chat target also reads pydoc's topics (English prose); the stdlib target was trained on code only
        stream = encode_stream(tokenizer, offline_texts() if chat else code)
        sequences += head_data.window_sequences(stream, length=args.seq, count=args.windows, seed=args.seed)
    if args.continuations:
        sequences += head_data.continuation_sequences(
            target, encode_stream(tokenizer, code), count=args.continuations, length=args.seq,
            new_tokens=args.continue_tokens, seed=args.seed, path=Path(args.out) / "continuations.pt", log=log)
    weights += [1.0] * (len(sequences) - len(weights))
    if args.max_sequences and len(sequences) > args.max_sequences:  # a seeded draw, so a resumed run keeps the same
        kept = sorted(torch.randperm(len(sequences), generator=torch.Generator().manual_seed(args.seed))
                      [:args.max_sequences].tolist())
        log(f"--max-sequences: {len(kept):,} of {len(sequences):,} sequences, drawn at random")
        sequences, weights = [sequences[i] for i in kept], [weights[i] for i in kept]
    return sequences, weights


def build_heads(args, target, token_ids) -> dict:
    """Fresh heads over `token_ids`, or with --init the saved ones (which bring their own ids)."""
    import importlib

    if args.init:
        return init_heads(args, target)

    layers = target.config.num_hidden_layers
    options = {"eagle": {"train_steps": args.eagle_steps or 3},
               "medusa": {"num_heads": args.medusa_heads},
               "early_exit": {"exit_layer": args.exit_layer or max(1, layers // 4)}}
    return {name: importlib.import_module(f"specui.heads.{name}").build(target, token_ids=token_ids, **options[name])
            for name in args.heads}




def lr_at(args, step: int, progress: float) -> float:
    """`common.warmup_cosine` at --lr and --warmup."""
    return warmup_cosine(args.lr, args.warmup, step, progress)


def main(argv=None) -> None:
    with tf32_products():  # the target's states and the heads' products on a GPU's tensor cores
        return _main(argv)


def start_run(args):
    """What a training command does first: torch's threads and seed, the --out folder, the preset's frozen target.
    Returns (out, preset, target, tokenizer)."""
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    return (out, *load_target(args))


def _main(argv=None) -> None:
    args = parse_args(argv, create=True)
    out, preset, target, tokenizer = start_run(args)
    device = target.get_input_embeddings().weight.device
    sequences, weights = sequences_for(args, target, tokenizer, chat=preset.chat_template)
    vocab = target.get_output_embeddings().weight.shape[0]
    special = [i for i in (tokenizer.all_special_ids or []) if i is not None and i < vocab]
    answers = [s[first:] for s, first in sequences if first > 0]  # what the target wrote picks the vocabulary, if any
    streams = torch.cat(answers or [s for s, _ in sequences])
    token_ids = None
    if not args.init or args.vocab:
        token_ids = common.frequent_ids([streams], size=args.vocab or 8192, vocab_size=vocab, always=special)
    heads = build_heads(args, target, token_ids)
    kept = token_ids is None
    if args.init and not kept:  # a warm start on a new vocabulary: the same trained weights, other output rows
        for h in heads.values():
            h.output.token_ids = token_ids.to(h.output.token_ids.device)
            h.output.bind(target)
    token_ids = next(iter(heads.values())).output.token_ids.cpu()
    covered = torch.isin(streams, token_ids).float().mean()
    log(f"draft vocabulary: {len(token_ids)} ids cover {covered:.4f} of the training tokens" + (" the target wrote" if answers else "")
        + (f" (kept from {args.init})" if kept else ""))
    if kept:  # saved ids picked from other data can miss much of this data (0.87 against 0.98 for a fresh pick, 2026-11-28)
        fresh = common.frequent_ids([streams], size=len(token_ids), vocab_size=vocab, always=special)
        log(f"  the {len(token_ids)} ids this data uses most would cover {torch.isin(streams, fresh).float().mean():.4f} "
            f"(--vocab {len(token_ids)} picks them; the heads' trained weights carry over)")
    layers = tuple(sorted({i for h in heads.values() for i in h.feature_layers}))
    log(f"{preset.name}: {len(sequences)} sequences, {sum(len(s) for s, _ in sequences):,} tokens; heads "
        f"{', '.join(heads)}; target states at layers {layers}; draft vocabulary {len(token_ids)}")
    layers = tuple(sorted(set(layers) | set(args.extra_layers)))
    states = None if args.states == "none" else args.states or out / "states.pt"
    cpu_bf16 = args.bf16 and device.type == "cpu"  # --bf16 is for a CPU's AMX (refused where CUDA is)
    cache = head_data.FeatureCache(target, sequences, layers=layers, log=log, path=states, batch=args.state_batch,
                                   dtype=torch.bfloat16 if cpu_bf16 else None)
    gen = torch.Generator().manual_seed(args.seed)
    held, train = head_data.held_out_split(sequences, args.held_out, args.seed)
    draw_weights = torch.tensor([weights[i] for i in train], dtype=torch.float)
    rows = target.get_output_embeddings().weight.detach()[token_ids.to(device)]

    params = [p for h in heads.values() for p in h.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=args.lr, weight_decay=0.0)
    step, spent = 0, 0.0
    checkpoint = out / "checkpoint.pt"
    if args.resume:
        step, spent = resume(checkpoint, heads, opt, gen, device=device)
        log(f"resumed from {checkpoint} at step {step} ({spent / 60:.1f} min in)")

    def save_checkpoint():  # whole or not at all: a kill mid-write leaves the previous one
        files.save({"heads": {n: h.state_dict() for n, h in heads.items()}, "optimizer": opt.state_dict(),
                    "step": step, "seconds": spent, "generator": gen.get_state()}, checkpoint)

    started = time.time() - spent
    for h in heads.values():
        h.train()
    losses = {n: 0.0 for n in heads}
    with files.stop_requests() as stop:  # Ctrl-C or SIGTERM: the step in hand ends, then the checkpoint
        while step < args.steps and (time.time() - started) < args.minutes * 60 and not stop.asked:
            progress = max(step / args.steps, (time.time() - started) / (args.minutes * 60))
            for group in opt.param_groups:
                group["lr"] = lr_at(args, step, progress)
            picks = torch.multinomial(draw_weights, args.batch, replacement=True, generator=gen).tolist()
            batch = cache.batch([train[i] for i in picks], token_ids=token_ids, rows=rows, device=device,
                                hard=args.hard_labels)
            total = 0.0
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=cpu_bf16):
                for name, h in heads.items():
                    loss = h.training_loss(batch)
                    losses[name] += float(loss.detach())
                    total = total + loss
            opt.zero_grad(set_to_none=True)
            total.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            step += 1
            spent = time.time() - started
            if step % 25 == 0:
                log(f"step {step}: " + ", ".join(f"{n} {v / 25:.3f}" for n, v in losses.items())
                    + f" (lr {opt.param_groups[0]['lr']:.2e}, {spent / 60:.1f} min)")
                losses = {n: 0.0 for n in heads}
            if step % args.checkpoint_every == 0:
                save_checkpoint()
    save_checkpoint()
    if stop.asked:
        raise files.stopped(stop, step, checkpoint)
    held_loss = held_out_loss(heads, cache, held, token_ids=token_ids, rows=rows, device=device, batch=args.batch,
                              hard=args.hard_labels)
    facts = {"preset": preset.name, "target": preset.target if not Path(preset.target).is_absolute()
             else Path(preset.target).name, "steps": step, "minutes": round(spent / 60, 1), "sequences": len(train),
             "tokens": cache.tokens, "device": device_name(device), **({"init": args.init} if args.init else {}),
             **({"labels": "the target's greedy tokens (its greedy answers), hard labels"} if args.hard_labels else {}),
             "command": "python -m specui.train heads " + " ".join(argv or [])}
    save_heads(heads, out, facts=facts, held_loss=held_loss)
    next_step.say_heads({name: out / name for name in heads}, preset=args.preset, config=args.config)
