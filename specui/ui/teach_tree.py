"""The Teach tab's token-tree stepper: decode the Teach prompt with a token tree, pick a round, and walk its
verification one judged child at a time (`specui.tree_steps`), the tree drawn beside each step
(`specui.ui.tree_chart`) and the step told in words (`specui.ui.teach_tree_view`).

`tree_panel(controls, work=..., concurrency_id=..., handed=...)` builds it inside the Teach tab: `controls` are the
tab's (prompt, preset, drafter, K, temperature, new tokens, seed; read by name through `controls.settings`),
`work` the tab's `GpuWork`, in one call of which its decode runs (one ZeroGPU allocation: `teach_work`), its holder's
`prepare(values)` checking them and loading the pair (the tab's settings check). Element ids:
#tree-step-width #tree-step-nodes #tree-step-start #tree-step-round #tree-step-prev #tree-step-next
#tree-step-status #tree-step-chart #tree-step-view.
"""

from __future__ import annotations

import functools
import html
from dataclasses import dataclass

import gradio as gr

from specui.settings import MAX_TREE_WIDTH, SettingsError
from specui.tree_steps import TreeRecord, tree_record, tree_steps
from specui.ui import teach_keys, teach_work
from specui.ui.chat_tree import CHAT_TREE_NODES, NODES_HELP, SECTION, round_choices
from specui.ui.request import in_page_words, seed_words
from specui.ui.teach_tree_view import TREE_HELP, render_tree_step
from specui.ui.toasts import calmly, refusal
from specui.ui.tree_chart import tree_figure

NAV = {"api_visibility": "private", "show_progress": "hidden", "queue": False}
# the Tree nodes slider's first value: a dynamic tree of 9, the size its help (NODES_HELP) says pays best on a CPU.
# 0, the static tree, was the default: at width 2, 126 nodes at K 6 (a chart about 2,400 px tall), 254 at K 7 and
# refused at the slider's K 8 (510). The Chat tab's slider starts at 0 as its width starts at 1, a chain, which takes
# no nodes (the settings refuse nodes without a tree)
TREE_NODES = 9


@dataclass
class TreePanel:
    width: gr.Slider
    nodes: gr.Slider
    start: gr.Button
    pick: gr.Dropdown  # the rounds with trees
    prev: gr.Button
    next: gr.Button
    status: gr.Markdown
    chart: gr.Plot
    view: gr.HTML
    trees: gr.State  # round index -> TreeRecord
    step: gr.State  # a `teach_keys.Shown`: the picked round's record and the step shown within it
    handed: gr.Number | None = None  # the Teach tab's count of messages handed to the page (teach_keys.handed_since)

    @property
    def shown(self) -> list:
        """What a move redraws."""
        return [self.chart, self.view]


def _layout() -> TreePanel:
    with gr.Accordion(SECTION, open=False, elem_id="teach-tree"):
        with gr.Row(equal_height=False):
            with gr.Column(scale=3, min_width=360):
                with gr.Row():
                    width = gr.Slider(2, MAX_TREE_WIDTH, value=2, step=1, label="Tree width",
                                      info="children per expanded node", elem_id="tree-step-width")
                    nodes = gr.Slider(0, CHAT_TREE_NODES, value=TREE_NODES, step=1, label="Tree nodes", info=NODES_HELP,
                                      elem_id="tree-step-nodes")
                with gr.Row():  # the round's list twice the button's width: an even split cut its label short
                    # ("round 1 · 126 nodes · 6 accepted + bonu", its arrow over the rest)
                    start = gr.Button("Decode with a tree", variant="primary", elem_id="tree-step-start", scale=1)
                    pick = gr.Dropdown([], value=None, label="Round", interactive=True, elem_id="tree-step-round",
                                       scale=2)
                with gr.Row():
                    prev = gr.Button("◀ Previous step", elem_id="tree-step-prev")
                    nxt = gr.Button("Next step ▶", elem_id="tree-step-next")
                status = gr.Markdown("", elem_id="tree-step-status")
                view = gr.HTML(render_tree_step(None, [], 0), elem_id="tree-step-view")
                chart = gr.Plot(tree_figure(), elem_id="tree-step-chart", show_label=False)
            with gr.Column(scale=2, min_width=280):
                gr.Markdown(TREE_HELP)
    return TreePanel(width, nodes, start, pick, prev, nxt, status, chart, view, gr.State({}),
                     gr.State(teach_keys.Shown()))


def tree_panel(controls, *, work, concurrency_id: str = "engine", handed: gr.Number | None = None) -> TreePanel:
    """Build and wire the stepper inside the current Teach tab (see the module docstring); `handed`, the tab's count
    of messages the Chat tab handed to the page, goes with each Decode with a tree (`decode`)."""
    panel = _layout()
    panel.handed = handed
    queued = {"concurrency_id": concurrency_id, "concurrency_limit": 1, "api_visibility": "private"}
    decoded = outputs(panel)
    inputs = controls.settings | {panel.width, panel.nodes, panel.step} | ({handed} if handed is not None else set())
    # a refused setting (a drafter that cannot draft trees, too wide a tree) says why in the status line, and the
    # tree and its steps keep what they showed: no red error state over the panel
    # its step buttons, status line and first step brought into view: the keys step the tree once it is on screen.
    # Clicked again while a decode is on its way (a wider tree, a changed mind), it decodes again after it (gradio's
    # default, "once", dropped that click: the trees were the first settings'), and the step the server holds is
    # drawn again through the stepping event after it: a step press's answer could land before Decode's (its step 1)
    teach_keys.redraw_after("tree-step", panel.start.click(
        calmly(functools.partial(decode, panel, controls, work), functools.partial(refused, panel)), inputs, decoded,
        js=teach_keys.into_view("tree-step-prev"), trigger_mode="always_last", **queued))
    # a round picked while the last pick's answer is on its way is answered after it (gradio's default, "once", dropped
    # it: the list named one round, the tree and its steps showed another), and the step the server holds is drawn
    # again through the stepping event after it: a press's answer and the pick's could land in either order.
    # `change`, not `input`: that fired as the focus left the list unchanged (a Tab through it), back to step 1
    teach_keys.redraw_after("tree-step", panel.pick.change(
        functools.partial(pick, panel), {panel.trees, panel.pick, panel.step}, panel.shown, trigger_mode="always_last",
        **NAV))
    # every press counts, however fast they come, and one page's presses take turns (teach_keys)
    teach_keys.stepper("tree-step", back=panel.prev, on=panel.next, shown=panel.step,
                       fn=functools.partial(pressed, panel), inputs=[panel.step], outputs=panel.shown, **NAV)
    return panel


# -- handlers (each gets the panel, and the inputs by component) ---------------------------------------------


def show(panel: TreePanel, shown: teach_keys.Shown, record: TreeRecord | None, index: int) -> dict:
    """Step `index` of `record` (clamped): the tree as judged so far and the step in words (the caller holds
    `shown`'s lock: `teach_keys.moving`)."""
    if record is None:  # no tree: a press without one moves nothing (a hand-off's clearing counts its moves)
        if shown.what is not None:
            shown.move(None, 0)
        return {panel.chart: tree_figure(), panel.view: render_tree_step(None, [], 0)}
    steps = tree_steps(record)
    index = max(0, min(index, len(steps) - 1))
    shown.move(record, index)
    return {panel.chart: tree_figure(record, step=steps[index]), panel.view: render_tree_step(record, steps, index)}


def decode(panel: TreePanel, controls, work, data: dict) -> dict:
    """Decode the Teach prompt with a tree (in one call of `work`); show the first tree round's first step. A message
    the Chat tab handed over since the click (`cleared`: not queued, it lands first; `teach_keys.handed_since`), while
    the decode waited in the engine's queue or ran, is left alone: the answer changes nothing (it put the last
    prompt's trees back beside the handed message)."""
    shown, handed = data[panel.step], data.get(panel.handed)
    if teach_keys.handed_since(shown, handed):  # handed as it waited: no run (a GPU call)
        return teach_keys.unchanged([panel.status])
    moves = shown.moves
    [(trees, note)] = work(decoded, teach_work.values(controls, data), data[panel.width], data[panel.nodes])
    choices = round_choices(trees)
    first = next((i for i in sorted(trees) if trees[i].nodes), choices[0][1] if choices else None)
    view = teach_keys.moving(shown, {}, _show_unless_cleared, panel, shown, (moves, handed), trees.get(first))
    if view is None:
        return teach_keys.unchanged([panel.status])
    return {panel.trees: trees, panel.pick: gr.update(choices=choices, value=first), panel.status: note, **view}


def _show_unless_cleared(panel: TreePanel, shown: teach_keys.Shown, since: tuple, record) -> dict | None:
    """`show`'s first step of `record`, or None when a hand-off cleared the step shown since (`since`: `shown`'s moves
    as the decode began and the page's count of hand-offs at the click): the caller holds `shown`'s lock
    (`teach_keys.moving`)."""
    return None if teach_keys.cleared_since(shown, since) else show(panel, shown, record, 0)


def outputs(panel: TreePanel) -> list:
    """What `cleared` changes (the count of hand-offs, `panel.handed`, is the Teach tab's: `teach_handoff`)."""
    return [panel.trees, panel.pick, panel.status, *panel.shown]


def cleared(panel: TreePanel, shown: teach_keys.Shown | None) -> dict:
    """The panel as a fresh page shows it, for a message the Chat tab hands to the Teach tab: no trees, no round to
    pick, no step; its Shown (`shown`, None: none to move) moved off the last prompt's tree and the hand-off counted
    (`teach_keys.handed_since`), so that a step press or a Decode with a tree clicked before it changes nothing of
    it."""
    if shown is not None:
        with shown.lock:
            shown.move(None, 0)
            shown.handed += 1
    return {panel.trees: {}, panel.pick: gr.update(choices=[], value=None), panel.status: "",
            panel.chart: tree_figure(), panel.view: render_tree_step(None, [], 0)}


def decoded(state, values: dict, width, nodes):
    """The decode's model work (a `GpuWork` task; `state` has the tab's `prepare`): the tree rounds' records by round
    index and the status line."""
    p, lock = state.prepare(values)
    try:
        settings = p.settings.decode.but(tree_width=int(width), tree_nodes=int(nodes))
    except SettingsError as e:
        raise refusal(in_page_words(str(e))) from None
    try:
        with lock:  # one engine run at a time, like every other generation
            result = p.engine.generate(p.ids, settings)
    except ValueError as e:  # e.g. a prompt longer than the context
        raise refusal(str(e)) from None
    trees, context = {}, list(p.ids)
    for rnd in result.rounds:
        if rnd.tree is not None:
            trees[rnd.index] = tree_record(rnd, tokenizer=p.pair.tokenizer, context_ids=context, greedy=settings.greedy)
        context += rnd.token_ids
    seed = seed_words(settings.greedy, result.seed)  # -1: the one drawn
    yield trees, (f"Decoded {len(result.token_ids)} tokens in {len(result.rounds)} rounds ({seed}) with trees of "
                  f"width {settings.tree_width} ("
                  f"{'static' if not settings.tree_nodes else f'{settings.tree_nodes} nodes'}); "
                  "pick a round and step through it.")


def refused(panel: TreePanel, text: str) -> dict:
    """What the panel says when Decode with a tree is refused (the rest keeps what it showed)."""
    return {panel.status: f"⚠ Not decoded: {html.escape(text)}"}


def _record(panel: TreePanel, data: dict) -> TreeRecord | None:
    trees, index = data[panel.trees] or {}, data[panel.pick]
    try:
        return trees.get(int(index)) if index is not None else None
    except (TypeError, ValueError):
        return None


def pick(panel: TreePanel, data: dict) -> dict:
    """The round picked, at its first step; the round on show moves nothing (the list set to it by a Decode with a
    tree, which shows it, or cleared by a hand-off): a step pressed meanwhile stays."""
    shown, unchanged = data[panel.step], teach_keys.unchanged(panel.shown)
    return teach_keys.moving(shown, unchanged, _picked, panel, shown, _record(panel, data), unchanged)


def _picked(panel: TreePanel, shown: teach_keys.Shown, record: TreeRecord | None, unchanged: dict) -> dict:
    return unchanged if shown.what == record else show(panel, shown, record, 0)  # under `shown`'s lock (`pick`)


def pressed(panel: TreePanel, presses: str, data: dict) -> dict:
    """The step after `presses` of Next step ("+") and Previous step ("-") in turn, from the step shown
    (`teach_keys`: the caller holds its lock)."""
    shown = data[panel.step]
    record = shown.what
    count = len(tree_steps(record)) if record is not None else 1
    return show(panel, shown, record, teach_keys.walk(shown.index, presses, count))
