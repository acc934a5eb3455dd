"""The Chat tab's token trees: the tree settings (width, nodes) and the tree view, a round picked from the
last run's tree rounds drawn by `specui.ui.tree_chart`.

The session keeps each tree round of the speculative run as a `specui.tree_steps.TreeRecord` (`Run.trees`);
after a run, `after_run` hands them to the view's state and lists them in the round picker; picking a
round redraws the figure (`show`, no model call). The picker's change fires for a value the server sets too: after a
run the picker keeps the round on show (`TreeView.shown`, read by the chat's event) where the new run has it, so no
call follows, and where the page showed no tree the change draws the first round, not the run's answer as well.
Element ids: #tree-width #tree-nodes #tree-view #tree-round #chart-tree #tree-note.
"""

from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from specui.settings import MAX_TREE_WIDTH
from specui.tree_steps import TreeRecord
from specui.ui.tree_chart import tree_figure

SECTION = "Token trees: a tree round, node by node"  # the section's name in both tabs (the Teach tab's too)
CHAT_TREE_NODES = 64  # the tree nodes slider's top (the settings allow more; 64 keeps a verify forward small)
NODES_HELP = ("0 = the static tree: the top-w children of every node, to depth K. "
              "N = the dynamic (EAGLE-2) tree of N nodes, the chain of K always among them. "
              "On a CPU, 7 to 11 pay (9 best on the chat model): a verify of up to 12 tokens reads each weight once.")
EMPTY_NOTE = "Decode with tree width 2 or more (drafter: draft model, EAGLE or Medusa) to see each round's token tree."
QUIET = {"queue": False, "api_visibility": "private"}


def width_slider() -> gr.Slider:
    return gr.Slider(1, MAX_TREE_WIDTH, value=1, step=1, label="Tree width (1 = one chain of K drafts)",
                     info="children per expanded node of a token tree", elem_id="tree-width")


def nodes_slider() -> gr.Slider:
    return gr.Slider(0, CHAT_TREE_NODES, value=0, step=1, label="Tree nodes", info=NODES_HELP, elem_id="tree-nodes")


@dataclass
class TreeView:
    pick: gr.Dropdown  # the rounds with trees
    plot: gr.Plot
    note: gr.Markdown
    trees: gr.State  # round index -> TreeRecord, of the last run
    shown: gr.State  # the round the picker and the figure show (None: none), an input of the chat's event

    @property
    def outputs(self) -> list:
        return [self.trees, self.pick, self.plot, self.note, self.shown]


def tree_view() -> TreeView:
    """The view's components, in an accordion, inside the current `gr.Blocks`."""
    with gr.Accordion(SECTION, open=False, elem_id="tree-view"):
        note = gr.Markdown(EMPTY_NOTE, elem_id="tree-note")
        pick = gr.Dropdown([], value=None, label="Round", interactive=True, elem_id="tree-round")
        plot = gr.Plot(tree_figure(), elem_id="chart-tree", show_label=False)
    return TreeView(pick, plot, note, gr.State({}), gr.State(None))


def wire(view: TreeView) -> None:
    """A round picked redraws its tree (Tree width's event is the preset menu's: `preset_view.follow_chat`)."""
    view.pick.change(lambda trees, index: (show(trees, index), index), [view.trees, view.pick], [view.plot, view.shown],
                     **QUIET)  # input fired as the focus left it unchanged


def round_choices(trees: dict[int, TreeRecord]) -> list[tuple[str, int]]:
    """(label, round index) per tree round, in order: "round 3 · 14 nodes · 2 accepted + resampled"."""
    out = []
    for index in sorted(trees):
        r = trees[index]
        own = f" + {r.final_kind}" if r.final_kind else ""
        out.append((f"round {index + 1} · {len(r.nodes)} nodes · {len(r.path)} accepted{own}", index))
    return out


def _note(trees: dict[int, TreeRecord]) -> str:
    if not trees:
        return EMPTY_NOTE
    nodes = sum(len(r.nodes) for r in trees.values())
    accepted = sum(len(r.path) for r in trees.values())
    return (f"{len(trees)} tree rounds: {nodes} drafted nodes, {accepted} accepted. Pick a round; hover a node for "
            "its token, p, q, acceptance probability, draw and verdict. The thick green line is the accepted path.")


UNKNOWN = object()  # `after_run`'s `shown` where the page's is not known: the figure always comes with the answer


def after_run(view: TreeView, trees: dict[int, TreeRecord], shown=UNKNOWN) -> dict:
    """The view after a run: its tree rounds in the picker, the round on show before it (`shown`, the page's
    `TreeView.shown`) drawn where the run has it, else the first (or the empty view). The picker's value changes only
    where that round is gone, and its change (`wire`) then redraws the figure. Where it surely changes, the figure is
    left to it: from no tree to a tree round (a picker without choices: nothing was picked while the run went on) and
    from a round to none (a pick while the run went on was one of the last run's rounds). From one round to another it
    comes with the answer as well: a round picked while the run went on may be the one set, and no change follows."""
    choices = round_choices(trees)
    value = shown if shown is not UNKNOWN and shown in trees else (choices[0][1] if choices else None)
    out = {view.trees: dict(trees), view.pick: gr.update(choices=choices, value=value), view.note: _note(trees),
           view.shown: value}
    if shown is UNKNOWN or (shown is None) == (value is None):  # else the picker's change draws it, once
        out[view.plot] = tree_figure(trees.get(value) if value is not None else None)
    return out


def cleared(view: TreeView) -> dict:
    return after_run(view, {})


def show(trees: dict | None, index) -> object:
    """The picked round's tree (the placeholder when there is none)."""
    if not trees or index is None:
        return tree_figure()
    try:
        record = trees.get(int(index))
    except (TypeError, ValueError):
        record = None
    return tree_figure(record)
