"""The Teach tab's step-throughs driven by presses that come faster than the server answers (a clicker double-tapped,
→ held down): every press of Next or Previous counts, in order.

The round shown is known only on the server, and gradio runs one event of a button at a time. So the page counts
the presses itself (keys.js: a click on `#NAME-next` or `#NAME-prev`, by the mouse or by a key, adds "+" or "-" to
NAME's presses) and one event serves both buttons with `trigger_mode="always_last"`: it takes every press made
so far (its `js` empties the page's list into a hidden box) and the server applies them one by one, each stopping
at the first or last step as a click would. Presses made while it runs wait, and the event runs once more after
it with all of them. Pure functions and the wiring, no HTML.
"""

from __future__ import annotations

import gradio as gr

MAX_PRESSES = 1000  # more presses than any step-through has steps: the rest cannot move it further


def walk(index: int, presses: str, count: int) -> int:
    """`index` after each press in turn ("+" on, "-" back), kept within 0 … count − 1 as each press is made."""
    for press in (presses or "")[:MAX_PRESSES]:
        if press in "+-":
            index = max(0, min(count - 1, index + (1 if press == "+" else -1)))
    return index


def stepper(name: str, *, back: gr.Button, on: gr.Button, fn, inputs: list, outputs: list, **event):
    """Wire `back` and `on` (ids #NAME-prev and #NAME-next) to one event `fn(presses, data)`: `presses` the
    "+"/"-" string of the presses taken, `data` the other `inputs` by component. Returns the event.

    Clicks in one moment (a burst of keys handled in one go) each start the event before gradio knows one runs, so
    `always_last` does not hold them all back: the first takes every press and the others none. So an event that
    took none changes nothing (it would show the step it read, over the first's), and the events run one at a time
    in their order (a queue of their own), each reading the step the one before it left."""
    box = gr.Textbox("", visible=False)  # carries the presses: its value comes from the page, never from a user

    def handler(presses, *values):
        return fn(presses, dict(zip(inputs, values))) if presses else {}

    take = f"(presses, ...rest) => [window.specuiTakePresses ? window.specuiTakePresses({name!r}) : '', ...rest]"
    event = {**event, "queue": True, "concurrency_id": f"{name}-presses", "concurrency_limit": 1}
    return gr.on([on.click, back.click], handler, [box, *inputs], outputs, js=take, trigger_mode="always_last",
                 **event)
