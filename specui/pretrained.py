"""One model of a preset read through transformers' `from_pretrained`: the keywords it loads with (dtype, quantization,
device), a draft checked against its target and cut to the target's vocabulary, and a head trained on the target.
specui.loading loads a whole preset with them, in turn."""

from __future__ import annotations

import torch

from specui import chat_draft
from specui.kv import model_device
from specui.load_checks import LoadError, check_causal, check_compatible
from specui.presets import Preset

_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def pick_device(requested: str | None) -> str:
    if requested:
        return requested
    return "cuda" if torch.cuda.is_available() else "cpu"



def _load_head(folder: str, target, *, where: str = ""):
    from specui import heads

    if not heads.is_head_folder(folder):
        raise LoadError(f"{where}the head folder {folder} has no specui_head.json (train one: python -m specui.train "
                        "heads --help)")
    return heads.load(folder, target).to(model_device(target)).eval()


def _load_draft(preset: Preset, folder: str, target, tokenizer, *, local_files_only: bool = False):
    """A transformers draft model read from `folder` (the preset's draft, or its converted folder; its tokenizer checked
    against the target's; with a `specui_vocabulary.json` beside it, proposing from those ids only; from the local
    cache alone with `local_files_only`), or a specui draft that borrows the target's embeddings (specui.chat_draft),
    which has no tokenizer of its own."""
    from transformers import AutoModelForCausalLM

    if chat_draft.is_draft_folder(folder):
        draft = chat_draft.load(folder, target)
        draft.name_or_path = str(folder)  # built on the target's config, it carried the target's folder as its name
        return draft
    draft = AutoModelForCausalLM.from_pretrained(
        folder, local_files_only=local_files_only, **_model_kwargs(
            preset, quantization=preset.draft_quantization, revision=preset.draft_revision,
            device=preset.draft_device or preset.device, device_map=None))
    check_causal(draft, f"Preset '{preset.name}': the draft {preset.draft}")
    check_compatible(preset, tokenizer, folder=folder, local_files_only=local_files_only)
    if chat_draft.has_vocabulary(folder):  # a local folder that keeps a reduced output vocabulary
        chat_draft.restrict_vocabulary(draft, chat_draft.load_vocabulary(folder))
    elif (rows := target.get_output_embeddings().weight.shape[0]) < draft.get_output_embeddings().weight.shape[0]:
        # the same tokenizer, the draft's matrices padded past the target's rows: ids the target never writes (p = 0),
        # cut off (the SpeculativeEngine refuses a larger draft vocabulary) at no cost to exactness
        draft.resize_token_embeddings(rows)
    return draft


def _model_kwargs(preset: Preset, *, quantization: str, revision, device, device_map) -> dict:
    kwargs = {"revision": revision, "trust_remote_code": preset.trust_remote_code}
    if preset.dtype != "auto":
        kwargs["dtype"] = _DTYPES[preset.dtype]
    elif quantization == "none" and not device_map and pick_device(device) == "cpu":
        # CPUs run float32 fastest and most exactly: in bfloat16 a batched verify and a one-token forward
        # can round a near-tie differently; a checkpoint saved in half precision would otherwise load in it
        kwargs["dtype"] = torch.float32
    else:
        kwargs["dtype"] = "auto"
    if quantization != "none":
        from transformers import BitsAndBytesConfig

        kwargs["quantization_config"] = BitsAndBytesConfig(load_in_4bit=quantization == "4bit",
                                                           load_in_8bit=quantization == "8bit")
    kwargs["device_map"] = device_map or pick_device(device)
    return kwargs

