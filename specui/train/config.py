"""The training configuration of the bundled pair: one frozen dataclass, every field a command-line flag.

Each field's `help` (its metadata) is the flag's help text; `python -m specui.train --help` adds the default.
"""

from dataclasses import dataclass, field

EOS = "<|endoftext|>"
TARGET_DIR = "specui-target"
DRAFT_DIR = "specui-draft"
DEFAULT_OUT = "runs/train"  # never the shipped pair: `--out assets` rebuilds that, explicitly


def _opt(default, help: str):
    return field(default=default, metadata={"help": help})


@dataclass(frozen=True)
class TrainConfig:
    out: str = _opt(DEFAULT_OUT, f"folder that receives {TARGET_DIR}/ and {DRAFT_DIR}/ (the shipped pair is "
                                 "assets: pass --out assets --overwrite to rebuild it)")
    seed: int = _opt(1234, "seed of the initial weights, the batches and the distillation data")
    vocab_size: int = _opt(8192, "tokens of the byte-level BPE tokenizer")
    # target: deep and narrow, so that on a CPU its per-token cost dwarfs the draft's
    target_layers: int = _opt(32, "decoder layers of the target (deep and narrow: a CPU forward costs many draft forwards)")
    target_width: int = _opt(96, "hidden size of the target")
    target_heads: int = _opt(3, "attention heads of the target")
    target_ffn: int = _opt(256, "MLP width of the target")
    # draft: two layers (enough for an induction head, to copy from context) of the same width (its embeddings are initialised from the target's)
    draft_layers: int = _opt(2, "decoder layers of the draft (two: enough for an induction head)")
    draft_width: int = _opt(96, "hidden size of the draft (its embeddings start as the target's)")
    draft_heads: int = _opt(3, "attention heads of the draft")
    draft_ffn: int = _opt(512, "MLP width of the draft")
    max_positions: int = _opt(1024, "context length of both models")
    # optimisation
    seq_len: int = _opt(512, "training window in tokens for the last --long-fraction of the steps (half of it, "
                             "with twice the batch, before)")
    long_fraction: float = _opt(0.3, "fraction of the steps trained at the full --seq-len")
    batch_size: int = _opt(8, "windows per step at --seq-len (tokens per step stay the same throughout)")
    target_steps: int = _opt(500, "optimiser steps of the target")
    draft_steps: int = _opt(200, "optimiser steps of the draft's distillation")
    lr: float = _opt(2e-3, "peak learning rate of the target")
    draft_lr: float = _opt(3e-3, "peak learning rate of the draft")
    warmup_steps: int = _opt(50, "linear warmup steps before the cosine decay")
    bf16: bool = _opt(False, "autocast matmuls to bfloat16 (float32 weights and optimiser); ~1.25x on "
                             "AVX512-BF16 CPUs")
    weight_decay: float = _opt(0.1, "AdamW weight decay")
    grad_clip: float = _opt(1.0, "gradient norm clip")
    distill_ce_weight: float = _opt(0.1, "weight of plain cross-entropy next to the KL to the target")
    distill_sequences: int = _opt(64, "target-written sequences (greedy continuations) in the distillation mix")
    checkpoint_dir: str = _opt("", "when set, the target is saved there every --checkpoint-every steps")
    checkpoint_every: int = _opt(100, "steps between target checkpoints (with --checkpoint-dir)")
    # evaluation
    eval_bytes: int = _opt(400_000, "held-out bytes scored for bits per byte")
    alpha_prompts: int = _opt(24, "held-out prompts whose greedy target continuations measure alpha")
    alpha_new_tokens: int = _opt(128, "new tokens per alpha prompt")
    speedup_prompts: int = _opt(6, "held-out prompts timed for the speedup (0: skip the timing)")
    threads: int = _opt(2, "CPU threads for torch (1 times the speedup as the app runs it)")
