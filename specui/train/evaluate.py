"""Held-out figures of the bundled pair, and the model cards that report them.

Measured on the standard library's test folders, which training never sees (specui.corpus):
- bits per byte of the target: total NLL in nats over held-out tokens / (ln 2 x their UTF-8 bytes);
- greedy acceptance alpha: the fraction of the target's greedy tokens (continuing held-out prompts)
  that the draft's argmax predicts from the same prefix;
- speedup of greedy speculative decoding over plain decoding with `SpeculativeEngine`, 128 new
  tokens, best K, timed by the benchmark's harness (specui.bench.run.k_speedups).
"""

import math
from pathlib import Path

import torch

from specui import corpus
from specui.corpus import held_out_prompts
from specui.bench.run import ModelPair, k_speedups
from specui.text import fmt
from specui.train.common import encode_stream, greedy_continuation

EVAL_FILES = 40  # held-out files, evenly spaced over the sorted list, scored for bits per byte
SPEEDUP_TOKENS = 128  # new tokens per timed prompt


def eval_texts(held_out: list[Path], *, total_bytes: int) -> list[str]:
    """A deterministic held-out sample: EVAL_FILES evenly spaced files, each cut to whole lines."""
    texts = [t for t in corpus.read_texts(held_out) if t.strip()]
    picked = [texts[i * len(texts) // EVAL_FILES] for i in range(EVAL_FILES)]
    budget = total_bytes // EVAL_FILES
    cut = []
    for text in picked:
        lines, size = [], 0
        for line in text.splitlines(keepends=True):
            size += len(line.encode())
            if size > budget:
                break
            lines.append(line)
        cut.append("".join(lines))
    return [t for t in cut if t]


@torch.inference_mode()
def bits_per_byte(model, tokenizer, texts: list[str], *, seq_len: int, device: str) -> float:
    """Total NLL of every token of `texts` (each after an EOS) over ln 2 x their UTF-8 bytes."""
    stream = encode_stream(tokenizer, texts).to(device)  # EOS text EOS text ...
    eos = tokenizer.eos_token_id
    nll = 0.0
    for start in range(0, len(stream) - 1, seq_len):
        chunk = stream[start : start + seq_len + 1][None]  # windows overlap by one token
        logits = model(input_ids=chunk[:, :-1]).logits.float()
        labels = chunk[:, 1:]
        losses = torch.nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten(), reduction="none")
        nll += losses[labels.flatten() != eos].sum().item()  # separators carry no bytes
    n_bytes = sum(len(t.encode("utf-8")) for t in texts)
    return nll / (math.log(2) * n_bytes)


@torch.inference_mode()
def greedy_alpha(target, draft, prompts: list[list[int]], *, new_tokens: int, device: str) -> float:
    """Fraction of the target's greedy tokens that the draft's argmax predicts from the same prefix."""
    agree = total = 0
    for prompt in prompts:
        continuation = greedy_continuation(target, prompt, new_tokens=new_tokens)
        sequence = torch.tensor([prompt + continuation], device=device)
        draft_logits = draft(input_ids=sequence[:, :-1]).logits[0, len(prompt) - 1 :]  # predicts continuation
        agree += (draft_logits.argmax(-1).cpu() == torch.tensor(continuation)).sum().item()
        total += len(continuation)
    return agree / total


def measure_speedup(target, draft, prompts: list[list[int]], *, ks=range(1, 9), new_tokens: int = SPEEDUP_TOKENS,
                    tokenizer=None) -> dict:
    """Tokens/s of greedy plain and speculative decoding (K in `ks`), timed by the benchmark's harness
    (`specui.bench.run.k_speedups`): the figure the model card reports.

    Returns {"plain_tps": ..., "tps": {K: ...}, "speedup": {K: ...}, "best_k": K, "best_speedup": x, ...}.
    """
    return k_speedups(ModelPair(target, draft, tokenizer), prompts, ks=ks, new_tokens=new_tokens)


def evaluate_folders(target_dir: Path, draft_dir: Path, held_out: list[Path], *, cfg, device: str) -> dict:
    """Load the saved pair as any user would (float32 here) and measure the held-out figures."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(target_dir)
    target = AutoModelForCausalLM.from_pretrained(target_dir, dtype=torch.float32).to(device).eval()
    draft = AutoModelForCausalLM.from_pretrained(draft_dir, dtype=torch.float32).to(device).eval()
    texts = eval_texts(held_out, total_bytes=cfg.eval_bytes)
    report = {
        "eval_files": len(texts),
        "eval_bytes": sum(len(t.encode()) for t in texts),
        "target_bpb": bits_per_byte(target, tokenizer, texts, seq_len=cfg.seq_len, device=device),
        "draft_bpb": bits_per_byte(draft, tokenizer, texts, seq_len=cfg.seq_len, device=device),
        "target_params": sum(p.numel() for p in target.parameters()),
        "draft_params": sum(p.numel() for p in draft.parameters()),
    }
    prompts = held_out_prompts(tokenizer, held_out, count=cfg.alpha_prompts)
    report["alpha_prompts"] = len(prompts)
    report["alpha_new_tokens"] = cfg.alpha_new_tokens
    report["alpha"] = greedy_alpha(target, draft, prompts, new_tokens=cfg.alpha_new_tokens, device=device)
    if cfg.speedup_prompts > 0:
        report["speedup"] = measure_speedup(target, draft, prompts[: cfg.speedup_prompts], tokenizer=tokenizer)
    return report


def format_report(report: dict) -> str:
    lines = [
        f"held-out: {report['eval_files']} files, {fmt(report['eval_bytes'], ',')} bytes",
        f"target bits/byte {fmt(report['target_bpb'], '.3f')}   draft bits/byte {fmt(report['draft_bpb'], '.3f')}",
        f"greedy alpha (draft argmax == target greedy, {report['alpha_prompts']} prompts): "
        f"{fmt(report['alpha'], '.3f')}",
    ]
    s = report.get("speedup")
    if s:
        per_k = "  ".join(f"K={k}: {fmt(v, '.2fx')}" for k, v in s["speedup"].items())
        lines.append(f"plain {fmt(s['plain_tps'], '.1f')} tok/s; speculative {per_k}")
        lines.append(f"best K={s['best_k']}: {fmt(s['best_speedup'], '.2fx')}")
    return "\n".join(lines)
