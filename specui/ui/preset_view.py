"""What the page says of a preset, and how both tabs' drafter and K controls follow the preset chosen.

`about` is the line under the Chat tab's preset menu (the description, the memory it needs, where it runs,
its drafter and K); `on_drafter` moves a K slider to the K the preset gives the drafter chosen.
"""

from __future__ import annotations

import gradio as gr

from specui.drafters import LABELS
from specui.loading import pick_device
from specui.spaces import hardware_note
from specui.ui.request import drafter_k


def on_drafter(config, preset_name: str, drafter: str, *, k_max: int | None = None):
    """A preset that gives drafters their own K (`drafter_tokens`) moves the K slider to the chosen one's
    (at most `k_max`, the slider's end)."""
    k = drafter_k(config, preset_name, drafter)
    return gr.skip() if k is None else gr.update(value=k if k_max is None else min(k_max, k))


def about(preset) -> str:
    """The preset's description, the memory it needs, the hardware note, then its drafter and K (and the K of
    drafters that have their own) and whether it uses the chat template."""
    lines = [preset.description or ""]
    if preset.memory:
        lines.append(f"*Needs {preset.memory}.*")
    runs_on = "cuda" if (preset.device_map or pick_device(preset.device) != "cpu") else "cpu"
    note = hardware_note(runs_on)
    if note:
        lines.append(f"*{note}*")
    drafter = LABELS.get(preset.drafter, preset.drafter) + ("" if preset.draft else " (no draft model)")
    own = [f"{LABELS[name]} {k}" for name, k in preset.drafter_tokens if name != preset.drafter]
    if preset.k_for() != preset.num_draft_tokens:  # the default drafter has a K of its own: say the rest's
        own.append(f"others {preset.num_draft_tokens}")
    own = ", ".join(own)
    lines.append(f"Drafter: {drafter} · K = {preset.k_for()}{f' ({own})' if own else ''} · "
                 f"{'chat template' if preset.chat_template else 'base model: continues the prompt'}")
    return "\n\n".join(line for line in lines if line)
