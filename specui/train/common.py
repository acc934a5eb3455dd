"""Training utilities shared by the stages: the tokenizer, the token stream (kept on disk: `streams`), model
shapes, batches, the learning-rate schedule, the optimiser, the target's training loop and saving a model folder.

References: nanoGPT (karpathy/nanoGPT, train.py) for the loop.
"""

import copy
import json
import math
import os
from contextlib import contextmanager
from pathlib import Path

import torch
from tqdm import tqdm

from specui.engine import SpeculativeEngine
from specui.settings import DecodeSettings
from specui.train.config import EOS, TARGET_DIR, TrainConfig
from specui.train.streams import kept_stream


def at_least(low, why: str = "") -> tuple:
    """A range rule for check_ranges: value >= low (`why`, when given, says why in the message)."""
    return (lambda v: v >= low), f">= {low}" + (f" ({why})" if why else "")


def above(low, why: str = "") -> tuple:
    """A range rule for check_ranges: value > low."""
    return (lambda v: v > low), f"> {low}" + (f" ({why})" if why else "")


def within(low, high, *, high_open: bool = False) -> tuple:
    """A range rule for check_ranges: low <= value <= high (< high with high_open)."""
    return (lambda v: low <= v < high if high_open else low <= v <= high), \
        f"in [{low}, {high}{')' if high_open else ']'}"


def check_ranges(ap, args, ranges: dict) -> None:
    """Refuse, in one line from argparse (exit status 2), the first option outside its range: `ranges` maps a
    parser's dest (held_out for --held-out) to a rule (at_least, above, within); the names it lacks, and options
    left at None (a default chosen later), are skipped. A NaN fails every rule."""
    for name, (ok, rule) in ranges.items():
        value = getattr(args, name, None)
        if value is not None and not ok(value):
            ap.error(f"--{name.replace('_', '-')} must be {rule}, got {value}")


# the budgets most training commands share; 0 threads is torch's own choice, 0 warmup steps none
BUDGETS = {"minutes": above(0), "steps": at_least(1), "batch": at_least(1), "lr": above(0),
           "held_out": within(0, 1, high_open=True), "threads": at_least(0), "warmup": at_least(0),
           "seq": at_least(2, "a token and the next"), "vocab": at_least(1), "eval_every": at_least(1),
           "checkpoint_every": at_least(1)}


def check_budgets(ap, args, **ranges) -> None:
    """Refuse, in one line, a training budget that would silently do nothing (or run for ever, or crash later):
    --minutes, --steps, --batch and --lr above 0, --held-out in [0, 1), --threads 0 (torch's choice) or more, and
    the rest of BUDGETS; `ranges` adds a command's own rules or replaces shared ones (a --minutes whose 0 means
    "no limit"). The names a parser lacks are skipped."""
    check_ranges(ap, args, {**BUDGETS, **ranges})


def folder_problem(path) -> str | None:
    """Why a run could not create or write its output folder `path`, found without writing anything (a file in
    the way, a folder without write permission), or None."""
    folder = Path(path).expanduser().absolute()
    if folder.exists() and not folder.is_dir():
        return "is a file, not a folder"
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        return f"{existing} is a file, not a folder"
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"{existing} cannot be written (permissions)"
    return None


def check_folders(ap, args, names, *, create: bool = False) -> None:
    """Refuse, in one line, an output folder option (dest names in `names`; unset ones skipped) that cannot be
    written; with `create` (a command about to run, not a test of its parser), make each folder now, so that a
    place only the attempt reveals (a read-only mount, /proc) is refused before minutes of work, not after."""
    for name in names:
        path = getattr(args, name, None)
        if not path:
            continue
        flag = f"--{name.replace('_', '-')}"
        if problem := folder_problem(path):
            ap.error(f"{flag} {path}: {problem}")
        if create:
            try:
                Path(path).expanduser().mkdir(parents=True, exist_ok=True)
            except OSError as e:
                ap.error(f"{flag} {path}: cannot create the folder ({e.strerror or e})")


def cpu_bf16_rule() -> tuple:
    """`command_line.refuse_ignored`'s rule for a --bf16 that only a CPU's run takes (a bfloat16 copy of the
    target, for its AMX): a run on a CUDA GPU keeps float32 with TF32 products and would ignore it."""
    return ("bf16", torch.cuda.is_available(), "is for a CPU (a bfloat16 copy of the target, for its AMX), and this "
                                               "run goes to the CUDA GPU, which trains in float32 on its TF32 tensor "
                                               "cores: drop --bf16")


def autocast(device: str, enabled: bool):
    """Mixed precision for training forwards: bfloat16 matmuls, float32 master weights."""
    return torch.autocast("cuda" if device.startswith("cuda") else "cpu", dtype=torch.bfloat16, enabled=enabled)


def device_name(device) -> str:
    """What a model card records as the device: a CUDA card's name ("NVIDIA H100 80GB HBM3"), else "cpu"."""
    device = torch.device(device)
    return torch.cuda.get_device_name(device) if device.type == "cuda" else device.type


@contextmanager
def tf32_products():
    """float32 matrix products (and convolutions) on a CUDA GPU's TF32 tensor cores while training: several
    times the rate of plain float32 on an H100, for inputs rounded to 10 mantissa bits (a CPU ignores the
    switch). Put back after, so nothing else in the process (a test, a benchmark) runs with them."""
    before = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before


# ---------------------------------------------------------------- tokenizer


def train_tokenizer(texts: list[str], *, vocab_size: int, max_positions: int):
    """A byte-level BPE tokenizer (GPT-2 style, no prefix space) wrapped for transformers."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[EOS],  # id 0: document separator, bos and eos
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),  # every byte is encodable
        show_progress=False,
    )
    bpe.train_from_iterator(texts, trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        bos_token=EOS,
        eos_token=EOS,
        unk_token=EOS,
        pad_token=EOS,
        clean_up_tokenization_spaces=False,  # decode must return the code byte for byte
        model_max_length=max_positions,
    )


def encode_stream(tokenizer, texts: list[str]) -> torch.Tensor:
    """All texts as one token stream, each document preceded by EOS: (n_tokens,) int64; kept on disk
    (`kept_stream`), so the next run with the same tokenizer and texts reads it instead of tokenizing again."""
    return kept_stream("encode_stream", tokenizer, texts, lambda serialized: _encoded(tokenizer, texts, serialized))


def _encoded(tokenizer, texts: list[str], serialized: str | None) -> torch.Tensor:
    """`encode_stream`'s ids, tokenized by a copy of the tokenizer's backend (`serialized`: its JSON, as
    `streams.serialized` gives it) with every text whole, as `tokenizer(texts)` gives them: a call such as
    `tokenizer(..., padding=True, truncation=True)` or `split_special_tokens=True` leaves those settings on the
    backend itself (pads and cut documents in the stream), and the last is no part of its serialization
    (`stream_key`)."""
    from tokenizers import Tokenizer

    eos = tokenizer.eos_token_id
    if serialized is None:  # a slow tokenizer, or a backend with a Python part: the tokenizer's own call, kept nowhere
        batch = tokenizer(texts, add_special_tokens=False, padding=False, truncation=False)["input_ids"]
    else:
        backend = Tokenizer.from_str(serialized)  # special tokens matched, as by default
        backend.no_padding()
        backend.no_truncation()
        batch = [encoding.ids for encoding in backend.encode_batch(texts, add_special_tokens=False)]
    return torch.tensor([t for ids in batch for t in (eos, *ids)], dtype=torch.long)


# ---------------------------------------------------------------- models


def make_model(cfg: TrainConfig, *, kind: str, tokenizer):
    """A freshly initialised LlamaForCausalLM of the `target` or `draft` shape (float32)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    shape = {
        "target": (cfg.target_layers, cfg.target_width, cfg.target_heads, cfg.target_ffn),
        "draft": (cfg.draft_layers, cfg.draft_width, cfg.draft_heads, cfg.draft_ffn),
    }[kind]
    layers, width, heads, ffn = shape
    eos = tokenizer.eos_token_id
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=width,
        intermediate_size=ffn,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        max_position_embeddings=cfg.max_positions,
        rope_theta=10000.0,
        tie_word_embeddings=True,  # saves vocab x width parameters in the shipped files
        bos_token_id=eos,
        eos_token_id=eos,
        pad_token_id=eos,
        torch_dtype="float16",
    )
    torch.manual_seed(cfg.seed + (0 if kind == "target" else 1))
    model = LlamaForCausalLM(config)
    model.generation_config.bos_token_id = eos
    model.generation_config.eos_token_id = eos
    model.generation_config.pad_token_id = eos
    return model


def random_windows(stream: torch.Tensor, *, batch_size: int, seq_len: int, generator) -> torch.Tensor:
    """`batch_size` random contiguous windows of `seq_len + 1` tokens: (B, T+1)."""
    starts = torch.randint(0, len(stream) - seq_len - 1, (batch_size,), generator=generator)
    return torch.stack([stream[s : s + seq_len + 1] for s in starts.tolist()])


def window_shape(step: int, *, steps: int, cfg: TrainConfig) -> tuple[int, int]:
    """(batch size, sequence length) at `step`: short windows first, full-length ones at the end."""
    if step < steps * (1 - cfg.long_fraction):
        return cfg.batch_size * 2, cfg.seq_len // 2
    return cfg.batch_size, cfg.seq_len


def warmup_cosine(lr: float, warmup: int, step: int, progress: float) -> float:
    """Linear warmup over `warmup` steps (0: none), then cosine decay to a tenth of `lr` as `progress` (time or
    steps) goes 0 -> 1: the heads' and the chat draft's schedule."""
    warm = min(1.0, (step + 1) / max(1, warmup))
    return lr * warm * (0.1 + 0.45 * (1 + math.cos(math.pi * min(progress, 1.0))))


def lr_at(step: int, *, steps: int, lr: float, warmup: int) -> float:
    """Linear warmup, then cosine decay to a tenth of the peak over the steps after the warmup (`warmup_cosine`)."""
    return warmup_cosine(lr, warmup, step, max(0.0, (step - warmup) / max(1, steps - warmup)))


def make_optimizer(model, *, lr: float, weight_decay: float):
    """AdamW; no weight decay on norms (1-d parameters)."""
    params = [p for p in model.parameters() if p.requires_grad]
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95), eps=1e-8)


def train_target(model, stream: torch.Tensor, *, cfg: TrainConfig, device: str, tokenizer=None):
    """Next-token cross-entropy on random windows of the training stream."""
    model.to(device).train()
    optimizer = make_optimizer(model, lr=cfg.lr, weight_decay=cfg.weight_decay)
    generator = torch.Generator().manual_seed(cfg.seed)
    bar = tqdm(range(cfg.target_steps), desc="target", dynamic_ncols=True)
    for step in bar:
        for group in optimizer.param_groups:
            group["lr"] = lr_at(step, steps=cfg.target_steps, lr=cfg.lr, warmup=cfg.warmup_steps)
        batch_size, seq_len = window_shape(step, steps=cfg.target_steps, cfg=cfg)
        batch = random_windows(stream, batch_size=batch_size, seq_len=seq_len, generator=generator).to(device)
        with autocast(device, cfg.bf16):
            logits = model(input_ids=batch[:, :-1]).logits  # (B, T, V)
        loss = torch.nn.functional.cross_entropy(logits.float().flatten(0, 1), batch[:, 1:].flatten())
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        optimizer.step()
        bar.set_postfix(loss=f"{loss.item():.3f}")
        if cfg.checkpoint_dir and (step + 1) % cfg.checkpoint_every == 0:
            save_pair_member(model, tokenizer, Path(cfg.checkpoint_dir) / TARGET_DIR)
    return model.eval()


def save_pair_member(model, tokenizer, folder: Path) -> None:
    """Save a complete Hugging Face folder: fp16 safetensors in <10 MB shards, config, tokenizer; written beside it
    and renamed into place (checkpoint.save_folder), so a save killed midway never leaves a folder that looks whole."""
    from specui.train.checkpoint import save_folder

    half = copy.deepcopy(model).to("cpu").half()  # a copy: training goes on in float32

    def write(place: Path) -> None:
        half.save_pretrained(place, max_shard_size="5MB")
        tokenizer.save_pretrained(place)
        # stored in float16, loaded in float32 by default: CPUs run float32 fastest, and exactly
        config_path = place / "config.json"
        config = json.loads(config_path.read_text())
        config["dtype"] = "float32"
        config_path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")

    save_folder(folder, write)


def greedy_continuation(model, prompt: list[int], *, new_tokens: int) -> list[int]:
    """The model's greedy tokens after `prompt` (EOS is an ordinary token here): the engine's plain decoding,
    specui's one greedy loop."""
    settings = DecodeSettings(max_new_tokens=new_tokens, speculative=False, ignore_eos=True, seed=0)
    return SpeculativeEngine(model).generate(prompt, settings).token_ids
