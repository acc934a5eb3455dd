"""Training utilities shared by the stages: the tokenizer, the token stream (kept on disk), model shapes, batches,
the learning-rate schedule, the optimiser, the target's training loop and saving a model folder.

References: nanoGPT (karpathy/nanoGPT, train.py) for the loop.
"""

import copy
import hashlib
import json
import math
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path

import numpy
import torch
from tqdm import tqdm

from specui.engine import SpeculativeEngine
from specui.settings import DecodeSettings
from specui.train.config import EOS, TARGET_DIR, TrainConfig


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
    return kept_stream("encode_stream", tokenizer, texts, lambda: _encoded(tokenizer, texts))


def _encoded(tokenizer, texts: list[str]) -> torch.Tensor:
    """`encode_stream`'s ids, tokenized by a copy of the tokenizer's backend with every text whole, as
    `tokenizer(texts)` gives them: a call such as `tokenizer(..., padding=True, truncation=True)` or
    `split_special_tokens=True` leaves those settings on the backend itself (pads and cut documents in the stream),
    and the last is no part of its serialization (`stream_key`)."""
    from tokenizers import Tokenizer

    eos = tokenizer.eos_token_id
    serialized = _serialized(tokenizer)
    if serialized is None:  # a slow tokenizer, or a backend with a Python part: the tokenizer's own call, kept nowhere
        batch = tokenizer(texts, add_special_tokens=False, padding=False, truncation=False)["input_ids"]
    else:
        backend = Tokenizer.from_str(serialized)  # special tokens matched, as by default
        backend.no_padding()
        backend.no_truncation()
        batch = [encoding.ids for encoding in backend.encode_batch(texts, add_special_tokens=False)]
    return torch.tensor([t for ids in batch for t in (eos, *ids)], dtype=torch.long)


def _serialized(tokenizer) -> str | None:
    """The tokenizer's fast backend as JSON; None for a slow tokenizer or a backend that cannot be written out (a
    pre-tokenizer or normalizer of Python code)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    try:
        return None if backend is None else backend.to_str()
    except Exception:  # noqa: BLE001 - tokenizers raises its own Exception for a custom component
        return None


# ---------------------------------------------------------------- token streams kept on disk

STREAMS_ENV = "SPECUI_STREAMS"  # where they are kept instead (the tests' own folder)
STREAM_FORMAT = 2  # raised whenever what a kept stream holds changes (its ids, the file's layout): older files unread
MAGIC = b"specui token stream\n"


def streams_folder() -> Path:
    """Where token streams are kept: $SPECUI_STREAMS, else streams/ in specui's cache folder (`packaged.cache_root`:
    $SPECUI_CACHE, else $XDG_CACHE_HOME/specui or ~/.cache/specui), where the converted GGUF and the native build
    are."""
    from specui.packaged import cache_root

    return Path(os.environ[STREAMS_ENV]).expanduser() if os.environ.get(STREAMS_ENV) else cache_root() / "streams"


def stream_key(name: str, tokenizer, texts: list[str]) -> str | None:
    """A SHA-256 of everything `name`'s ids depend on: the function and STREAM_FORMAT, the tokenizers library's
    version (its code does the tokenizing), the tokenizer's class, EOS and whole serialization (its vocabulary,
    merges, normalizer, added tokens: not its name), every text's bytes. None for a tokenizer without a fast backend
    that can be written out (nothing is kept)."""
    import tokenizers

    serialized = _serialized(tokenizer)
    if serialized is None:
        return None
    digest = hashlib.sha256()
    head = f"{name} {STREAM_FORMAT} {tokenizers.__version__} {type(tokenizer).__qualname__} " \
           f"{tokenizer.eos_token_id} {getattr(tokenizer, 'split_special_tokens', None)}"
    for part in (head, serialized, *texts):  # each after its length: no two lists give the same bytes
        data = part.encode("utf-8", "surrogatepass")
        digest.update(len(data).to_bytes(8, "little") + data)
    return digest.hexdigest()


def kept_stream(name: str, tokenizer, texts: list[str], tokenize) -> torch.Tensor:
    """`tokenize()`'s stream, read from the file an earlier run kept for the same `stream_key` (in `streams_folder`),
    else tokenized and kept: written under a temporary name and renamed, so runs at once or a Ctrl-C never leave
    half a file. A file that is not whole, or not this key's (its header and the SHA-256 of its ids checked), is
    never trusted: tokenized again and written over. A cache that cannot be written leaves the run as it was."""
    key = stream_key(name, tokenizer, texts)
    try:
        folder = streams_folder()
    except RuntimeError:  # no home folder to find the cache in (Path.home: no $HOME, a uid without a passwd entry)
        key = None
    if key is None:
        return tokenize()
    path = folder / f"{name}-{key[:32]}.ids"
    head = MAGIC + key.encode() + b"\n"
    try:
        data = path.read_bytes()
    except OSError:
        data = b""
    digest, payload = data[len(head):len(head) + 65], data[len(head) + 65:]
    if data.startswith(head) and digest == hashlib.sha256(payload).hexdigest().encode() + b"\n" \
            and len(payload) % 4 == 0:
        return torch.from_numpy(numpy.frombuffer(payload, dtype="<i4").astype(numpy.int64))
    stream = tokenize()
    payload = stream.numpy().astype("<i4").tobytes()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, part = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
    except OSError:
        return stream
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(head + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload)
        os.replace(part, path)
    except BaseException as e:  # a full disk, Ctrl-C: no part left behind
        Path(part).unlink(missing_ok=True)
        if not isinstance(e, OSError):
            raise
    return stream


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
