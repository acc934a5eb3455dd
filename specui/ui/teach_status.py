"""The Teach tab's status line in words (`specui.ui.teaching` wires it): what it says while a decoded run's rounds are
stepped through (`decoded_note`), and once the prompt box no longer holds the prompt of those rounds, or holds it
again (`prompt_edited`, with `ui` the tab's `teaching.TeachTab`). Moved here unchanged from teaching.py.
"""

from __future__ import annotations

import gradio as gr

from specui.ui import teach_memory
from specui.ui.request import seed_words
from specui.ui.teach_prepare import conversation, conversation_words, handed_note


def decoded_note(run) -> str:
    """The status line while the rounds of `run` are stepped through."""
    after = conversation_words(run.extra)
    after = f" after {after}, as the chat decoded it" if after else ""
    seed = seed_words(run.greedy, run.spec.seed)  # -1: the one drawn
    return (f"Decoded {len(run.spec.token_ids)} tokens in {len(run.steps)} rounds ({seed}){after}, and "
            "the same prompt with the target alone for the measured speedup. Step through the rounds below.")


CHANGED = "The prompt changed: **Next round ▶** (or **Decode**) decodes it at round 1, not the last lesson's."


def prompt_edited(ui, data: dict) -> dict:
    """The status line once the prompt box no longer holds the prompt of the rounds shown (and back when it does),
    once it no longer holds the chat message whose conversation came with it (and back when it does), and once it no
    longer holds the prompt a refreshed page said was back (`teach_memory.restored_note`; and back when it does)."""
    run, context, prompt = data[ui.run], data.get(ui.controls.context), data[ui.controls.prompt]
    words = conversation_words(conversation(context))
    if run is not None and prompt == run.prompt:
        return {ui.step.status: decoded_note(run)}
    if words and prompt == context["prompt"]:  # the chat's message again: with its conversation
        return {ui.step.status: f"The Chat tab's message. {handed_note(conversation(context))}"}
    alone = f" It is decoded alone: the chat's conversation ({words}) is no longer used." if words else ""
    saved = data.get(ui.memory)
    back = teach_memory.restored_note(saved, teach=False)
    if run is None and back is not None and data.get(ui.step.status) in (back, CHANGED):  # the line says it is back
        return {ui.step.status: back if prompt == saved["prompt"] else CHANGED}
    if run is None:
        return {ui.step.status: f"The prompt changed.{alone}" if alone else gr.update()}
    return {ui.step.status: "The prompt changed: the rounds below are still the last decoded prompt's. Press "
                            f"**Decode** to step through the new one.{alone}"}
