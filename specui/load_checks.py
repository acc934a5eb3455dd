"""What a loaded model must be for speculative decoding, checked as a preset loads: a causal language model that keeps
a KV cache (`check_causal`), a draft that tokenizes as its target does (`check_compatible`), and a tokenizer to read;
each failure a `LoadError` that says, for people, what to do (specui.loading loads, these check)."""

from __future__ import annotations

from pathlib import Path

import torch

from specui.kv import model_device
from specui.presets import Preset


class LoadError(RuntimeError):
    """A preset could not be loaded; the message is meant for people."""


class HubUnreachableError(LoadError):
    """A preset's Hub model neither cached nor fetchable: this machine cannot reach the Hub (specui.loading's
    `check_before_loading` says so). The network failed, not the command: a command line exits 1 for it, not a usage
    mistake's 2 (specui.command_line.refusal_status)."""


def check_compatible(preset: Preset, target_tokenizer, *, folder: str | None = None) -> None:
    """The draft (read from `folder`, default the preset's draft) must tokenize exactly as the target does, or its
    proposals mean other text."""
    draft_tokenizer = read_tokenizer(folder or preset.draft, f"Preset '{preset.name}': the draft {preset.draft}",
                                 revision=preset.draft_revision, trust_remote_code=preset.trust_remote_code)
    if draft_tokenizer.get_vocab() != target_tokenizer.get_vocab():
        raise LoadError(
            f"Preset '{preset.name}': the draft {preset.draft} and the target {preset.target} use different "
            "tokenizers (their vocabularies differ), so the draft's tokens cannot be verified by the target. "
            "Pick a draft from the target's model family."
        )


_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json", "spiece.model")


def read_tokenizer(ref, who: str, **kwargs):
    """`AutoTokenizer.from_pretrained(ref, **kwargs)`. A local folder that holds no tokenizer beside the weights is
    said so, naming it (transformers said only the first line of "Couldn't instantiate the backend tokenizer from one
    of: ...", naming no file and no folder); asked only after transformers failed, since it reads tokenizers from
    files this list lacks (a vocab.txt that config.json's tokenizer_class names)."""
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(ref, **kwargs)
    except Exception:
        folder = Path(ref)
        if folder.is_dir() and not any((folder / name).exists() for name in _TOKENIZER_FILES):
            raise LoadError(f"{who}: the folder {folder} has no tokenizer (no tokenizer.json or "
                            "tokenizer_config.json): save the model's tokenizer beside its weights "
                            "(`tokenizer.save_pretrained(folder)`).") from None
        raise


def check_causal(model, who: str) -> None:
    """`model` must be a causal language model that keeps a KV cache: position i reads positions up to i only, and a
    forward returns its cache. An encoder named as a model (a BERT folder, which transformers loads as a
    `BertLMHeadModel` reading both ways) loaded and then failed deep in the first reply. Two forwards of two tokens
    that differ only in the second, once a load: a causal model's first position computes the same numbers over the
    same shapes (0.0 apart for SmolLM2 in float32, bfloat16 and float16: the 1e-4 allowed is no per-dtype tolerance),
    a bidirectional one's moves with the second token."""
    vocab = model.get_input_embeddings().num_embeddings
    device = model_device(model)
    with torch.no_grad():
        whole = model(input_ids=torch.tensor([[0, 1 % vocab]], device=device), use_cache=True)
        other = model(input_ids=torch.tensor([[0, 0]], device=device), use_cache=False).logits[0, 0].float()
    kept = next((whole[key] for key in ("cache", "past_key_values") if key in whole), None)
    first = whole.logits[0, 0].float()
    reads_ahead = vocab > 1 and not torch.allclose(first, other, rtol=1e-4, atol=1e-4 * float(other.abs().max()))
    if kept is None or reads_ahead:
        raise LoadError(f"{who} is not a causal language model ({type(model).__name__}: "
                        f"{'it keeps no KV cache' if kept is None else 'each position reads the tokens after it'}): "
                        "speculative decoding needs a decoder-only model such as Llama, Qwen2 or GPT-2.")
