"""What the page says of a preset, and how both tabs' drafter and K controls follow the preset chosen.

`about` is the line under the Chat tab's preset menu (the description, the memory it needs, where it runs,
its drafter and K); `on_preset` sets a tab's drafter and K from the preset chosen, `on_drafter` moves a K
slider to the K the preset gives the drafter chosen (`on_chat_drafter` the Chat tab's confidence slider too);
`tell_resets` gives the page those values, for a slider's ↺ and Escape (keys.js).

The Chat tab's confidence slider shows the floor its run takes: the preset's for the drafter on a chain, none on a
token tree (Tree width 2 or more), as `/generate` and `python -m specui` give a tree none unless one is named
(`Preset.confidence_for(tree=)`); `on_tree_width` moves it between the two as the width crosses 1, and a floor the
user set stays, which a tree then honours as the API honours one named.

In the Chat tab the preset menu, the drafter radio and Tree width are one event (`follow_chat`: `on_chat_controls`),
answered one at a time: gradio's page sends none of its calls while another is on its way (trigger mode always_last)
and sends the last one after it has landed, with the page's values by then. As three events, a preset picked and a
width moved at once each had its answer computed with the other's value as it was sent, and the one that landed last
left the slider where the stale one put it (a chain's 0.6 at width 2, say). What the controls last answered for
(`Followed`, held by the page beside them) tells the answer what changed since.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import gradio as gr

from specui.arena import k_said, stops_sooner
from specui.drafters import LABELS
from specui.drafters.registry import name_of
from specui.loading import pick_device
from specui.spaces import hardware_note
from specui.ui.render import markdown_text


def follow_preset(preset, *, k_max: int | None = None) -> tuple:
    """The drafter radio's and the K slider's updates for a preset chosen: its drafter at that drafter's K (at
    most `k_max`, the slider's end)."""
    return gr.update(value=LABELS[preset.drafter]), gr.update(value=_capped(preset.k_for(), k_max))


def on_preset(config, name: str | None, *, k_max: int | None = None) -> tuple:
    """`follow_preset` for a preset's name (no change for a name the config does not hold, nor for None: a list with
    no value)."""
    if name is None:
        return gr.skip(), gr.skip()
    try:
        return follow_preset(config.get(name), k_max=k_max)
    except ValueError:
        return gr.skip(), gr.skip()


def on_drafter(config, preset_name: str, drafter: str, *, k_max: int | None = None):
    """A preset that gives drafters their own K (`drafter_tokens`) moves the K slider to the chosen one's
    (at most `k_max`); other presets leave K alone."""
    try:
        preset = config.get(preset_name)
    except ValueError:
        return gr.skip()
    return gr.update(value=_capped(preset.k_for(name_of(drafter)), k_max)) if preset.drafter_tokens else gr.skip()


def on_chat_drafter(config, preset_name: str, drafter: str, width=1) -> tuple:
    """The Chat tab's drafter chosen: `on_drafter`'s K, and the confidence slider at the drafter's own
    `draft_confidence` where the preset gives drafters one (other presets leave it alone); at Tree width `width` 2
    or more, none (`is_tree`)."""
    k = on_drafter(config, preset_name, drafter)
    try:
        preset = config.get(preset_name)
    except ValueError:
        return k, gr.skip()
    return k, confidence_of(preset, name_of(drafter), width) if preset.draft_confidence else gr.skip()


def confidence_of(preset, drafter: str | None = None, width=1) -> dict:
    """The confidence slider's update for a preset (and drafter) chosen: its drafter's `draft_confidence` (0: always
    K); a token tree's (Tree width `width` 2 or more) 0, as /generate and the terminal give it."""
    return gr.update(value=preset.confidence_for(drafter, tree=is_tree(width)))


def is_tree(width) -> bool:
    """Whether the Tree width slider's value `width` asks for a token tree (2 or more; a value it cannot hold: no)."""
    try:
        return float(width) > 1
    except (TypeError, ValueError):
        return False


def on_tree_width(config, preset_name: str, drafter: str, width, confidence, was_tree=False) -> tuple:
    """Tree width moved (or put back by its ↺): the confidence slider from the floor the preset gives the shape the
    last width asked for (`was_tree`: a chain or a tree) to the new shape's, where it holds the first (`confidence`);
    a floor the user set stays, which the run honours, chain or tree, and so does any floor while the shape stays
    (width 2 -> 3 keeps a tree's floor set by hand). (The slider's update, whether the width asks for a tree now: the
    shape the next move starts from.)"""
    tree = is_tree(width)
    try:
        preset = config.get(preset_name)
    except ValueError:
        return gr.skip(), tree
    name = name_of(drafter)
    was, now = preset.confidence_for(name, tree=bool(was_tree)), preset.confidence_for(name, tree=tree)
    return (gr.update(value=now) if was != now and _same(confidence, was) else gr.skip()), tree


@dataclass(frozen=True)
class Followed:
    """What the Chat tab's K, drafter and confidence slider were last set for (`on_chat_controls`): the preset's name,
    the drafter's name and whether the width asked for a token tree. The page holds it (`follow_chat`) as
    `[preset, drafter, tree]`."""
    preset: str
    drafter: str
    tree: bool = False

    @classmethod
    def read(cls, held) -> Followed:
        """What the page holds (`[preset, drafter, tree]`; a Followed as it is); anything else: nothing followed, so a
        preset's answer follows."""
        if isinstance(held, Followed):
            return held
        try:
            preset, drafter, tree = held
        except (TypeError, ValueError):
            return cls("", "", False)
        return cls(str(preset), str(drafter), bool(tree))

    def held(self) -> list:
        """As the page holds it."""
        return [self.preset, self.drafter, self.tree]


def on_chat_controls(config, preset_name: str, drafter: str, width, confidence, followed) -> tuple:
    """The Chat tab's preset, drafter or Tree width changed (one event: `follow_chat`), with the page's values as they
    are and what the controls were last set for (`followed`, as the page holds it: `Followed.read`): a preset chosen
    brings its drafter, K and floor for the width's shape (`follow_preset`, `confidence_of`) and its line; else a
    drafter chosen its K and floor (`on_chat_drafter`); else a width across 1 the other shape's floor, where the
    slider holds the last one's (`on_tree_width`). (The K, drafter, confidence and preset line's updates, and what
    they are set for now, as the page holds it.)"""
    skip = gr.skip()
    try:
        preset = config.get(preset_name)
    except ValueError as e:
        return skip, skip, skip, f"⚠ {e}", skip
    tree, name, followed = is_tree(width), name_of(drafter), Followed.read(followed)
    if preset.name != followed.preset:
        drafter_now, k = follow_preset(preset)
        return (k, drafter_now, confidence_of(preset, width=width), about(preset),
                Followed(preset.name, preset.drafter, tree).held())
    k, floor = skip, skip
    if name != followed.drafter:
        k, floor = on_chat_drafter(config, preset.name, drafter, width)
    if "value" not in floor and tree != followed.tree:  # the new drafter's floor, else the slider's move across 1
        floor, _ = on_tree_width(config, preset.name, drafter, width, confidence, followed.tree)
    return k, skip, floor, skip, Followed(preset.name, name, tree).held()


def follow_chat(controls, config) -> None:
    """Wire the Chat tab's `controls` (blocks.Controls) to follow its preset menu, drafter radio and Tree width
    (`on_chat_controls`), one answer at a time (see the module docstring). Tree width's change, not its input: its ↺
    (and Escape on it) puts back 1 with a change alone. No progress shown: gradio's covers each output while a call is
    on its way, so a width moved hid the drafter radio, K and the preset's line behind a spinner that took the next
    click (a drafter picked just after was lost), as the Teach tab's preset list shows none (teaching.NAV). What the
    controls follow is held by the page (a hidden JSON), as long as the controls' own values: as a `gr.State` it went
    with the server's record of the session (gradio drops a closed tab's an hour on; a restart drops all), the page's
    controls staying, and a width moved then took the page's preset for a new pick, putting back its drafter and K
    over those the user had chosen."""
    c, preset = controls, config.get(None)
    followed = gr.JSON(Followed(preset.name, preset.drafter, is_tree(c.tree_width.value)).held(), visible=False)
    gr.on([c.preset.change, c.drafter.change, c.tree_width.change], lambda *values: on_chat_controls(config, *values),
          [c.preset, c.drafter, c.tree_width, c.confidence, followed],
          [c.k, c.drafter, c.confidence, c.about, followed], trigger_mode="always_last", queue=False,
          show_progress="hidden", api_visibility="private")


def _same(value, floor: float) -> bool:
    """Whether the slider's `value` is the preset's `floor` (as the slider holds it: within a step's rounding)."""
    try:
        return abs(float(value) - floor) < 1e-9
    except (TypeError, ValueError):
        return False


def tell_resets(demo: gr.Blocks, config, chat, teach) -> None:
    """Give the page (`window.specuiPresetValues`, read by keys.js) the value each preset sets K and the confidence
    stop to, for each drafter chosen, as the handlers above set them: a slider's ↺ (and Escape on it) put back
    gradio's first value, the default preset's, where the preset chosen had set another; the Chat tab's confidence at
    Tree width 2 or more, a tree's. `chat`, `teach`: the two tabs' controls (their preset menu, drafter radio and
    sliders); the Teach tab's confidence follows no preset."""
    followed = ((chat, chat.k, "k_for"), (chat, chat.confidence, "confidence_for"), (teach, teach.k, "k_for"))

    def each(slider, value: str, **shape) -> dict:  # preset name -> drafter label -> the slider's value
        return {name: {label: min(slider.maximum, getattr(config.get(name), value)(drafter, **shape))
                       for drafter, label in LABELS.items()} for name in config.names}

    values = {slider.elem_id: {"preset": tab.preset.elem_id, "drafter": tab.drafter.elem_id,
                               "values": each(slider, value)} for tab, slider, value in followed}
    # at Tree width 2 or more the Chat tab's confidence stop is a tree's (`on_tree_width`): keys.js reads the width
    values[chat.confidence.elem_id]["tree"] = {"width": chat.tree_width.elem_id,
                                               "values": each(chat.confidence, "confidence_for", tree=True)}
    demo.load(None, None, None, js=f"() => {{ window.specuiPresetValues = {json.dumps(values)}; }}", queue=False,
              api_visibility="private")


def _capped(k: int, k_max: int | None) -> int:
    return k if k_max is None else min(k_max, k)


def _own(preset, name: str) -> str:
    """A drafter's own K in the preset's line, with its own confidence stop where one may end its rounds sooner
    ("draft model ≤ 6 while confident ≥ 0.5", as the arena's table gives its K)."""
    k, confidence = preset.k_for(name), preset.confidence_for(name)
    stop = f" while confident ≥ {confidence:g}" if stops_sooner(k, confidence, name) else ""
    return f"{LABELS[name]} {k_said(k, confidence, name)}{stop}"


def about(preset) -> str:
    """The preset's description, the memory it needs, the hardware note, then its drafter and K (and the K and
    confidence stop of drafters that have their own) and whether it uses the chat template: Markdown, the description
    and memory as written (`markdown_text`)."""
    lines = [markdown_text(preset.description or "")]  # a models.yaml's words, shown as written: never markup
    if preset.memory:
        lines.append(f"*Needs {markdown_text(preset.memory)}.*")
    runs_on = "cuda" if (preset.device_map or pick_device(preset.device) != "cpu") else "cpu"
    note = hardware_note(runs_on)
    if note:
        lines.append(f"*{note}*")
    drafter = LABELS.get(preset.drafter, preset.drafter) + ("" if preset.draft else " (no draft model)")
    named = dict(preset.drafter_tokens).keys() | dict(preset.draft_confidence).keys()  # their own K or stop
    own = [_own(preset, name) for name in LABELS if name in named and name != preset.drafter]
    if preset.k_for() != preset.num_draft_tokens:  # the default drafter has a K of its own: say the rest's
        own.append(f"others {preset.num_draft_tokens}")
    own = ", ".join(own)
    confident = preset.confidence_for()  # said where it may end a round sooner (`stops_sooner`), as for the others
    while_confident = (f", drafting while confident ≥ {confident:g}"
                       if stops_sooner(preset.k_for(), confident, preset.drafter) else "")
    lines.append(f"Drafter: {drafter} · K = {preset.k_for()}{while_confident}{f' ({own})' if own else ''} · "
                 f"{'chat template' if preset.chat_template else 'base model: continues the prompt'}")
    return "\n\n".join(line for line in lines if line)
