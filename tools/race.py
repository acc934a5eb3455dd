"""What the side-by-side tools race (`tools.threads_ab`, `tools.native_ab`): a preset's drafter at its own K and
confidence stop, on the held-out chat prompts (`specui.chat_prompts`), or stdlib prompts for a preset without a
chat template."""

from __future__ import annotations

from specui import chat_prompts
from specui.bench.cli import builtin_prompts, tokenize_prompts


def drafter_settings(preset, drafter: str | None = None) -> dict:
    """The `DecodeSettings` keywords of `drafter` (default: the preset's) as the preset runs it."""
    drafter = drafter or preset.drafter
    return {"drafter": drafter, "num_draft_tokens": preset.k_for(drafter),
            "draft_confidence": preset.confidence_for(drafter)}


def race_prompts(engine, count: int) -> list[list[int]]:
    """The first `count` prompts for the engine's preset, tokenized."""
    if engine.preset.chat_template:
        return tokenize_prompts(chat_prompts.HELD_OUT[:count], engine.tokenizer, chat=True)
    return builtin_prompts(engine.tokenizer, count=count, length=128)
