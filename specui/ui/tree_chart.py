"""One tree round drawn: `tree_figure(record, step=None)`, a plotly figure of a `specui.tree_steps.TreeRecord`.

Nodes are laid out by depth (x: 0 the root, the last token so far; 1 its children...) and stacked so
that each parent sits beside its children (y: leaves in drafting order, a parent at its children's mean).
Edges join children to parents; the accepted path is drawn thick; nodes are coloured and shaped by
verdict (accepted a filled circle, rejected an x, never judged a hollow circle: not by colour alone) and the
round's own token (resampled a diamond, bonus a star) hangs off the last accepted node. Hovering a node shows
its token text, id, p, q, and, once judged, its acceptance probability, draw and verdict. With a `step`
(`specui.tree_steps.TreeStep`, the Teach tab), only what was judged up to that step is coloured and told on hover,
the child judged at that step is ringed, and the round's own token appears at the end.

Token texts are model output: they reach plotly as plain text, with & < > escaped (plotly would read a
few HTML tags in text) and whitespace made visible. Pure functions, no gradio.
"""

from __future__ import annotations

import html

import plotly.graph_objects as go

from specui.text import fmt, fmt_prob
from specui.tree_steps import END, TreeRecord, TreeStep
from specui.ui.theme import BEST_COLOUR, PLAIN_COLOUR, POINT_COLOUR, SPEC_COLOUR, layout, noted

VERDICT_COLOURS = {"accepted": BEST_COLOUR, "rejected": POINT_COLOUR, "unvisited": "#d1d5db"}
FINAL_COLOURS = {"resampled": "#b91c1c", "bonus": SPEC_COLOUR}
# each kind has a shape of its own as well as a colour, for a colour-blind student (green and red alone read as one
# olive to a deuteranope); a never-judged node is a hollow circle, an accepted one a filled circle
VERDICT_SYMBOLS = {"accepted": "circle", "rejected": "x", "unvisited": "circle"}
FINAL_SYMBOLS = {"resampled": "diamond", "bonus": "star"}
LABEL_CHARS = 14  # a node's label is cut to this many characters (the hover text has it whole)
ROW_PX = 26  # vertical room per leaf
FINAL = "final"  # the round's own token, in `positions`


def plain_label(text: str, *, limit: int | None = LABEL_CHARS) -> str:
    """A token's text for plotly: whitespace made visible, cut to `limit`, then & < > escaped."""
    shown = text.replace(" ", "␣").replace("\n", "↵").replace("\r", "⇤").replace("\t", "⇥") or "∅"
    if limit is not None and len(shown) > limit:
        shown = shown[: limit - 1] + "…"
    return html.escape(shown, quote=False)


def positions(record: TreeRecord) -> dict:
    """node (-1 the root, FINAL the round's own token) -> (x, y): x its depth, y its row (leaves 0, 1, 2...
    top to bottom in drafting order; a parent at the mean of its children's rows)."""
    kids: dict = {}
    for i, node in enumerate(record.nodes):
        kids.setdefault(node.parent, []).append(i)
    if record.final_id is not None:  # the round's own token: a child of the last accepted node, drawn last
        kids.setdefault(record.path[-1] if record.path else -1, []).append(FINAL)
    out: dict = {}
    next_row = [0]

    def place(node, depth: int) -> float:
        children = kids.get(node, [])
        if not children:
            row = next_row[0]
            next_row[0] += 1
        else:
            rows = [place(child, depth + 1) for child in children]
            row = sum(rows) / len(rows)
        out[node] = (depth, row)
        return row

    place(-1, 0)
    return out


def _hover(record: TreeRecord, i: int, *, unjudged: str | None = None, path=()) -> str:
    """Node `i`'s hover text: its place, token, p and q, and once judged (`unjudged` None) its acceptance probability,
    draw and verdict, on `path` (the accepted path so far) or not; a node not judged (yet) says `unjudged` instead of
    those three: at a step before its turn they gave its verdict away (and the acceptance probability, computed only
    for the nodes judged, whether it ever would be)."""
    n = record.nodes[i]
    where = "a child of the root" if n.parent < 0 else f"a child of node {n.parent}"
    lines = [f"node {i}, {where}, depth {record.depth(i)}",
             f"token “{plain_label(record.texts[i], limit=None)}” (id {n.token_id})",
             f"p(x) = {fmt_prob(n.target_prob)} · q(x) = {fmt_prob(n.draft_prob)} (at its parent)"]
    if unjudged is not None:
        return "<br>".join([*lines, f"verdict: {unjudged}"])
    lines += [f"acceptance probability = {fmt_prob(n.accept_prob)}",
              f"draw r = {fmt_prob(n.uniform)}" if n.uniform is not None else "draw r: none (greedy)",
              f"verdict: {n.verdict}" + (" · on the accepted path" if i in path else "")]
    return "<br>".join(lines)


def _final_hover(record: TreeRecord) -> str:
    how = ("drawn from what was left of p after every child was rejected" if record.final_kind == "resampled"
           else "the target's own token after the last accepted node (no children left to try)")
    return "<br>".join([f"the round's own token: {record.final_kind}", how,
                        f"token “{plain_label(record.final_text, limit=None)}” (id {record.final_id})",
                        f"p = {fmt_prob(record.final_p)}"])


def _edges(xy: dict, pairs) -> tuple[list, list]:
    xs, ys = [], []
    for child, parent in pairs:
        xs += [xy[parent][0], xy[child][0], None]
        ys += [xy[parent][1], xy[child][1], None]
    return xs, ys


def _node_trace(record: TreeRecord, xy: dict, members: list[int], *, name: str, colour: str, symbol: str,
                path=(), unjudged: bool = False) -> go.Scatter:
    """`members` drawn as one legend entry `name`; `unjudged`: nodes not judged (yet), hollow, their hover saying
    `name` in place of a verdict (`_hover`)."""
    return go.Scatter(x=[xy[i][0] for i in members], y=[xy[i][1] for i in members], mode="markers+text", name=name,
                      text=[plain_label(record.texts[i]) for i in members], textposition="middle right",
                      hovertext=[_hover(record, i, unjudged=name if unjudged else None, path=path) for i in members],
                      hoverinfo="text", marker={"size": 14, "symbol": symbol, "line": {"color": colour, "width": 2},
                                                "color": "white" if unjudged else colour})


def tree_figure(record: TreeRecord | None = None, *, step: TreeStep | None = None, title: str = "") -> go.Figure:
    """The round's tree (see the module docstring); a placeholder without a record."""
    fig = go.Figure()
    if record is None:
        return noted(layout(fig, title=title or "Token tree", x="depth", y="", height=320),
                     "Decode with tree width 2 or more, then pick a round to see its token tree.")
    xy = positions(record)
    judged = (set(step.tried) if step is not None
              else {i for i, n in enumerate(record.nodes) if n.verdict != "unvisited"})
    path = list(step.path) if step is not None else list(record.path)
    show_final = record.final_id is not None and (step is None or step.kind == END)
    xs, ys = _edges(xy, [(i, n.parent) for i, n in enumerate(record.nodes)])
    fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", line={"color": "#d1d5db", "width": 1.5}, hoverinfo="skip",
                             showlegend=False))
    chain = [(c, p) for p, c in zip([-1, *path], path)] + ([(FINAL, path[-1] if path else -1)] if show_final else [])
    xs, ys = _edges(xy, chain)
    fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", name="accepted path", line={"color": BEST_COLOUR, "width": 4},
                             hoverinfo="skip"))
    root = (f"the root: the last token so far “{plain_label(record.root_text, limit=None)}”<br>(where the tree "
            "starts; the target scores every node after it in one forward)")
    fig.add_trace(go.Scatter(x=[0], y=[xy[-1][1]], mode="markers+text", name="root (the last token so far)",
                             text=[plain_label(record.root_text)], textposition="middle left", hovertext=[root],
                             hoverinfo="text", marker={"size": 16, "symbol": "square", "color": "#374151"}))
    for verdict, name in (("accepted", "accepted"), ("rejected", "rejected"), ("unvisited", "never judged")):
        members = [i for i, n in enumerate(record.nodes) if (n.verdict if i in judged else "unvisited") == verdict]
        if members:
            # at the round's end a node not judged never will be: "(yet)" would promise a turn it has not got
            label = name if step is None or step.kind == END or verdict != "unvisited" else "not judged (yet)"
            fig.add_trace(_node_trace(record, xy, members, name=label, colour=VERDICT_COLOURS[verdict],
                                      symbol=VERDICT_SYMBOLS[verdict], path=path, unjudged=verdict == "unvisited"))
    if step is not None and step.node is not None:
        fig.add_trace(go.Scatter(x=[xy[step.node][0]], y=[xy[step.node][1]], mode="markers", name="this step",
                                 hoverinfo="skip", marker={"size": 26, "symbol": "circle-open",
                                                           "color": "#111827", "line": {"width": 3}}))
    if show_final:
        colour = FINAL_COLOURS.get(record.final_kind, PLAIN_COLOUR)
        fig.add_trace(go.Scatter(x=[xy[FINAL][0]], y=[xy[FINAL][1]], mode="markers+text",
                                 name=f"round's own token ({record.final_kind})", text=[plain_label(record.final_text)],
                                 textposition="middle right", hovertext=[_final_hover(record)], hoverinfo="text",
                                 marker={"size": 16, "symbol": FINAL_SYMBOLS.get(record.final_kind, "diamond"),
                                         "color": colour}))
    rows = 1 + max(y for _, y in xy.values())
    depth = max(x for x, _ in xy.values())
    emitted = len(record.path) + (record.final_id is not None)
    heading = title or (f"Round {record.round_index + 1}: {len(record.nodes)} drafted nodes, "
                        f"{len(record.path)} accepted · {fmt(emitted, 'd')} token{'' if emitted == 1 else 's'}")
    fig.update_yaxes(autorange="reversed", showticklabels=False, zeroline=False, showgrid=False)
    fig.update_xaxes(tickmode="linear", dtick=1, range=[-0.6, depth + 0.9])
    return layout(fig, title=heading, x="depth (0: the root)", y="", height=max(320, 110 + ROW_PX * int(rows)),
                  hoverlabel={"align": "left"})
