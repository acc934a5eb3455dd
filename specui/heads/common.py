"""What the trained heads share: their folder format, the output layer they read the target's
vocabulary through, a residual block, and the one draw every head drafts with.

A head folder holds `specui_head.json` (format, kind, the head's constructor arguments, training facts)
and `head.safetensors` (or shards of at most 8 MB: the head's own parameters only: the target's
embeddings, final norm and output rows are borrowed from the loaded target, never copied into the file).
`load(folder, target)` rebuilds the head around a loaded target and checks that it was trained for a
target of that shape.

Output layer: a head drafts over `token_ids`, a reduced list of the target's ids (as FR-Spec and
EAGLE-3 do; all of them for a small vocabulary). Its matrix is the target's output rows at those ids,
read from the target at load (frozen; rounded to float16 for a float32 target), so a head's file stays
small. q is scattered back onto the full vocabulary, zero for ids it never proposes: verification
handles that exactly.

Products: every head's matrix runs through `specui.products.linear`: while it drafts on a CPU (inference
mode, float32), specui's native product, prepared once per weight (half the bytes where its values are
float16 values, as heads are saved); in training (autograd) and elsewhere, `F.linear`.
"""

from __future__ import annotations

import json
import weakref
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from specui import int8
from specui.drafters.base import Draft
from specui.drafters.tree import on_vocabulary
from specui.products import linear
from specui.sampling import Sampling, choose

FORMAT = "specui-head/1"
META = "specui_head.json"
WEIGHTS = "head.safetensors"  # or head-01.safetensors, head-02... for a head above SHARD_BYTES
SHARD_BYTES = 8 * 2**20
# heads' output rows by what they are made of: (id of the target's output weight, the rows' type and device, the ids'
# bytes) -> (a weak reference to that weight, one to the rows): see `VocabOutput.bind`
_ROWS: dict[tuple, tuple[weakref.ref, weakref.ref]] = {}


def is_head_folder(folder: str | Path) -> bool:
    return (Path(folder) / META).is_file()


def read_meta(folder: str | Path) -> dict:
    meta = json.loads((Path(folder) / META).read_text())
    if meta.get("format") != FORMAT:
        raise ValueError(f"{folder}: {META} has format {meta.get('format')!r}; this specui reads {FORMAT!r}")
    return meta


def save(head: nn.Module, folder: str | Path, *, facts: dict | None = None) -> Path:
    """Write `head` (its `kind`, `arguments` and own parameters, `token_ids` included) into `folder`."""
    from safetensors.torch import save_file

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    # float weights in half precision (a head's file stays under 10 MB; q is whatever the loaded head computes,
    # so verification stays exact), ids as they are
    state = {k: (v.detach().to("cpu", torch.float16) if v.is_floating_point() else v.detach().to("cpu")).contiguous()
             for k, v in head.state_dict().items()}
    for old in folder.glob("head*.safetensors"):
        old.unlink()
    shards: list[dict] = [{}]
    for key, value in state.items():  # shards of at most SHARD_BYTES (one tensor may stand alone above it)
        if shards[-1] and sum(v.nbytes for v in shards[-1].values()) + value.nbytes > SHARD_BYTES:
            shards.append({})
        shards[-1][key] = value
    for i, shard in enumerate(shards):
        save_file(shard, str(folder / (WEIGHTS if len(shards) == 1 else f"head-{i + 1:02d}.safetensors")))
    meta = {"format": FORMAT, "kind": head.kind, "arguments": head.arguments, **(facts or {})}
    (folder / META).write_text(json.dumps(meta, indent=2) + "\n")
    return folder


def load_state(folder: str | Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    state = {}
    for path in sorted(Path(folder).glob("head*.safetensors")):
        state.update(load_file(str(path)))
    # copies (float32 of the saved float16, the ids cloned): a tensor left as safetensors read it keeps the whole
    # file mapped, its pages resident long after the weights were copied out (the chat heads' 9 MB for 80 KB of ids)
    return {k: v.float() if v.is_floating_point() else v.clone() for k, v in state.items()}


def target_shape(target) -> dict:
    """What a head must match in its target: width, layer count and vocabulary size."""
    config = target.config
    return {"hidden_size": config.hidden_size, "num_layers": config.num_hidden_layers,
            "vocab_size": target.get_output_embeddings().weight.shape[0]}


def load_head(cls, folder, target, meta: dict):
    """A head of class `cls` saved in `folder` (`save`), rebuilt around the loaded `target`: its shape
    checked, its weights loaded, its output rows read from this target at the saved ids."""
    check_target(meta.get("arguments", {}), target, folder)
    state = load_state(folder)
    head = cls(target, token_ids=state["output.token_ids"], **meta["arguments"])
    head.load_state_dict(state)
    head.output.bind(target)
    return head.to(target.get_input_embeddings().weight.device).eval()


def all_ids(target) -> torch.Tensor:
    """Every id of the target's vocabulary: the draft vocabulary of a head that is not reduced."""
    return torch.arange(target.get_output_embeddings().weight.shape[0])


def check_target(meta_or_arguments: dict, target, folder) -> None:
    want = meta_or_arguments.get("target_shape")
    have = target_shape(target)
    if want is not None and want != have:
        raise ValueError(f"{folder}: this head was trained for a target with {want}, but the loaded target has "
                         f"{have}; train a head for this target (python -m specui.train heads --help)")


class VocabOutput(nn.Module):
    """logits over `token_ids` from a hidden state [.., D]: the target's final norm and output rows at
    those ids, borrowed (frozen, not saved). `token_ids` is saved with the head."""

    def __init__(self, target, token_ids: torch.Tensor):
        super().__init__()
        self.register_buffer("token_ids", torch.as_tensor(token_ids, dtype=torch.long))
        self.vocab_size = target.get_output_embeddings().weight.shape[0]
        self.bind(target)

    def bind(self, target) -> None:
        weight = target.get_output_embeddings().weight
        # plain attributes, not submodules or buffers: never saved, never trained
        object.__setattr__(self, "_norm", target.model.norm)
        object.__setattr__(self, "_rows", _shared_rows(weight, self.token_ids, getattr(self, "_int8", False)))

    def round_rows(self) -> None:
        """Round the float32 output rows to int8 with power-of-two scales (`specui.int8`), now and whenever they
        are bound again."""
        object.__setattr__(self, "_int8", True)
        if self._rows.dtype == torch.float32:
            object.__setattr__(self, "_rows", int8.rounded(self._rows))

    def forward(self, hidden: torch.Tensor, *, normed: bool = False) -> torch.Tensor:
        x = hidden if normed else self._norm(hidden)
        return linear(x, self._rows.to(x.dtype))

    def target_logits(self, logits_full: torch.Tensor) -> torch.Tensor:
        """The target's own logits restricted to the head's ids (training targets)."""
        return logits_full[..., self.token_ids.to(logits_full.device)]


def _shared_rows(weight: torch.Tensor, token_ids: torch.Tensor, rounded: bool) -> torch.Tensor:
    """The target's output rows `weight` [V, D] at `token_ids` (float32: float16 values, as heads are saved, so a
    drafting step reads half the bytes; rounded: int8 rows, a quarter), held once: heads of one target that read the
    same ids (the chat preset's Medusa and early-exit heads) share one copy, and so one packed product
    (`specui.products`). Rows are made at every bind and the kept ones taken only where they hold the same bits: a
    weight edited in place need not say so (`param.data.copy_`, an inference tensor: neither counts a version, and
    the id and address stay). Never edited in place (`round_rows` makes new rows), so sharing changes no head."""
    ids = token_ids.detach().cpu().to(torch.long)
    rows = weight.detach()[ids.to(weight.device)].clone()
    if rows.dtype == torch.float32:
        rows = rows.half().float()
        if rounded:
            rows = int8.rounded(rows)
    if rows.is_meta:  # an output layer offloaded (no values here to compare): the head loads, as before, unshared
        return rows
    key = (id(weight), rows.dtype, str(rows.device), rounded, ids.numpy().tobytes())
    for old in [k for k, (w, r) in list(_ROWS.items()) if w() is None or r() is None]:
        _ROWS.pop(old, None)
    found = _ROWS.get(key)
    kept = found[1]() if found is not None and found[0]() is weight else None
    if kept is not None and kept.shape == rows.shape and torch.equal(kept.view(torch.uint8), rows.view(torch.uint8)):
        return kept  # bit for bit the rows this weight gives now
    _ROWS[key] = (weakref.ref(weight), weakref.ref(rows))
    return rows


class ResBlock(nn.Module):
    """x + SiLU(W x + b), with W = 0 at the start: a head begins as the identity (Medusa's block)."""

    def __init__(self, width: int):
        super().__init__()
        self.linear = nn.Linear(width, width)
        nn.init.zeros_(self.linear.weight)
        nn.init.zeros_(self.linear.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + F.silu(linear(x, self.linear.weight, self.linear.bias))


class GatedMLP(nn.Module):
    """x + down(SiLU(gate y) * up y), y = RMSNorm(x), with down = 0 at the start: the identity, as `ResBlock`."""

    def __init__(self, width: int, hidden: int, eps: float):
        super().__init__()
        self.eps = eps
        self.norm_weight = nn.Parameter(torch.ones(width))
        self.gate_up = nn.Linear(width, 2 * hidden, bias=False)
        self.down = nn.Linear(hidden, width, bias=False)
        nn.init.zeros_(self.down.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = linear(F.rms_norm(x, x.shape[-1:], self.norm_weight, self.eps), self.gate_up.weight).chunk(2, dim=-1)
        return x + linear(F.silu(gate) * up, self.down.weight)


def draw(logits: torch.Tensor, output: VocabOutput, sampling: Sampling, generator,
         uniform: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Sample one draft token from a head's logits over its ids [N]: (the target's id [], q [V] on the
    target's full vocabulary, zero outside the head's ids). uniform: the draw, taken beforehand (`choose`)."""
    index, q = choose(logits, sampling, generator, uniform)
    return output.token_ids.to(index.device)[index], on_vocabulary(q, output.token_ids, output.vocab_size)


def native_draft(index: torch.Tensor, probs: torch.Tensor, output: VocabOutput) -> Draft:
    """A native round's proposal (`specui.native_adapters`): rows of the head's ids [n] and their q over those ids
    [n, N] -> the target's ids and q over its full vocabulary, zero outside the head's ids."""
    return Draft(output.token_ids.to(index.device)[index], on_vocabulary(probs, output.token_ids, output.vocab_size))


def targets(batch: dict) -> torch.Tensor:
    """What a training batch asks the heads to learn, aligned with its positions (position t: the token t + 1):
    the target's log-probs over the heads' ids [B, T, N], or with hard labels (`python -m specui.train heads
    --hard-labels`) the draft row of the target's greedy token [B, T] (-100 where none counts)."""
    return batch["labels"] if "labels" in batch else batch["target_logp"]


def soft_loss(head_logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Cross-entropy from the target's distribution (log-probs over the head's ids, normalised over the
    whole vocabulary: mass elsewhere is unreachable) to the head's: the distillation loss of every head. Given
    hard labels instead (draft rows, -100 for none), the cross-entropy to them (0 when none counts)."""
    if not target.is_floating_point():
        counted = target >= 0
        if not counted.any():
            return head_logits.sum() * 0.0  # keeps the graph: a batch whose labels all lie outside the ids
        return F.cross_entropy(head_logits[counted].float(), target[counted])
    return F.cross_entropy(head_logits.float(), target.float().exp())  # soft labels: one fused kernel


def frequent_ids(streams: list[torch.Tensor], *, size: int, vocab_size: int, always=()) -> torch.Tensor:
    """The `size` most frequent ids of the streams (plus `always`), sorted; every id when the
    vocabulary is not larger than `size`."""
    if vocab_size <= size:
        return torch.arange(vocab_size)
    counts = torch.zeros(vocab_size, dtype=torch.long)
    for s in streams:
        counts += torch.bincount(s.reshape(-1).long(), minlength=vocab_size)[:vocab_size]
    counts[list(always)] = counts.max() + 1
    return torch.sort(torch.topk(counts, size).indices).values
