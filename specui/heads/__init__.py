"""Heads trained on a target that draft for it: EAGLE, Medusa and early exit (self-speculation).

    common      the folder format (`specui_head.json` + safetensors shards), the reduced output layer,
                the one draw every head drafts with, the distillation loss
    eagle       `EagleHead`: one decoder layer over the target's features (EAGLE-3's fused low, middle
                and high layers) and the next token's embedding, drafting autoregressively
    medusa      `MedusaHeads`: one residual block per position ahead, on the target's last state
    early_exit  `EarlyExitHead`: the target's first E layers (on the target's own KV cache) and an adapter

Each head is an `nn.Module` with `kind`, `arguments` (its constructor's keywords) and
`make_drafter(target_model)`; `load(folder, target)` rebuilds a saved one around a loaded target.
`python -m specui.train heads` trains them.
"""

from __future__ import annotations

from pathlib import Path

from specui.heads.common import is_head_folder, read_meta

__all__ = ["is_head_folder", "load", "read_meta"]


def load(folder: str | Path, target):
    """The head saved in `folder`, rebuilt around the loaded `target` (its kind read from the folder)."""
    import importlib

    from specui.drafters.registry import HEADS

    meta = read_meta(folder)
    kind = meta.get("kind")
    if kind not in HEADS:
        raise ValueError(f"{folder}: unknown head kind {kind!r}; this specui knows {', '.join(HEADS)}")
    module = importlib.import_module(f"specui.heads.{kind}")
    return module.load(folder, target, meta)
