"""Train the bundled model pair from the Python standard library: `python -m specui.train`.

Three stages, each deterministic given the seed, the interpreter's stdlib and the torch build:
1. a byte-level BPE tokenizer (`tokenizers`) trained on the stdlib's non-test source files;
2. the target, a deep and narrow Llama-style causal LM, trained on random windows of that code;
3. the draft, a two-layer model with the same tokenizer, distilled from the target (specui.distill).
Then both are evaluated on the held-out test folders (specui.evaluate) and saved under `--out`
as complete Hugging Face model folders (fp16 safetensors in small shards, tokenizer, model card).

`--eval-only` recomputes the held-out figures and model cards from the shipped folders.
`--stage draft` reuses a saved target and tokenizer and retrains only the draft.
References: nanoGPT (karpathy/nanoGPT, train.py) for the loop; Leviathan et al. 2023 for why the
draft must be much cheaper than the target; Hinton et al. 2015 for distillation.
"""

import argparse
import copy
import json
import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from tqdm import tqdm

from specui import corpus

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


def autocast(device: str, enabled: bool):
    """Mixed precision for training forwards: bfloat16 matmuls, float32 master weights."""
    return torch.autocast("cuda" if device.startswith("cuda") else "cpu", dtype=torch.bfloat16, enabled=enabled)


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
    """All texts as one token stream, each document preceded by EOS: (n_tokens,) int64."""
    eos = tokenizer.eos_token_id
    ids = []
    for encoding in tokenizer.backend_tokenizer.encode_batch(texts, add_special_tokens=False):
        ids.append(eos)
        ids.extend(encoding.ids)
    return torch.tensor(ids, dtype=torch.long)


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


def lr_at(step: int, *, steps: int, lr: float, warmup: int) -> float:
    """Linear warmup, then cosine decay to a tenth of the peak."""
    if step < warmup:
        return lr * (step + 1) / warmup
    progress = (step - warmup) / max(1, steps - warmup)
    return lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


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
    """Save a complete Hugging Face folder: fp16 safetensors in <10 MB shards, config, tokenizer."""
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("model*.safetensors*"):
        old.unlink()  # stale shards from an earlier run would otherwise linger
    half = copy.deepcopy(model).to("cpu").half()  # a copy: training goes on in float32
    half.save_pretrained(folder, max_shard_size="5MB")
    tokenizer.save_pretrained(folder)
    # stored in float16, loaded in float32 by default: CPUs run float32 fastest, and exactly
    config_path = folder / "config.json"
    config = json.loads(config_path.read_text())
    config["dtype"] = "float32"
    config_path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")


# ---------------------------------------------------------------- main


def parse_args(argv=None) -> tuple[TrainConfig, argparse.Namespace]:
    parser = argparse.ArgumentParser(prog="python -m specui.train", description=__doc__.split("\n")[0])
    defaults = TrainConfig()
    for name, value in asdict(defaults).items():
        flag = "--" + name.replace("_", "-")
        if isinstance(value, bool):
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=value)
        else:
            parser.add_argument(flag, type=type(value), default=value)
    parser.add_argument("--eval-only", action="store_true", help="only re-evaluate the folders in --out")
    parser.add_argument("--stage", choices=["all", "draft"], default="all", help="draft: reuse the saved target")
    args = parser.parse_args(argv)
    cfg = TrainConfig(**{name: getattr(args, name) for name in asdict(defaults)})
    return cfg, args


def main(argv=None) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from specui import distill, evaluate, model_card

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
    model_card.write_model_cards(out, report=report, target_dir=TARGET_DIR, draft_dir=DRAFT_DIR)
    (out / TARGET_DIR / "eval_results.json").write_text(json.dumps(report, indent=2) + "\n")
    print(evaluate.format_report(report))


if __name__ == "__main__":
    main()
