"""The step-throughs' presses without a browser (`specui.ui.teach_keys`): the walk over the presses, and the event's
wiring that keeps a burst's presses from being lost. Clicks in one moment each start the event before gradio knows
one runs, so the first takes every press and the others none; those ran beside it, read the same step and showed it
over the first's result (the browser test's held key then stayed on its round about one run in four)."""

from __future__ import annotations

import gradio as gr

from specui.ui import teach_keys


def test_each_press_moves_one_step_within_the_ends():
    assert teach_keys.walk(2, "++++", 23) == 6
    assert teach_keys.walk(20, "+++++--", 23) == 20  # stops at the last (22) on the way, then two back
    assert teach_keys.walk(0, "-+", 5) == 1 and teach_keys.walk(3, "", 5) == 3


def test_an_event_that_took_no_press_changes_nothing_and_the_events_run_one_at_a_time():
    with gr.Blocks() as demo:
        back, on, step = gr.Button(elem_id="x-prev"), gr.Button(elem_id="x-next"), gr.Number(0)
        event = teach_keys.stepper("x", back=back, on=on, fn=lambda presses, data: {step: teach_keys.walk(
            data[step], presses, 10)}, inputs=[step], outputs=[step], queue=False)
    wired = next(f for f in demo.fns.values() if f.fn is event.fn)
    assert wired.fn("", 4) == {}  # not the step it read, shown over another event's result
    assert wired.fn("++", 4) == {step: 6}
    assert wired.queue and wired.concurrency_limit == 1 and wired.trigger_mode == "always_last"
