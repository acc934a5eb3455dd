"""A draft model that borrows its target's embeddings: a few decoder layers of the target's width,
the target's own token embeddings as input, and an output layer over a reduced vocabulary.

Why: a draft for a 49,152-token vocabulary spends most of a CPU step in its output layer and most of
its file in its embeddings. This one ships only its layers, its final norm and `token_ids`, the ids
of the N most frequent tokens (as FR-Spec and EAGLE-3 do). Its output layer is the target's output
embedding restricted to those rows (rounded to float16 when loaded, as its layers are stored: a
float32 step then reads half the bytes), so it reads the same feature space. Tokens outside the list get
q = 0, which verification handles exactly (they are simply never proposed).

It is a real `LlamaForCausalLM` (so the engine's lean CPU forward and transformers' forward both run
it) whose `embed_tokens` is the target's module and whose `lm_head` has N rows; `model.token_ids`
maps its output rows to the target's ids. A folder holds `specui_draft.json` and safetensors shards
under 10 MB; `load(folder, target)` rebuilds the model around a loaded target.

An ordinary transformers draft can drop to a reduced vocabulary too: a `specui_vocabulary.json` beside
its weights names the ids its output layer keeps (`restrict_vocabulary`; the bundled stdlib draft has one).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import torch

FORMAT = "specui-draft/borrowed-embeddings/1"
META = "specui_draft.json"


def is_draft_folder(folder: str | Path) -> bool:
    return (Path(folder) / META).is_file()


def draft_config(target_config, *, num_layers: int, vocab_size: int):
    """The target's config with fewer layers and the reduced output vocabulary."""
    config = copy.deepcopy(target_config)
    config.num_hidden_layers = num_layers
    if getattr(config, "layer_types", None):
        config.layer_types = list(config.layer_types[:num_layers])
    config.vocab_size = vocab_size
    config.tie_word_embeddings = False
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    return config


def build(target, *, num_layers: int, token_ids: torch.Tensor, init_layers: list[int] | None = None):
    """A draft around `target`: embeddings shared, head = the target's output rows at `token_ids`.

    init_layers: target layer indices whose weights initialise the draft's layers (training only).
    """
    from transformers import AutoModelForCausalLM

    token_ids = torch.as_tensor(token_ids, dtype=torch.long).cpu()
    config = draft_config(target.config, num_layers=num_layers, vocab_size=len(token_ids))
    config._attn_implementation = getattr(target.config, "_attn_implementation", None) or "sdpa"
    weight = target.get_output_embeddings().weight
    draft = AutoModelForCausalLM.from_config(config, dtype=weight.dtype)
    draft.model.embed_tokens = target.get_input_embeddings()  # the same module: nothing copied
    with torch.no_grad():
        draft.model.norm.weight.copy_(target.model.norm.weight)
        for mine, theirs in zip(draft.model.layers, init_layers or []):
            mine.load_state_dict(target.model.layers[theirs].state_dict())
    _keep_rows(draft, weight, token_ids)
    return draft.to(weight.device)


def grow(draft, target, init_layers: list[int]):
    """`draft` with one more layer after its last for each index in `init_layers`, initialised from that target
    layer but with its two output products (attention's o_proj, the MLP's down_proj) zero: each new layer adds
    nothing to the residual stream, so the grown draft computes exactly what `draft` did, and training starts from
    it with more room (the chat draft's validation stopped rising at two layers, whatever the data)."""
    if not init_layers:
        raise ValueError("grow: name at least one target layer to initialise a new layer from")
    grown = build(target, num_layers=draft.config.num_hidden_layers + len(init_layers), token_ids=draft.token_ids)
    _, unexpected = grown.load_state_dict(trained_state(draft), strict=False)
    if unexpected:
        raise ValueError(f"grow: the draft's tensors {unexpected[:3]} have no place in the grown draft")
    with torch.no_grad():
        grown.lm_head.weight.copy_(draft.lm_head.weight)  # its rows as loaded (float16-rounded), not the target's
        for mine, theirs in zip(grown.model.layers[draft.config.num_hidden_layers:], init_layers):
            mine.load_state_dict(target.model.layers[theirs].state_dict())
            mine.self_attn.o_proj.weight.zero_()
            mine.mlp.down_proj.weight.zero_()
    return grown.to(draft.lm_head.weight.device).train(draft.training)


def _keep_rows(draft, weight: torch.Tensor, token_ids: torch.Tensor) -> None:
    """Give `draft` a frozen output layer of `weight`'s rows at `token_ids`, and `draft.token_ids` to map
    its rows back to the target's ids."""
    head = torch.nn.Linear(weight.shape[1], len(token_ids), bias=False, device=weight.device, dtype=weight.dtype)
    with torch.no_grad():
        head.weight.copy_(weight[token_ids.to(weight.device)])
    head.requires_grad_(False)
    draft.lm_head = head
    draft.register_buffer("token_ids", token_ids.to(weight.device), persistent=False)


def repick(draft, target, token_ids) -> None:
    """Give a draft of `build`'s a new vocabulary in place: its output rows become the target's rows at `token_ids`.
    They are the target's own, so no trained weight is lost; only which ids it can propose changes."""
    token_ids = torch.as_tensor(token_ids, dtype=torch.long).cpu()
    _keep_rows(draft, target.get_output_embeddings().weight, token_ids)
    draft.config.vocab_size = len(token_ids)


def trained_state(draft) -> dict[str, torch.Tensor]:
    """What a draft folder stores: the layers and the final norm (never the borrowed tensors)."""
    return {k: v for k, v in draft.state_dict().items()
            if not k.startswith(("model.embed_tokens.", "lm_head.")) and k != "token_ids"}


def save(draft, folder: str | Path, *, facts: dict | None = None, shard_bytes: int = 9_000_000) -> None:
    """Write the draft's trained tensors (float16, shards under 10 MB), its token ids and metadata."""
    from safetensors.torch import save_file

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("draft-*.safetensors"):
        old.unlink()
    shards, current, size = [], {}, 0
    for name, tensor in trained_state(draft).items():
        tensor = tensor.detach().to("cpu", torch.float16).contiguous()
        if current and size + tensor.numel() * 2 > shard_bytes:
            shards.append(current)
            current, size = {}, 0
        current[name], size = tensor, size + tensor.numel() * 2
    shards.append(current)
    shards[0]["token_ids"] = draft.token_ids.to("cpu", torch.int32).contiguous()
    files = []
    for i, shard in enumerate(shards):
        files.append(f"draft-{i + 1:02d}.safetensors")
        save_file(shard, folder / files[-1])
    meta = {"format": FORMAT, "num_layers": draft.config.num_hidden_layers, "vocab_size": int(len(draft.token_ids)),
            "hidden_size": draft.config.hidden_size, "target_vocab_size": draft.model.embed_tokens.num_embeddings,
            "files": files, **(facts or {})}
    (folder / META).write_text(json.dumps(meta, indent=2) + "\n")


def load(folder: str | Path, target):
    """Rebuild a saved draft around `target` (which lends its embeddings and output rows)."""
    from safetensors.torch import load_file

    folder = Path(folder)
    meta = json.loads((folder / META).read_text())
    if meta.get("format") != FORMAT:
        raise ValueError(f"{folder / META}: unknown draft format {meta.get('format')!r} (expected {FORMAT!r})")
    vocab = target.get_input_embeddings().num_embeddings
    if meta["hidden_size"] != target.config.hidden_size or meta["target_vocab_size"] != vocab:
        raise ValueError(f"the draft in {folder} was made for a target of width {meta['hidden_size']} and "
                         f"{meta['target_vocab_size']} tokens; this target has width {target.config.hidden_size} "
                         f"and {vocab} tokens")
    state = {}
    for name in meta["files"]:
        state.update(load_file(folder / name))
    token_ids = state.pop("token_ids").long()
    draft = build(target, num_layers=meta["num_layers"], token_ids=token_ids)
    dtype = target.get_output_embeddings().weight.dtype
    missing, unexpected = draft.load_state_dict({k: v.to(dtype) for k, v in state.items()}, strict=False)
    missing = [k for k in missing if not k.startswith(("model.embed_tokens.", "lm_head."))]
    if missing or unexpected:
        raise ValueError(f"{folder}: draft tensors do not match its config "
                         f"(missing {missing[:3]}, unexpected {unexpected[:3]})")
    if dtype == torch.float32:  # its output rows in float16, as its layers are: the native products then read
        with torch.no_grad():  # half the bytes (specui.native); on the held-out chat prompts, the same drafts
            draft.lm_head.weight.copy_(draft.lm_head.weight.half().float())
    return draft.eval()


VOCABULARY = "specui_vocabulary.json"  # beside an ordinary draft's weights: the ids its output layer keeps


def has_vocabulary(folder: str | Path) -> bool:
    return (Path(folder) / VOCABULARY).is_file()


def restrict_vocabulary(draft, token_ids) -> None:
    """Make an ordinary transformers draft propose from `token_ids` only, in place: its output layer
    keeps those rows (untied from the input embeddings, which stay whole) and `draft.token_ids` maps
    them back, as `build` does. A draft's step then reads N rows instead of the whole vocabulary; the
    target is untouched (q = 0 elsewhere, which verification handles exactly)."""
    token_ids = torch.as_tensor(token_ids, dtype=torch.long)
    weight = draft.get_output_embeddings().weight
    vocab = draft.get_input_embeddings().num_embeddings
    if token_ids.dim() != 1 or not len(token_ids) or int(token_ids.min()) < 0 or int(token_ids.max()) >= vocab \
            or len(set(token_ids.tolist())) != len(token_ids):
        raise ValueError(f"a draft vocabulary is a list of distinct token ids in [0, {vocab})")
    _keep_rows(draft, weight, token_ids)
    draft.config.tie_word_embeddings = False
    draft.config.vocab_size = len(token_ids)


def load_vocabulary(folder: str | Path) -> list[int]:
    """The ids of a draft folder's `specui_vocabulary.json` ({"token_ids": [...], "picked": "how"})."""
    data = json.loads((Path(folder) / VOCABULARY).read_text())
    ids = data.get("token_ids") if isinstance(data, dict) else None
    if not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
        raise ValueError(f"{Path(folder) / VOCABULARY}: expected {{\"token_ids\": [int, ...]}}")
    return ids


def full_vocabulary(draft):
    """The same draft with an output layer over the target's whole vocabulary, for code that cannot
    map rows to ids (transformers' assisted generation): the ids outside `token_ids` get a logit of
    -1e4, so their probability is 0 in float32 and greedy picks are unchanged."""
    vocab = draft.model.embed_tokens.num_embeddings
    full = copy.copy(draft)  # a shallow copy: the layers, norm and embeddings are shared
    weight = draft.lm_head.weight
    head = torch.nn.Linear(weight.shape[1], vocab, bias=True, device=weight.device, dtype=weight.dtype)
    with torch.no_grad():
        head.weight.zero_()
        head.weight[draft.token_ids.to(weight.device)] = weight
        head.bias.fill_(-1e4)
        head.bias[draft.token_ids.to(weight.device)] = 0.0
    head.requires_grad_(False)
    full._modules = dict(draft._modules, lm_head=head)
    full._buffers = {k: v for k, v in draft._buffers.items() if k != "token_ids"}
    full.config = copy.deepcopy(draft.config)
    full.config.vocab_size = vocab
    full.generation_config = copy.deepcopy(draft.generation_config)
    return full
