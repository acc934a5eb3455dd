"""The Teach tab's Drafter radio says what each kind of drafter is: a student alone met EAGLE, Medusa and early exit
there with no word on the page of what they are (the step help speaks of prompt lookup and "+ lookup" only)."""

from __future__ import annotations

from specui.drafters import LABELS


def test_the_drafter_radio_says_what_proposes_the_drafts():
    import gradio as gr

    from specui.ui import teach_layout
    from tests.helpers import ui_config

    with gr.Blocks():
        controls = teach_layout.controls(ui_config())
    said = controls.drafter.info or ""
    assert said == teach_layout.DRAFTER_INFO
    families = {label.split(" + ")[0] for label in LABELS.values()}  # "draft model + lookup": a draft model's
    assert all(family.lower() in said.lower() for family in families), families
    assert "hidden state" in said and "first layers" in said and "copied" in said
