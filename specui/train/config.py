"""The training configuration of the bundled pair: one frozen dataclass, every field a command-line flag."""

from dataclasses import dataclass

EOS = "<|endoftext|>"
TARGET_DIR = "specui-target"
DRAFT_DIR = "specui-draft"


@dataclass(frozen=True)
class TrainConfig:
    out: str = "assets"
    seed: int = 1234
    vocab_size: int = 8192
    # target: deep and narrow, so that on a CPU its per-token cost dwarfs the draft's
    target_layers: int = 32
    target_width: int = 96
    target_heads: int = 3
    target_ffn: int = 256
    # draft: two layers (enough for an induction head, to copy from context) of the same width (its embeddings are initialised from the target's)
    draft_layers: int = 2
    draft_width: int = 96
    draft_heads: int = 3
    draft_ffn: int = 512
    max_positions: int = 1024
    # optimisation
    seq_len: int = 512  # the last `long_fraction` of the steps; earlier steps use half of it, twice the batch
    long_fraction: float = 0.3
    batch_size: int = 8  # at seq_len; tokens per step are the same throughout
    target_steps: int = 500
    draft_steps: int = 200
    lr: float = 2e-3
    draft_lr: float = 3e-3
    warmup_steps: int = 50
    bf16: bool = False  # --bf16: autocast matmuls to bfloat16 (float32 weights and optimiser); ~1.25x on AVX512-BF16 CPUs
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    distill_ce_weight: float = 0.1  # weight of plain cross-entropy next to the KL to the target
    distill_sequences: int = 64  # target-written sequences (greedy continuations) in the distillation mix
    checkpoint_dir: str = ""  # when set, the target is saved there every `checkpoint_every` steps
    checkpoint_every: int = 100
    # evaluation
    eval_bytes: int = 400_000  # held-out bytes scored for bits per byte
    alpha_prompts: int = 24  # held-out prompts whose greedy target continuations measure alpha
    alpha_new_tokens: int = 128
    speedup_prompts: int = 6  # held-out prompts timed for the speedup (0: skip the timing)
    threads: int = 2
