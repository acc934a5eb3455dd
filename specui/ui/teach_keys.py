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
    "+"/"-" string of the presses taken, `data` the other `inputs` by component. Returns the event."""
    box = gr.Textbox("", visible=False)  # carries the presses: its value comes from the page, never from a user

    def handler(presses, *values):
        return fn(presses or "", dict(zip(inputs, values)))

    take = f"(presses, ...rest) => [window.specuiTakePresses ? window.specuiTakePresses({name!r}) : '', ...rest]"
    return gr.on([on.click, back.click], handler, [box, *inputs], outputs, js=take, trigger_mode="always_last",
                 **event)
