"""The step-throughs' presses without a browser (`specui.ui.teach_keys`): the walk over the presses, the event's
wiring, and the order of one page's moves through gradio's own processing (`Blocks.process_api`, the Teach tab over
a tiny pair). Clicks in one moment each start the event before gradio knows one runs, so the first takes every press
and the others none; those changed nothing. A page's events read the round shown when gradio starts them, so two at
once (a press and an auto-play tick, or two presses) both moved from the same round: one of them was lost, or the
slower showed a round older than the one already shown."""

from __future__ import annotations

import asyncio
import re

import gradio as gr
from gradio.state_holder import SessionState

from specui.ui import teach_keys, teaching
from tests.app.test_ui_teach_compare import PROMPT, tab  # noqa: F401 - tab: the Teach tab over a tiny pair


def test_each_press_moves_one_step_within_the_ends():
    assert teach_keys.walk(2, "++++", 23) == 6
    assert teach_keys.walk(20, "+++++--", 23) == 20  # stops at the last (22) on the way, then two back
    assert teach_keys.walk(0, "-+", 5) == 1 and teach_keys.walk(3, "", 5) == 3


def test_an_event_that_took_no_press_changes_nothing_and_visitors_are_not_queued_behind_each_other():
    with gr.Blocks() as demo:
        back, on, shown = gr.Button(elem_id="x-prev"), gr.Button(elem_id="x-next"), gr.State(teach_keys.Shown())
        step = gr.Number(0)

        def fn(presses, data):
            data[shown].move(None, teach_keys.walk(data[shown].index, presses, 10))
            return {step: data[shown].index}

        event = teach_keys.stepper("x", back=back, on=on, shown=shown, fn=fn, inputs=[shown], outputs=[step])
    wired = next(f for f in demo.fns.values() if f.fn is event.fn)
    page = teach_keys.Shown(None, 4)
    assert wired.fn("", page) == {step: gr.update()}  # not the step it read, shown over another event's result
    assert wired.fn("++", page) == {step: 6} and page.index == 6
    # one queue of its own, with no limit: a page's moves take turns on its own lock, not every visitor's
    assert wired.queue and wired.concurrency_limit is None and wired.trigger_mode == "always_last"
    assert wired.concurrency_id == "x-presses"


# -- one page's events at once, through gradio's processing -------------------------------------------------------


def _events(demo, ui):
    """The tab's Decode, its stepper and its auto-play tick, as gradio holds them."""
    fns = list(demo.fns.values())
    decode = next(f for f in fns if ui.controls.prompt in f.inputs and ui.run in f.outputs and ui.step.export
                  in f.outputs and f.fn.__name__ != "decode_first")
    stepper = next(f for f in fns if getattr(f.fn, "__qualname__", "") == "stepper.<locals>.handler"
                   and ui.step.view in f.outputs)
    tick = next(f for f in fns if getattr(f.fn, "func", None) is teaching.tick)
    return decode, stepper, tick


def _values(fn, given: dict) -> list:
    """The event's inputs as the page sends them (a State's value is the server's: the page sends none)."""
    return [given.get(block) for block in fn.inputs]


def _round(answer: dict, fn, view) -> int | None:
    """The round an answer shows in `view` (None: it leaves the view as it was)."""
    shown = answer["data"][fn.outputs.index(view)]
    found = re.search(r'data-round="(\d+)"', shown) if isinstance(shown, str) else None
    return int(found.group(1)) if found else None


def _decoded(demo, ui, decode) -> SessionState:
    """A page's session after Decode (greedy, K 1: many rounds)."""
    c, page = ui.controls, SessionState(demo)
    form = {c.prompt: PROMPT, c.preset: "tiny", c.drafter: "draft model", c.k: 1, c.confidence: 0.0,
            c.temperature: 0.0, c.penalty: 1.0, c.max_new: 24, c.seed: 1, ui.compare.second: "none"}
    asyncio.run(demo.process_api(decode, _values(decode, form), page))
    return page


def test_a_tick_and_presses_at_once_each_move_on_from_the_round_the_other_left(tab):  # noqa: F811
    demo, ui, _ = tab
    decode, stepper, tick = _events(demo, ui)
    page = _decoded(demo, ui, decode)

    def press(presses):
        return demo.process_api(stepper, _values(stepper, {stepper.inputs[0]: presses}), page)

    async def at_once():
        first = await press("++")  # round 3
        together = await asyncio.gather(demo.process_api(tick, _values(tick, {}), page), press("+"), press("+"))
        after = await press("+")
        return first, together, after

    first, together, after = asyncio.run(at_once())
    assert _round(first, stepper, ui.step.view) == 3
    shown = [_round(a, f, ui.step.view) for a, f in zip(together, (tick, stepper, stepper))]
    assert 6 in shown  # the last of the three moves shows its round ...
    assert all(r is None or r >= 4 for r in shown) and len({r for r in shown if r}) == len([r for r in shown if r])
    assert _round(after, stepper, ui.step.view) == 7  # ... and none was lost


def test_one_page_held_does_not_hold_another(tab):  # noqa: F811
    demo, ui, _ = tab
    decode, stepper, _ = _events(demo, ui)
    held, free = _decoded(demo, ui, decode), _decoded(demo, ui, decode)

    async def press(page):
        return await demo.process_api(stepper, _values(stepper, {stepper.inputs[0]: "+"}), page)

    async def both():
        with held[ui.index._id].lock:  # the held page's move in progress
            waiting = asyncio.ensure_future(press(held))
            moved = await asyncio.wait_for(press(free), timeout=30)
            assert not waiting.done()
        return moved, await asyncio.wait_for(waiting, timeout=30)

    moved, waited = asyncio.run(both())
    assert _round(moved, stepper, ui.step.view) == 2 and _round(waited, stepper, ui.step.view) == 2
