"""Training data for the heads (EAGLE, Medusa, early exit): token sequences with the frozen target's
states cached, so that every head trains on one target pass over the data.

Sequences come from the target's own chat answers (`python -m specui.train.chat --write-answers DIR`:
the prompt and the target's greedy answer, the loss on the answer) or, for the stdlib target, from
windows of the training corpus and the target's own greedy continuations of such windows (what drafting
meets: a head that only read human-written code drafts poorly for a target writing its own text). `FeatureCache` runs the target once over them and keeps, per token, the
states the heads read (half precision) and the log-normaliser of its logits; a batch then rebuilds the
target's log-probabilities over a head's ids from the cached final state (one small matrix product),
instead of storing a distribution per token.
"""

from __future__ import annotations

import copy
import hashlib
import time
from pathlib import Path

import torch

from specui.train import checkpoint as files


def answer_sequences(folders, *, max_len: int, greedy_only: bool = False
                     ) -> tuple[list[tuple[torch.Tensor, int]], list[float]]:
    """(conversation ids, index of the first answer token) per saved answer, cut to max_len tokens, and
    each one's weight: `folders` as `python -m specui.train.chat --answers` takes them (one folder or
    several separated by commas, each optionally FOLDER:WEIGHT; greedy and sampled answers, or with
    greedy_only the greedy ones: their tokens are the target's argmax)."""
    from specui.train.chat_data import greedy_answers, load_answers

    out, weights = [], []
    records = load_answers(folders)
    for record in greedy_answers(records, folders) if greedy_only else records:
        ids = record["ids"].long()[:max_len]
        if len(ids) > record["prompt_len"] + 1:
            out.append((ids, int(record["prompt_len"])))
            weights.append(float(record["weight"]))
    if not out:
        raise SystemExit(f"{folders}: no answers-*.pt files (write them with python -m specui.train.chat --write-answers)")
    return out, weights


def greedy_sequences(folders, *, max_len: int) -> tuple[list[tuple[torch.Tensor, int]], list[torch.Tensor]]:
    """(conversation ids, index of the first answer token) per answer whose greedy tokens are known, cut to max_len
    tokens, and beside each its labels: the target's greedy token at each answer position (a greedy answer's own
    tokens; a sampled answer's from `python -m specui.train.greedy_labels`). Sampled answers without them are left
    out (their tokens are draws); refused in one line when nothing is left."""
    from specui.train.chat_data import greedy_answers, load_answers, next_tokens

    sequences, labels = [], []
    for record in greedy_answers(load_answers(folders), folders, labelled=True):
        ids, first = record["ids"].long()[:max_len], int(record["prompt_len"])
        if len(ids) > first + 1:
            sequences.append((ids, first))
            labels.append(next_tokens(record)[:len(ids) - first].long())
    if not sequences:
        raise SystemExit(f"{folders}: no answers-*.pt files (write them with python -m specui.train.chat "
                         "--write-answers)")
    return sequences, labels


def held_out_split(sequences, share: float, seed: int) -> tuple[list[int], list[int]]:
    """Indices of the held-out and the training sequences, a seeded `share` of them held out (at least one prompt's).
    Whole prompts are held out: the answers to one prompt (its greedy answer and its sampled ones) share most of their
    tokens, so a held-out answer whose sibling was trained on reports a learnt figure, not a held-out one. Sequences
    without a prompt (windows of a stream, first index 0) are each their own."""
    groups: dict = {}
    for i, (ids, first) in enumerate(sequences):
        groups.setdefault(tuple(ids[:first].tolist()) if first else ("window", i), []).append(i)
    keys = list(groups)
    want, held = max(1, int(len(sequences) * share)), []
    for g in torch.randperm(len(keys), generator=torch.Generator().manual_seed(seed)).tolist():
        if len(held) >= want:
            break
        held += groups[keys[g]]
    kept = set(held)
    return sorted(held), [i for i in range(len(sequences)) if i not in kept]


def window_sequences(stream: torch.Tensor, *, length: int, count: int, seed: int) -> list[tuple[torch.Tensor, int]]:
    """`count` random windows of `length` tokens of a token stream, the loss on all of them."""
    gen = torch.Generator().manual_seed(seed)
    starts = torch.randint(0, len(stream) - length, (count,), generator=gen).tolist()
    return [(stream[s:s + length].clone(), 0) for s in starts]


@torch.no_grad()
def continuation_sequences(target, stream: torch.Tensor, *, count: int, length: int, new_tokens: int, seed: int,
                           batch: int = 64, path: str | Path | None = None, log=print) -> list[tuple[torch.Tensor, int]]:
    """`count` sequences of `length` tokens: a random window of `length - new_tokens` tokens of the stream,
    then the target's greedy continuation (EOS an ordinary token, as the benchmark decodes), the loss on the
    continuation. Generated in batches; kept in `path` between runs (read when it holds these settings)."""
    # another target writes other text; no file, no key (a pass over every weight)
    key = None if path is None else (count, length, new_tokens, seed, len(stream), target_key(target))
    saved = files.read_cache(path, log=log)  # None: none yet, or one that cannot be read (written before writes were
    if saved is not None:  # atomic, by a run killed while writing it)
        if saved.get("key") == key:
            log(f"target continuations read from {path}")
            return [(row.clone(), length - new_tokens) for row in saved["sequences"]]
    prompt_len = length - new_tokens
    gen = torch.Generator().manual_seed(seed ^ 0xC0DE)
    starts = torch.randint(0, len(stream) - prompt_len, (count,), generator=gen).tolist()
    device = target.get_input_embeddings().weight.device
    rows, started = [], time.time()
    for b in range(0, count, batch):
        prompts = torch.stack([stream[s:s + prompt_len] for s in starts[b:b + batch]]).to(device)
        out = target.generate(prompts, attention_mask=torch.ones_like(prompts), do_sample=False,
                              max_new_tokens=new_tokens, min_new_tokens=new_tokens,
                              pad_token_id=target.config.pad_token_id or 0)
        rows.append(out[:, :length].cpu())
        log(f"target continuations: {min(b + batch, count)}/{count} ({time.time() - started:.0f} s)")
    sequences = torch.cat(rows)
    if path is not None:
        files.save({"key": key, "sequences": sequences}, path)
    return [(row.clone(), prompt_len) for row in sequences]


def target_key(target) -> str:
    """What tells one target's weights from another's, for a cache of what it computes (its states, its greedy
    continuations) to be read back only for the target that computed it: its class and config, and each
    parameter's name, shape, dtype and `_bits_sums`, hashed."""
    digest = hashlib.sha256(f"{type(target).__name__} {target.config.to_json_string()}".encode())
    with torch.no_grad():
        for name, p in target.named_parameters():
            digest.update(f"{name} {tuple(p.shape)} {p.dtype} {_bits_sums(p)}".encode())
    return digest.hexdigest()[:16]


def _bits_sums(p: torch.Tensor, chunk: int = 1 << 22) -> list[int]:
    """Per chunk of a tensor's bits (read as 16-bit integers, or bytes), their sum and their sum weighted by place
    (1..251, repeating): integers, so exact whatever the device and however torch splits the sum among its threads
    (float64 sums were not: SmolLM2's differed under 8 threads); summed where the tensor lies, a chunk at a time (a
    target on a GPU is not copied, nor widened whole)."""
    bits = p.detach().contiguous().view(-1).view(torch.uint8)
    bits = bits.view(torch.int16) if bits.numel() % 2 == 0 else bits
    place = torch.arange(min(chunk, bits.numel()), device=bits.device) % 251 + 1
    sums = []
    for start in range(0, bits.numel(), chunk):
        part = bits[start:start + chunk].to(torch.int64)  # at most 2**15 * 251 * 2**22 < 2**63: no overflow
        sums.append(torch.stack([part.sum(), (part * place[:len(part)]).sum()]))
    return torch.cat(sums).tolist() if sums else []


def data_key(sequences) -> str:
    """What tells one list of (ids, first) sequences from another (their tokens, in order), hashed."""
    digest = hashlib.sha256()
    for ids, first in sequences:
        digest.update(f"{len(ids)} {first};".encode())
        digest.update(ids.to(torch.int64).numpy().tobytes())
    return digest.hexdigest()[:16]


class FeatureCache:
    """The target's states at `layers` (transformers' hidden_states indices) for every sequence."""

    def __init__(self, target, sequences: list[tuple[torch.Tensor, int]], *, layers: tuple[int, ...],
                 batch: int = 8, log=print, path: str | Path | None = None, dtype: torch.dtype | None = None):
        """path: a file that keeps the cache between runs (read when it holds these sequences and layers, computed by
        this target (`target_key`) in this dtype).
        dtype: run a copy of the target in this dtype to compute the states (bfloat16 on a CPU with AMX: about
        3x float32's speed, the states within about 1% of float32's); default: the target as it is."""
        self.layers = tuple(sorted(set(layers) | {target.config.num_hidden_layers}))  # the final state: always
        self.final = target.config.num_hidden_layers
        self.sequences = sequences
        # which data, which target (the same data through another target: other states), run in which dtype
        key = None if path is None else {"data": data_key(sequences), "target": target_key(target),
                                         "dtype": str(dtype or target.dtype)}  # no file, no key: none computed
        saved = files.read_cache(path, log=log)
        if saved is not None:  # one that cannot be read is computed again
            if saved.get("key") == key and set(self.layers) <= set(saved["layers"]):  # the same data, the layers needed
                self.layers, self.states, self.lse, self.tokens = (saved["layers"], saved["states"], saved["lse"],
                                                                   saved["tokens"])
                log(f"target states read from {path}")
                return
            log(f"{path} holds the states of other data, another target or other layers; computing them again")
        if dtype is not None and dtype != target.dtype:
            target = copy.deepcopy(target).to(dtype)  # a copy: the caller's target keeps its float32 weights
        self._compute(target, batch=batch, log=log)
        if path is not None:
            files.save({"key": key, "layers": self.layers, "states": self.states, "lse": self.lse,
                        "tokens": self.tokens}, path)

    def _compute(self, target, *, batch: int, log) -> None:
        sequences = self.sequences
        self.states: list[dict[int, torch.Tensor]] = []
        self.lse: list[torch.Tensor] = []
        device = target.get_input_embeddings().weight.device
        started = time.time()
        order = sorted(range(len(sequences)), key=lambda i: len(sequences[i][0]))  # similar lengths together
        slots: list = [None] * len(sequences)
        with torch.inference_mode():
            for b in range(0, len(order), batch):
                chunk = order[b:b + batch]
                width = max(len(sequences[i][0]) for i in chunk)
                ids = torch.zeros(len(chunk), width, dtype=torch.long)
                mask = torch.zeros(len(chunk), width, dtype=torch.long)
                for row, i in enumerate(chunk):
                    n = len(sequences[i][0])
                    ids[row, :n], mask[row, :n] = sequences[i][0], 1
                out = target(input_ids=ids.to(device), attention_mask=mask.to(device), output_hidden_states=True)
                lse = out.logits.float().logsumexp(-1).cpu()
                for row, i in enumerate(chunk):
                    n = len(sequences[i][0])
                    slots[i] = ({j: out.hidden_states[j][row, :n].to("cpu", torch.float16) for j in self.layers},
                                lse[row, :n])
                if (b // batch) % 20 == 0:
                    done = b + len(chunk)
                    log(f"target states: {done}/{len(order)} sequences ({time.time() - started:.0f} s)")
        self.states = [s[0] for s in slots]
        self.lse = [s[1] for s in slots]
        self.tokens = sum(len(s[0]) for s in sequences)

    def batch(self, indices: list[int], *, token_ids: torch.Tensor, rows: torch.Tensor, device,
              hard: bool = False) -> dict:
        """A padded training batch: ids, states per layer (float32), the target's log-probs over
        `token_ids` (the target's output `rows` at them), and the mask of positions that count. hard: instead
        of the log-probs, "labels": at each counted position the row in `token_ids` of the sequence's next
        token (its greedy token, for a greedy answer), -100 where there is none or it lies outside them."""
        width = max(len(self.sequences[i][0]) for i in indices)
        B, D = len(indices), rows.shape[1]
        ids = torch.zeros(B, width, dtype=torch.long)
        mask = torch.zeros(B, width, dtype=torch.bool)
        hidden = {j: torch.zeros(B, width, D) for j in self.layers}
        lse = torch.zeros(B, width)
        for row, i in enumerate(indices):
            seq, first = self.sequences[i]
            n = len(seq)
            ids[row, :n] = seq
            mask[row, max(first - 1, 0):n] = True  # positions whose next token is part of the answer
            for j in self.layers:
                hidden[j][row, :n] = self.states[i][j].float()
            lse[row, :n] = self.lse[i]
        hidden = {j: h.to(device) for j, h in hidden.items()}
        if hard:
            slot = torch.full((int(max(token_ids.max(), ids.max())) + 1,), -100, dtype=torch.long)
            slot[token_ids.cpu()] = torch.arange(len(token_ids))
            labels = slot[ids.roll(-1, dims=1)]
            labels[~mask] = -100
            for row, i in enumerate(indices):  # the last token of a sequence has no next one
                labels[row, len(self.sequences[i][0]) - 1:] = -100
            return {"ids": ids.to(device), "hidden": hidden, "labels": labels.to(device), "mask": mask.to(device)}
        logp = hidden[self.final] @ rows.to(device).float().T - lse.to(device)[..., None]  # [B, T, N]
        return {"ids": ids.to(device), "hidden": hidden, "target_logp": logp, "mask": mask.to(device)}
