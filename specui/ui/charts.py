"""Plotly figures of a run, built from `GenerationResult`s: pure functions, testable without a server.

    speed_figure        tokens/s over engine time, speculative and plain
    acceptance_figure   acceptance per round (bars) and the running acceptance rate (line)
    round_tokens_figure histogram of tokens emitted per round (1..K+1)
    position_figure     acceptance by draft position
    arena_figure        the arena: tokens/s, speedup, acceptance rate, mean accepted length and c per drafter
    arena_run_figures   the four charts above for an arena: speed and acceptance by position with a line per
                        contestant, the two per-round charts saying they follow a single run
"""

from __future__ import annotations

import functools

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from specui.arena import PLAIN, label
from specui.runstats import round_times
from specui.ui.theme import DRAFTER_COLOURS, PLAIN_COLOUR, RATE_COLOUR, SPEC_COLOUR, layout, noted


def _layout(fig: go.Figure, **kwargs) -> go.Figure:
    return layout(fig, uirevision="specui", **kwargs)


def _running_speed(result) -> tuple[list[float], list[float]]:
    times, xs, ys, tokens = round_times(result), [], [], 0
    for r, t in zip(result.rounds, times):
        tokens += len(r.token_ids)
        if t > 0:
            xs.append(round(t, 4))
            ys.append(round(tokens / t, 2))
    return xs, ys


def speed_figure(spec=None, plain=None) -> go.Figure:
    """Running tokens/s (tokens so far / engine seconds so far) against engine time."""
    fig = go.Figure()
    for result, name, colour in ((spec, "speculative", SPEC_COLOUR), (plain, "plain (target alone)", PLAIN_COLOUR)):
        if result is not None and result.rounds:
            xs, ys = _running_speed(result)
            fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", name=name, line={"color": colour, "width": 2}))
    fig = _layout(fig, title="Tokens/s over time", x="engine time (s)", y="tokens/s", showlegend=True)
    return fig if fig.data else noted(fig, "Tokens so far ÷ engine time so far,<br>as a reply streams")


def acceptance_figure(spec=None) -> go.Figure:
    """Per round: accepted / drafted (bars); the running acceptance rate (line). A token tree's round counts the nodes
    judged along its path (its `drafted`), named so, as the stats line names a tree's rate."""
    fig = go.Figure()
    xs, per_round, running = [], [], []
    accepted = drafted = 0
    rounds = spec.rounds if spec is not None else []
    trees = any(r.tree for r in rounds)
    for r in rounds:
        if r.num_drafted == 0:
            continue
        accepted += r.num_accepted
        drafted += r.num_drafted
        xs.append(r.index + 1)
        per_round.append(round(r.num_accepted / r.num_drafted, 4))
        running.append(round(accepted / drafted, 4))
    fig.add_trace(go.Bar(x=xs, y=per_round, name="accepted / judged along the path, this round" if trees else
                         "accepted / drafted, this round", marker_color=SPEC_COLOUR, opacity=0.55))
    fig.add_trace(go.Scatter(x=xs, y=running, mode="lines", name="running acceptance along the path" if trees else
                             "running acceptance rate", line={"color": RATE_COLOUR, "width": 2}))
    fig = _layout(fig, title="Acceptance per round", x="round", y="acceptance", showlegend=True)
    fig.update_yaxes(range=[0, 1.05])
    return fig if xs else noted(fig, "Each round's accepted ÷ drafted,<br>and the running acceptance rate")


def round_tokens_figure(spec=None) -> go.Figure:
    """How many tokens each round emitted (1 = first draft rejected, K+1 = all accepted plus the bonus)."""
    counts: dict[int, int] = {}
    for r in spec.rounds if spec is not None else []:
        counts[len(r.token_ids)] = counts.get(len(r.token_ids), 0) + 1
    top = max(counts, default=1)
    xs = list(range(1, top + 1))
    fig = go.Figure(go.Bar(x=xs, y=[counts.get(x, 0) for x in xs], marker_color=SPEC_COLOUR, name="rounds"))
    fig = _layout(fig, title="Tokens per round", x="tokens emitted in the round", y="rounds", showlegend=False)
    fig.update_xaxes(dtick=1)
    return fig if counts else noted(fig, "How many rounds emitted 1, 2, … K + 1 tokens")


def position_figure(spec=None) -> go.Figure:
    """For draft position i: the share of rounds drafting i tokens or more where token i was accepted,
    and the mean acceptance probability min(1, p/q) where it was judged."""
    reached, passed, prob_sum, judged = _position_counts(spec)
    xs = sorted(reached)
    fig = go.Figure()
    fig.add_trace(go.Bar(x=[i + 1 for i in xs], y=[round(passed[i] / reached[i], 4) for i in xs],
                         name="accepted (share of rounds)", marker_color=SPEC_COLOUR))
    means = [round(prob_sum[i] / judged[i], 4) if judged.get(i) else None for i in xs]
    fig.add_trace(go.Scatter(x=[i + 1 for i in xs], y=means,
                             mode="lines+markers", name="mean min(1, p/q)", line={"color": RATE_COLOUR, "width": 2}))
    fig = _layout(fig, title="Acceptance by draft position", x="draft position", y="acceptance", showlegend=True)
    fig.update_yaxes(range=[0, 1.05])
    fig.update_xaxes(dtick=1)
    return fig if xs else noted(fig, "How often the 1st, 2nd, … draft of a round<br>was accepted")


def _position_counts(result) -> tuple[dict[int, int], dict[int, int], dict[int, float], dict[int, int]]:
    """Per draft position i (0-based): the rounds that drafted it, those that accepted it, the sum of its
    acceptance probabilities min(1, p/q) and the rounds that judged it: positions up to the first rejection (a
    greedy round records 1 or 0 for every draft, those after the rejection too, whose target rows followed a draft
    already turned down: never judged, as a sampled round leaves them)."""
    reached: dict[int, int] = {}
    passed: dict[int, int] = {}
    prob_sum: dict[int, float] = {}
    judged: dict[int, int] = {}
    for r in result.rounds if result is not None else []:
        for i in range(r.num_drafted):
            reached[i] = reached.get(i, 0) + 1
            passed[i] = passed.get(i, 0) + (i < r.num_accepted)
            if i < len(r.accept_probs) and i <= r.num_accepted:
                prob_sum[i] = prob_sum.get(i, 0.0) + r.accept_probs[i]
                judged[i] = judged.get(i, 0) + 1
    return reached, passed, prob_sum, judged


def all_figures(spec=None, plain=None) -> dict[str, go.Figure]:
    """Every chart, keyed by the element id it is shown in."""
    return {"chart-speed": speed_figure(spec, plain), "chart-acceptance": acceptance_figure(spec),
            "chart-tokens-per-round": round_tokens_figure(spec), "chart-position": position_figure(spec)}


ARENA_PANELS = (("tokens/s", lambda s: s.stats.tokens_per_s), ("speedup ×", lambda s: s.speedup),
                ("acceptance rate", lambda s: s.stats.acceptance_rate),
                ("mean accepted length", lambda s: s.stats.mean_accepted_length),
                ("c (draft cost)", lambda s: s.stats.cost_ratio))


def arena_figure(arena=None) -> go.Figure:
    """One panel per figure of `ARENA_PANELS`, a bar per contestant (a `specui.arena.Arena`; None: empty)."""
    bars = []
    for standing in arena.standings if arena is not None else ():
        colour = DRAFTER_COLOURS.get(standing.name, SPEC_COLOUR)
        for col, (_, value) in enumerate(ARENA_PANELS, 1):
            y = value(standing)
            axis = "" if col == 1 else str(col)
            bars.append({"type": "bar", "x": [standing.label], "y": [None if y is None else round(y, 4)],
                         "name": standing.label, "marker": {"color": colour}, "legendgroup": standing.name,
                         "showlegend": col == 1, "xaxis": f"x{axis}", "yaxis": f"y{axis}"})
    fig = go.Figure(data=bars, layout=_arena_layout())  # one pass (make_subplots and a trace at a time: 58 ms)
    if arena is not None and any(s.stats.trees for s in arena.standings):  # as the stats line names a tree's rate
        fig.layout.annotations[[t for t, _ in ARENA_PANELS].index("acceptance rate")].text = "acceptance along the path"
    if arena is None or not arena.standings:
        fig.add_annotation(text="Tick Arena and send a prompt: plain decoding, then every drafter of the preset",
                           showarrow=False, xref="paper", yref="paper", x=0.5, y=0.5)
    return fig


@functools.cache
def _arena_layout() -> dict:
    """The arena chart's panels, titles and look, built once (as a plain dict: each figure validates its own copy)."""
    fig = make_subplots(rows=1, cols=len(ARENA_PANELS), subplot_titles=[title for title, _ in ARENA_PANELS],
                        horizontal_spacing=0.05)
    fig = layout(fig, title="Drafter arena (engine time; plain decoding first)", x="", y="", showlegend=True,
                 uirevision="specui-arena")
    fig.update_xaxes(showticklabels=False)
    fig.update_annotations(font_size=12)
    return fig.layout.to_plotly_json()


def arena_run_figures(results: dict | None = None) -> dict[str, go.Figure]:
    """`all_figures` for an arena (contestant name -> its GenerationResult, in race order): tokens/s over time
    and acceptance by draft position with a line per contestant in its arena colour; the per-round charts
    belong to one run, so they say so instead of standing empty."""
    results = results or {}
    speed, position = go.Figure(), go.Figure()
    for name, result in results.items():
        colour = DRAFTER_COLOURS.get(name, SPEC_COLOUR)
        if result is not None and result.rounds:
            xs, ys = _running_speed(result)
            speed.add_trace(go.Scatter(x=xs, y=ys, mode="lines", name=label(name),
                                       line={"color": colour, "width": 2, "dash": "dot" if name == PLAIN else None}))
        if name != PLAIN and result is not None:
            reached, passed, _, _ = _position_counts(result)
            xs = sorted(reached)
            position.add_trace(go.Scatter(x=[i + 1 for i in xs], y=[round(passed[i] / reached[i], 4) for i in xs],
                                          mode="lines+markers", name=label(name), line={"color": colour, "width": 2}))
    speed = _layout(speed, title="Tokens/s over time (the arena)", x="engine time (s)", y="tokens/s", showlegend=True)
    position = _layout(position, title="Acceptance by draft position (the arena)", x="draft position",
                       y="accepted (share of rounds)", showlegend=True)
    position.update_yaxes(range=[0, 1.05])
    position.update_xaxes(dtick=1)
    note = "one run's rounds: in the arena, see each drafter's<br>figures in the table and the chart above"
    return {"chart-speed": speed, "chart-position": position, "chart-acceptance": noted(acceptance_figure(), note),
            "chart-tokens-per-round": noted(round_tokens_figure(), note)}
