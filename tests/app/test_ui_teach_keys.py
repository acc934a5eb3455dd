"""The step-throughs' presses without a browser (`specui.ui.teach_keys`): the walk over the presses, the event's
wiring, and the order of one page's moves through gradio's own processing (`Blocks.process_api`, the Teach tab over
a tiny pair). Clicks in one moment each start the event before gradio knows one runs, so the first takes every press
and the others none; those changed nothing. A page's events read the round shown when gradio starts them, so two at
once (a press and an auto-play tick, or two presses) both moved from the same round: one of them was lost, or the
slower showed a round older than the one already shown. The auto-play's ticks are presses ("t") of the same event,
never an event of their own: gradio sends an answer after the event ran, so a tick's and a press's answers, two
events at once, reached the page in either order (an older round shown after a newer one)."""

from __future__ import annotations

import asyncio
import re

import gradio as gr
from gradio.state_holder import SessionState

from specui.ui import teach_keys
from tests.app.test_ui_teach_compare import PROMPT, tab  # noqa: F401 - tab: the Teach tab over a tiny pair


def test_each_press_moves_one_step_within_the_ends():
    assert teach_keys.walk(2, "++++", 23) == 6
    assert teach_keys.walk(20, "+++++--", 23) == 20  # stops at the last (22) on the way, then two back
    assert teach_keys.walk(0, "-+", 5) == 1 and teach_keys.walk(3, "", 5) == 3
    assert teach_keys.walk(2, "t+t", 23) == 5  # a tick steps on as Next does


def test_a_tick_that_finds_the_last_step_ends_the_auto_play():
    assert teach_keys.played(3, "tt", 5) == (4, True)  # round 5 of 5 reached, then a tick found it: Play ends
    assert teach_keys.played(3, "t", 5) == (4, False)  # reached: shown while Play runs, the next tick ends it
    assert teach_keys.played(4, "++-", 5) == (3, False)  # presses never end it


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
    """The tab's Decode and its stepper (Next, Previous and the auto-play's ticks), as gradio holds them."""
    fns = list(demo.fns.values())
    decode = next(f for f in fns if ui.controls.prompt in f.inputs and ui.run in f.outputs and ui.step.export
                  in f.outputs and f.fn.__name__ != "decode_first")
    stepper = next(f for f in fns if getattr(f.fn, "__qualname__", "") == "stepper.<locals>.handler"
                   and ui.step.view in f.outputs)
    return decode, stepper


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


def test_the_auto_play_ticks_are_presses_of_the_one_stepping_event(tab):  # noqa: F811
    demo, ui, _ = tab
    _, stepper = _events(demo, ui)
    ticks = [f for f in demo.fns.values() if any(t[0] == ui.timer._id and t[1] == "tick" for t in f.targets)]
    # the timer's tick runs in the page alone (a press of #step-tick), no event of its own that moves the round
    assert ticks and all(f.fn is None and "specuiTick('step')" in f.js for f in ticks)
    assert (ui.controls.tick._id, "click") in stepper.targets and ui.controls.tick.elem_id == "step-tick"
    assert ui.controls.tick.visible == "hidden"  # in the page for the timer to click, never seen


def test_a_tick_at_the_last_round_ends_the_auto_play(tab):  # noqa: F811
    demo, ui, _ = tab
    decode, stepper = _events(demo, ui)
    page = _decoded(demo, ui, decode)
    rounds = len(page[ui.index._id].what.steps)

    def press(presses):
        return asyncio.run(demo.process_api(stepper, _values(stepper, {stepper.inputs[0]: presses}), page))

    playing = press("t" * (rounds - 1))
    assert _round(playing, stepper, ui.step.view) == rounds  # the last round shown, the auto-play still on
    assert playing["data"][stepper.outputs.index(ui.controls.play)] == gr.update()
    ended = press("t")
    assert ended["data"][stepper.outputs.index(ui.controls.play)]["value"] == "▶ Play"
    assert ended["data"][stepper.outputs.index(ui.timer)]["active"] is False
    assert _round(ended, stepper, ui.step.view) == rounds


def test_play_and_pause_do_what_the_button_said_when_it_was_clicked(tab):  # noqa: F811
    """A Pause clicked as the last round's tick ended the auto-play (that answer still on its way, so the button
    still read Pause) turned the auto-play back on: the server flipped its own play state. The page drops ticks from
    a Pause click on (keys.js), so the button then stayed at Pause with nothing playing (CI, stop 96)."""
    demo, ui, _ = tab
    decode, stepper = _events(demo, ui)
    page = _decoded(demo, ui, decode)
    play = next(f for f in demo.fns.values() if (ui.controls.play._id, "click") in f.targets)

    def click(label):
        answer = asyncio.run(demo.process_api(play, _values(play, {ui.controls.play: label, ui.controls.speed: 0.5}),
                                              page))["data"]
        return answer[play.outputs.index(ui.controls.play)]["value"], answer[play.outputs.index(ui.timer)]["active"]

    assert click("▶ Play") == ("❚❚ Pause", True)
    asyncio.run(demo.process_api(stepper, _values(stepper, {stepper.inputs[0]: "t" * 99}), page))  # ended: Play
    assert click("❚❚ Pause") == ("▶ Play", False)  # clicked before the page heard it had ended: still paused
    assert click("❚❚ Pause") == ("▶ Play", False) and click("▶ Play") == ("❚❚ Pause", True)


def test_a_tick_and_presses_at_once_each_move_on_from_the_round_the_other_left(tab):  # noqa: F811
    demo, ui, _ = tab
    decode, stepper = _events(demo, ui)
    page = _decoded(demo, ui, decode)

    def press(presses):
        return demo.process_api(stepper, _values(stepper, {stepper.inputs[0]: presses}), page)

    async def at_once():
        first = await press("++")  # round 3
        together = await asyncio.gather(press("t"), press("+"), press("+"))
        after = await press("+")
        return first, together, after

    first, together, after = asyncio.run(at_once())
    assert _round(first, stepper, ui.step.view) == 3
    shown = [_round(a, stepper, ui.step.view) for a in together]
    assert 6 in shown  # the last of the three moves shows its round ...
    assert all(r is None or r >= 4 for r in shown) and len({r for r in shown if r}) == len([r for r in shown if r])
    assert _round(after, stepper, ui.step.view) == 7  # ... and none was lost


def test_one_page_held_does_not_hold_another(tab):  # noqa: F811
    demo, ui, _ = tab
    decode, stepper = _events(demo, ui)
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
