"""The Teach tab's second drafter: a dropdown (#teach-second) and a view (#compare-view) that shows, for the
round the step-through is on, what the second drafter proposes from the same context with the same draws.

`run_comparison` computes it for the run on show (its prompt, settings and preset, not the controls'
current values, which may have changed since) with `specui.lesson_compare`, in the engine's queue; it runs
after every Decode and whenever the dropdown changes. `specui.ui.teaching` keeps the comparison beside the run's
rounds (`teach_keys.Shown.beside`) and renders the view at each step.
"""

from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from specui import lesson_compare
from specui.drafters import LABELS
from specui.ui.request import DRAFTER_CHOICES
from specui.ui.teach_compare_view import COMPARE_HELP, NONE, render_compare, waiting
from specui.ui.toasts import refusal


@dataclass
class CompareView:
    second: gr.Dropdown
    view: gr.HTML


def build() -> CompareView:
    """The section under the step view: the side-by-side view on the left, the help and the dropdown on the right."""
    with gr.Row(equal_height=False):
        with gr.Column(scale=3, min_width=420):
            view = gr.HTML(render_compare(None, 0), elem_id="compare-view")
        with gr.Column(scale=2, min_width=280):
            second = gr.Dropdown([NONE, *DRAFTER_CHOICES], value=NONE, label="Compare with a second drafter",
                                 elem_id="teach-second")
            gr.Markdown(COMPARE_HELP)
    return CompareView(second, view)


def choices(engine, primary: str) -> list[str]:
    """What the dropdown offers for a run: none, then the engine's other drafters, in display order."""
    return [NONE, *(LABELS[d] for d in engine.drafters if d != primary)]


def run_comparison(showcase, ui, data: dict) -> tuple[lesson_compare.Comparison | None, dict]:
    """Compare the run on show with the chosen second drafter (or clear the view when none is chosen): (the
    `Comparison`, or None; the answer to the view and the dropdown)."""
    view, run, choice, index = ui.compare, data[ui.run], data[ui.compare.second], data[ui.index].index
    if run is None:  # a drafter chosen before any Decode: it compares once one is decoded
        return None, {view.view: render_compare(None, index, note=waiting(choice, decoded=False))}
    preset = showcase.config.get(run.extra.get("preset"))
    pair = showcase.cache.get(preset)  # loaded by the run's Decode
    engine, primary = pair.engine(), run.decode.drafter
    offered = choices(engine, primary)
    if choice not in offered:  # a drafter this preset lacks, or the primary itself
        why = "drafts this run itself" if choice == LABELS.get(primary) else "cannot be compared here"
        note = f"{choice} {why}: this run's preset offers {', '.join(offered[1:]) or 'no other'}."
        return None, {view.view: render_compare(None, index, note=note),
                      view.second: gr.update(choices=offered, value=NONE)}
    if choice == NONE:
        return None, {view.view: render_compare(None, index), view.second: gr.update(choices=offered)}
    try:
        compared = lesson_compare.compare(engine, pair.tokenizer, run.prompt_ids, run.decode, primary=primary,
                                          second=DRAFTER_CHOICES[choice], lock=showcase.lock(preset.name))
    except ValueError as e:
        raise refusal(str(e)) from None
    return compared, {view.view: render_compare(compared, index), view.second: gr.update(choices=offered)}
