"""The Teach tab's step-throughs driven by presses that come faster than the server answers (a clicker double-tapped,
→ held down), by the auto-play timer between them, and by many visitors at once: every press counts, in order.

The step shown is known only on the server: a `Shown` in a gr.State, one per page. The page counts the presses
itself (keys.js: a click on `#NAME-next` or `#NAME-prev`, by the mouse or by a key, adds "+" or "-" to NAME's
presses, and an auto-play tick, a click on the hidden `#NAME-tick`, adds "t") and one event serves all three buttons
with `trigger_mode="always_last"`: it takes every press made so far (its `js` empties the page's list into a hidden
box) and the server applies them one by one, each stopping at the first or last step as a click would. So a page has
one stepping event in flight at a time, and its answers reach the page in the order they moved the step (gradio
sends an answer after the event ran: two events of one page at once could arrive in either order). An event of the
page that changed what is shown another way (a Decode, Next's first decode, a refresh's decode, a second drafter
picked; a Decode with a tree, a tree round picked; the Chat tab's hand-off of a message, which clears both
step-throughs) asks for the step shown to be drawn again through it (`redraw_after`: a press "=" of the hidden
#NAME-redraw, one for each step-through it changed), so whatever answer landed before, the page ends on the step the
server holds. Each page's moves take turns on its `Shown`'s lock, each starting from the step the one before it
left; other pages' events run beside them. Pure functions and the wiring, no HTML.
"""

from __future__ import annotations

import json
import threading

import gradio as gr

MAX_PRESSES = 1000  # more presses than any step-through has steps: the rest cannot move it further


def into_view(elem_id: str) -> str:
    """A click's `js` that brings #`elem_id` to the top of the screen, the click's inputs passed on as they are: a
    run's button at the foot of a projector's screen (reached with Tab) had its steps decoded below it, out of sight,
    where →/PageDown (keys.js: a step-through on screen) did not reach them."""
    return (f"(...values) => {{ document.querySelector('#{elem_id}')?.scrollIntoView({{block: 'start'}}); "
            "return values; }")


def walk(index: int, presses: str, count: int) -> int:
    """`index` after each press in turn ("+" or an auto-play tick "t" on, "-" back, "=" a redraw: no move), kept
    within 0 … count − 1 as each press is made."""
    return played(index, presses, count)[0]


def played(index: int, presses: str, count: int) -> tuple[int, bool]:
    """(`walk`'s index, whether an auto-play tick found the last step shown: the auto-play ends there)."""
    ended = False
    for press in (presses or "")[:MAX_PRESSES]:
        if press in "+-t":
            ended = ended or (press == "t" and index >= count - 1)
            index = max(0, min(count - 1, index + (-1 if press == "-" else 1)))
    return index, ended


class Shown:
    """What one page's step-through shows: `what` (a run, a tree round's record), the step `index`, and `beside`
    (what is drawn beside each step and must follow it: the rounds' second drafter's comparison, or None).

    A gr.State's value (`gr.State(Shown())`): gradio copies the first value for each page and then hands every event
    of that page this object itself, and forgets it with the page's session (gradio keeps a bounded number of them),
    so nothing here grows with the visitors. An event reads and moves it under `lock` (`move`), so a page's moves
    take turns, each from the step the one before it left, without waiting on other pages'. Events get the object
    itself, not a copy: a value read before the lock could be one the move before changed since. `beside` lives here,
    not in a gr.State of its own: an event reads a State's value as it starts, so a step that started before the
    comparison's answer had stored it drew the round without it (or with the last drafter's)."""

    def __init__(self, what=None, index: int = 0, beside=None):
        self.what, self.index, self.beside, self.moves = what, index, beside, 0
        self.handed = 0  # the messages the Chat tab handed to this page (`handed_since`)
        self.lock = threading.Lock()

    def __deepcopy__(self, memo) -> Shown:  # gradio's copy for a new page: a lock of its own
        return Shown(self.what, self.index, self.beside)

    def move(self, what, index: int, beside=None) -> Shown:
        """Show step `index` of `what`, with `beside` (the caller holds `lock`, as `moving` does)."""
        self.what, self.index, self.beside, self.moves = what, index, beside, self.moves + 1
        return self


def moving(shown: Shown, unchanged: dict, fn, *args) -> dict:
    """`fn(*args)`'s answer, run under `shown`'s lock; `unchanged` when a move came after it before this answer could
    leave: that one shows a later step, and this one might reach the page after it. `fn` may move `shown` or only
    draw its step again (with a new `beside`: a move would drop the answer of a step it crossed, which the page's
    memory of the step was in)."""
    with shown.lock:
        answer = fn(*args)
        mine = shown.moves
    return unchanged if shown.moves != mine else answer


def handed_since(shown: Shown, handed) -> bool:
    """Whether the Chat tab handed a message to the page (teach_handoff) after the click that sent `handed`, the
    page's count of them then (a hidden number the hand-off sets; None: not sent, nothing to tell). A click's inputs
    are the page's at the click, its `Shown` the server's when it runs: a Decode that waited in the engine's queue
    as a message was handed over (not queued: it lands first) would put the last prompt's run back beside it."""
    return handed is not None and int(handed) != shown.handed


def cleared_since(shown: Shown, since: tuple) -> bool:
    """Whether a hand-off cleared the step shown since a decode began (`since`: `shown`'s moves then and the page's
    count of hand-offs at the click): its answer then changes nothing. The caller holds `shown`'s lock."""
    moves, handed = since
    return handed_since(shown, handed) or (shown.what is None and shown.moves != moves)


def on_pick(menu: gr.Dropdown, elem_id: str, fn, inputs, outputs, **event):
    """Wire `fn` to a pick in the list `menu` (#`elem_id`), by the mouse or by the keys: one server call a pick, none
    where the list is left as it came (a Tab through it). Gradio 6 fires a Dropdown's `input` as the focus leaves it,
    unchanged too, and twice for a pick by the mouse (as it is picked, then as the focus leaves it), and `select` for a
    pick by the mouse alone. The page tells a pick from the rest (keys.js's `specuiPick`: the list's value is not the
    one it had as the focus came) and clicks a hidden button (#`elem_id`-picked, made here), whose click is `fn`'s
    event (`event`: its options). Returns that event."""
    hidden = gr.Button("Picked", visible="hidden", elem_id=f"{elem_id}-picked")  # clicked by the page, never a user
    click = f"document.querySelector('#{elem_id}-picked')?.click()"  # keys.js not there (it always is): every input
    menu.input(None, [menu], None,
               js=f"(value) => {{ window.specuiPick ? window.specuiPick({elem_id!r}, value) : {click}; }}")
    return hidden.click(fn, inputs, outputs, **event)


def unchanged(outputs: list) -> dict:
    """An answer that changes none of `outputs` (gradio reads an empty dict as one value: an error)."""
    return {outputs[0]: gr.update()}


def stepper(name: str, *, back: gr.Button, on: gr.Button, shown: gr.State, fn, inputs: list, outputs: list,
            tick: gr.Button | None = None, **event):
    """Wire `back` and `on` (ids #NAME-prev and #NAME-next), `tick` (#NAME-tick, hidden: an auto-play's timer
    clicks it, `ticking`) if given, and a hidden #NAME-redraw made here (`redraw_after`) to one event
    `fn(presses, data)`: `presses` the "+"/"-"/"t"/"=" string of the presses taken, `data` the other `inputs` by
    component; `shown` (one of `inputs`, its value a `Shown`) is locked while `fn` runs, and `fn` moves it (a
    redraw "=" to the step it shows). Returns the event.

    Clicks in one moment (a burst of keys handled in one go) each start the event before gradio knows one runs, so
    `always_last` does not hold them all back: the first takes every press and the others none. So an event that
    took none changes nothing (it would show the step it read, over the first's). The events are not limited to one
    at a time (one visitor's presses would wait behind every other's): the lock keeps each page's in turn."""
    box = gr.Textbox("", visible=False)  # carries the presses: its value comes from the page, never from a user
    redraw = gr.Button("Redraw", visible="hidden", elem_id=f"{name}-redraw")  # clicked by the page (redraw_after)

    def handler(presses, *values):
        if not presses:
            return unchanged(outputs)
        data = dict(zip(inputs, values))
        return moving(data[shown], unchanged(outputs), fn, presses, data)

    take = f"(presses, ...rest) => [window.specuiTakePresses ? window.specuiTakePresses({name!r}) : '', ...rest]"
    event = {**event, "queue": True, "concurrency_id": f"{name}-presses", "concurrency_limit": None}
    triggers = [on.click, back.click, redraw.click] + ([tick.click] if tick is not None else [])
    return gr.on(triggers, handler, [box, *inputs], outputs, js=take, trigger_mode="always_last",
                 **event)


def ticking(name: str, timer: gr.Timer) -> None:
    """Make each of `timer`'s ticks a press of NAME's hidden tick button, in the page (no server call of its own):
    the tick takes its turn with the presses in NAME's one stepping event (`stepper`)."""
    timer.tick(None, None, None, js=f"() => {{ window.specuiTick && window.specuiTick({name!r}); }}")


def paced(lo: float, hi: float) -> str:
    """The `js` of a seconds-per-step slider's `change` whose one output is the auto-play's timer: its interval set in
    the page, no server call (Escape or the ↺ on the slider at its value fired `change` too, a call that changed
    nothing); a value out of [`lo`, `hi`], which the slider does not send (its box is committed within them), would
    leave it as it was."""
    return f"(seconds) => {{ const s = Number(seconds); return s >= {lo!r} && s <= {hi!r} ? s : undefined; }}"


def unless_shown(on: gr.Button, shown: str, elem_id: str) -> gr.Button:
    """A hidden button (#`elem_id`, returned) that a click of `on` clicks, in the page (no server call of its own),
    only while nothing on the page matches the selector `shown` (no step on show): the event that decodes a first run
    goes on it, so that a press with a step on show sends its step alone. (An answer of its own, a no-op with a step on
    show, waited its turn in the engine's queue behind every visitor's runs, then a redraw after it.) The page shows a
    step only once the server holds its run; before, the event on the button checks on the server."""
    hidden = gr.Button("First", visible="hidden", elem_id=elem_id)
    on.click(None, None, None, js=f"() => {{ if (!document.querySelector({json.dumps(shown)})) "
                                  f"document.querySelector('#{elem_id}')?.click(); }}")
    return hidden


def redraw_after(name: str, event) -> None:
    """Once `event` (an event listener's dependency) has answered, draw NAME's step shown again through its stepping
    event (a press "=", in the page: no server call of its own). `event` changed what is shown (`Shown`) and may have
    drawn it; a press's answer and its own reach the page in either order, so the last one could show a step the
    server has left: the redraw, one of the stepping event's answers in order, shows the step the server holds."""
    event.then(None, None, None, js=f"() => {{ window.specuiRedraw && window.specuiRedraw({name!r}); }}")
