"""The Chat tab's "Step through this message in the Teach tab", with the settings the message ran with.

`chat_handlers.to_teach` fills the Teach tab from the chat's controls; a teacher who moved K or the temperature
after the message (or ran it with Seed -1, which drew the seed it ran with) would then step through another run than
the one on screen. Here the controls' values are replaced by those of the message's run, read from its JSON (the
chat's download, written when the run finished, hidden when another starts): its preset, drafter, K, confidence stop,
temperature, top-p, top-k, penalty, token budget, seed and system prompt (the Teach tab decodes the message after it
and the conversation before it, as the chat did: `to_teach`).
"""

from __future__ import annotations

import json
import logging

from specui.drafters import LABELS
from specui.ui import teach_keys, teach_tree
from specui.ui.chat_handlers import to_teach, to_teach_outputs

log = logging.getLogger("specui.ui")
UNKNOWN = "This message's own settings are not known here: these are the Chat tab's settings as they are now."
# once the Teach tab shows (it opens with the answer, and is built when first shown), the page scrolls to its prompt,
# Decode and status line: all three where the screen holds them, else Decode and the status line at the screen's foot
# with what it holds of the prompt above, else (a phone: the settings come between) the prompt and Decode. The page
# stayed scrolled where the chat's button was, on the Teach tab's charts. Decode takes the keyboard's focus (the
# button pressed is hidden now) without scrolling again, described by the status line: a screen reader says what came
# over and what the Teach tab changed of it (K, top-p, the conversation), which is neither focused nor live and, on
# a phone, below the screen.
SHOW_LESSON = """() => { let frames = 0; const look = () => {
  const q = (id) => document.querySelector(id)?.getBoundingClientRect();
  const prompt = q('#teach-prompt'), start = q('#step-start'), status = q('#step-status');
  if (!prompt || !start || !status || !status.height) { if (++frames < 600) requestAnimationFrame(look); return; }
  const fits = (top, bottom) => bottom - top + 16 <= window.innerHeight, low = status.bottom + 8 - window.innerHeight;
  const by = fits(prompt.top, status.bottom) || !fits(start.top, status.bottom) ? prompt.top - 8 : low;
  window.scrollBy({top: by, behavior: 'instant'});
  const decode = document.querySelector('#step-start');
  if (decode) { decode.setAttribute('aria-describedby', 'step-status'); decode.focus({preventScroll: true}); } };
  look(); }"""


def as_it_ran(controls, data: dict, export: str | None, reply: str | None, *, max_seed: int
              ) -> tuple[dict, list[str]]:
    """`data` (the chat's inputs by component; `controls` is `blocks.Controls`) with each setting as the run of
    `export` (its JSON's path) took it, and what the Teach tab leaves out of that run; `data` as it is (and a note
    saying so) where the JSON cannot be read or is another message's (its reply is not `reply`, the last one kept:
    ↶ took the message back). A seed -1 drew comes with it (`request.seeded`: short enough for the Seed box); one above
    `max_seed` (the seed box's most: an API client's of 63 bits) stays out, which a page's number cannot hold."""
    try:
        with open(export, encoding="utf-8") as f:
            ran = json.load(f)
        if ran["text"] != reply:
            raise ValueError("the download is another message's")
        s = ran["settings"]
        seed = ran["seed"] if ran.get("seed") is not None else s["seed"]
        values = {controls.preset: ran["preset"] or s["preset"], controls.drafter: LABELS[s["drafter"]],
                  controls.k: s["num_draft_tokens"], controls.adaptive: s["adaptive"],
                  controls.confidence: s["draft_confidence"], controls.temperature: s["temperature"],
                  controls.top_p: s["top_p"], controls.top_k: s["top_k"], controls.penalty: s["repetition_penalty"],
                  controls.max_new: s["max_new_tokens"], controls.seed: -1 if seed is None or seed > max_seed else seed,
                  controls.system: s["system"]}
    except (OSError, TypeError, ValueError, KeyError) as e:  # no download (its write failed), or not one of ours
        log.warning("the message's run JSON: %s", e)
        return data, [UNKNOWN]
    left = ["Adaptive K is off here: each round drafts K." if s["adaptive"] else ""]
    return {**data, **values}, [note for note in left if note]


def step_through(ui, teach, data: dict, *, max_seed: int, chats=None) -> dict:
    """`chat_handlers.to_teach` for the chat's last message, with the settings its run took (`as_it_ran`), and the
    token-tree stepper cleared (`teach_tree.cleared`: its trees were the last prompt's); `chats` as `to_teach` takes
    it. The page's count of hand-offs (`teach.handed`) goes up with both Shown's: a Decode clicked before the hand-off
    and answered after it, having waited in the engine's queue, then changes nothing."""
    last, turns = data[ui.exchanges][-1:], data[ui.turns]
    reply = turns[-1]["content"] if last and last[0]["kept"] and turns else None
    sent, notes = as_it_ran(ui.controls, data, data[ui.results.export], reply, max_seed=max_seed)
    updates = to_teach(ui, teach, sent, chats=chats)
    if updates and notes:
        updates[teach.step.status] = " ".join([updates[teach.step.status], *notes])
    if updates:
        updates.update(teach_tree.cleared(teach.tree, data.get(teach.tree.step)))
        shown = data.get(teach.index)  # moved off the lesson by `to_teach`; the hand-off counted, as the tree's
        if shown is not None:
            with shown.lock:
                shown.handed += 1
            updates[teach.handed] = shown.handed  # the page's count, sent with each Decode (teach_keys.handed_since)
    return updates


def outputs(ui, teach) -> list:
    """What `step_through` may change: its event's outputs (gradio refuses an update of anything else)."""
    return to_teach_outputs(ui, teach) + teach_tree.outputs(teach.tree) + [teach.handed]


def wire(ui, teach, *, max_seed: int, chats=None) -> None:
    """The Chat tab's "Step through this message in the Teach tab" (`ui.results.to_teach`): `step_through` (the Teach
    tab's step-through and tree stepper cleared, the page's steps shown, `teach.index` and `teach.tree.step`, moved
    off the last lesson and the browser's memory, `teach.memory`, off its round: inputs), then the page scrolled to
    the Teach tab's prompt (`SHOW_LESSON`). Both steps shown are drawn again through their stepping events after it
    (`teach_keys.redraw_after`): a step answered just before it (an auto-play tick) could land after it, and put the
    last lesson's round on the page and in the browser's memory."""
    inputs = {ui.exchanges, ui.turns, ui.results.export, teach.index, teach.compare.second, teach.memory,
              teach.tree.step}
    inputs |= ui.controls.inputs
    click = ui.results.to_teach.click(lambda data: step_through(ui, teach, data, max_seed=max_seed, chats=chats),
                                      inputs, outputs(ui, teach), queue=False, api_visibility="private")
    click.then(None, None, None, js=SHOW_LESSON, queue=False, api_visibility="private")
    teach_keys.redraw_after("step", click)
    teach_keys.redraw_after("tree-step", click)
