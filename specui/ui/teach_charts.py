"""Plotly figures of teaching mode: pure functions of `specui.teach` records, testable without a server.

    theory_tokens_figure   eq. 1, tokens per round over alpha for several K, with the measured point
    theory_speedup_figure  Theorem 3.8, speedup over alpha for several K at the measured c, with the
                           measured point and the best K
    residual_figure        a rejection's residual norm(max(0, p - q)): its top tokens, the drawn one marked
    k_sweep_figure         measured speedup against K beside the theory at the measured alpha and c
    verify_cost_figure     the target's forward time for n new tokens ÷ one token, beside the theorem's 1
    temperature_figure     acceptance against temperature
    drafter_figure         acceptance and speedup per drafter (the weaker-drafter experiment)
    time_budget_figure     ms per generated token of plain and speculative decoding, split into the forwards
                           Theorem 3.8 counts (solid) and what it does not (hatched)
"""

from __future__ import annotations

import html
import math
import re
import textwrap
from collections.abc import Sequence

import plotly.graph_objects as go

from specui import metrics
from specui.lesson import Measured, Point, theory_curve
from specui.lesson_steps import Step
from specui.text import fmt
from specui.ui.teach_view import best_k_said, slider_best
from specui.ui.theme import (BEST_COLOUR, K_COLOURS, K_DASHES, NOTE_COLOUR, PLAIN_COLOUR, POINT_COLOUR, SPEC_COLOUR,
                             TALL, THEORY_COLOUR, layout, noted)

KS = (1, 2, 4, 8)
GREEDY_AGREEMENT = "T = 0: draft's token = target's argmax (rate)"
DEFAULT_C = 0.1  # the draft cost drawn before anything is measured


# what one line of a chart holds on a phone (390 px wide: a chart of 326 px), at a title's 14 px, a <sub> line's
# SUBTITLE_PX and an empty chart's note's 14 px: a longer title, subtitle or note is wrapped at its spaces (plotly
# draws a line of SVG text as long as it is, past the chart's edges)
TITLE_CHARS, SUBTITLE_CHARS, NOTE_CHARS = 42, 48, 40
LINE_PX = 18  # the room a title's further line takes: the top margin and the chart grow by it
TITLE_TOP_PX = 20  # a title of more lines: its first line this far down (a phone's tool bar above it)


def _wrapped(text: str, width: int) -> list[str]:
    """The lines of `text` (its own <br> kept), each at most `width` characters where its words allow; a formula's
    sum or difference ("Kc + 1", "1 − α") is never cut at its sign (the speedup title read "(Kc +" over "1))")."""
    joined = [_SIGN.sub("\0\\1\0", part) for part in text.split("<br>")]
    return [line.replace("\0", " ") for part in joined
            for line in textwrap.wrap(part, width, break_long_words=False, break_on_hyphens=False) or [""]]


_SIGN = re.compile(r"(?<=\S) ([+−]) (?=\S)")  # a plus or minus sign between two terms


def _together(words: str) -> str:
    """`words` kept on one line of a wrapped title (no-break spaces), a number beside what it is ("1 (0.79×)");
    a note after a "; " (`teach_view.best_k_said`'s K past the slider) wraps as it must."""
    first, sep, rest = words.partition("; ")
    return first.replace(" ", "\u00a0") + sep + rest


def _note(text: str) -> str:
    """An empty chart's note, wrapped to fit a phone's chart."""
    return "<br>".join(_wrapped(text, NOTE_CHARS))


def _layout(fig: go.Figure, *, title: str, height: int = TALL, **kwargs) -> go.Figure:
    """`theme.layout` with the title and its <sub> line wrapped to fit a phone's chart, the chart taller by the
    lines that adds beyond a title and a subtitle."""
    head, _, sub = title.partition("<br><sub>")
    lines = _wrapped(head, TITLE_CHARS)
    lines += [f"<sub>{line}</sub>" for line in _wrapped(sub.removesuffix("</sub>"), SUBTITLE_CHARS)] if sub else []
    if len(lines) <= 2:
        return layout(fig, title="<br>".join(lines), height=height, **kwargs)
    # plotly centres a title in the top margin (it grew into the plot): one of more lines starts where a title of
    # one line does (under a phone's tool bar) and grows down into the room added for it
    extra = LINE_PX * (len(lines) - 2) + TITLE_TOP_PX
    layout(fig, title="<br>".join(lines), height=height + extra, **kwargs)
    return fig.update_layout(margin_t=fig.layout.margin.t + extra,
                             title={"yref": "container", "y": 1, "yanchor": "top", "pad": {"t": TITLE_TOP_PX + 5}})


def _k_curve(alphas: Sequence[float], values: Sequence[float], k: int, *, name: str, mine: bool) -> go.Scatter:
    """Theorem 3.8's curve for one K: the run's own solid and thick, the others each in a dash of its own, every one
    labelled "K=k" right of its end (in the margin `_K_LABELS_MARGIN` makes), so that neither the legend nor the shade
    of blue is needed to tell them apart."""
    return go.Scatter(x=alphas, y=[round(v, 4) for v in values], mode="lines+text", name=name,
                      text=[""] * (len(alphas) - 1) + [f"K={k}"], textposition="middle right", cliponaxis=False,
                      textfont={"color": K_COLOURS.get(k, THEORY_COLOUR), "size": 12},
                      line={"color": K_COLOURS.get(k, THEORY_COLOUR), "width": 3 if mine else 1.75,
                            "dash": "solid" if mine else K_DASHES.get(k, "dot")})


def _k_labelled(fig: go.Figure) -> go.Figure:
    """Room right of the plot for the K curves' labels, and below it for the legend: a legend of more rows than TALL
    leaves room for makes the chart taller by them, where it took them from the plot (the speedup chart's eight
    entries, one a row under a long name, left a plot 55 px high on a projector's 1280 × 720 at 150%)."""
    names = [t.name for t in fig.data if t.name and t.showlegend is not False]
    # plotly sets a wrapped horizontal legend's entries in columns as wide as its widest: short names go two to a
    # row even on a phone's chart, a long one one to a row on a chart under ~560 px wide (a projector's, a phone's)
    rows = math.ceil(len(names) / 2) if max(map(len, names), default=0) <= LEGEND_PAIR_CHARS else len(names)
    extra = LEGEND_ROW_PX * max(0, rows - LEGEND_ROWS)
    return fig.update_layout(margin_r=_K_LABELS_MARGIN, height=fig.layout.height + extra)


_K_LABELS_MARGIN = 50
LEGEND_ROW_PX = 21  # one row of a legend (plotly's, at the template's font)
LEGEND_ROWS = 3  # the legend rows a theory chart's TALL height leaves room for beside a plot of ~150 px
LEGEND_PAIR_CHARS = 14  # names this long go two a row on a phone's chart ("K=8 (this run)", not "measured speedup")


def _waiting(fig: go.Figure, what: str) -> go.Figure:
    """An experiment's chart before its run: the titled axes and a note saying what will fill them."""
    fig.add_annotation(text=_note(f"Run the experiment to fill this:<br>{what}"), showarrow=False, xref="paper",
                       yref="paper", x=0.5, y=0.5, font={"size": 14, "color": NOTE_COLOUR})
    return fig


def _alphas(n: int = 101) -> list[float]:
    return [i / (n - 1) for i in range(n)]


def _ks(measured: Measured | None, ks: Sequence[int]) -> list[int]:
    chosen = set(ks)
    if measured is not None and measured.k >= 1:
        chosen.add(measured.k)
    return sorted(chosen)


def theory_tokens_figure(measured: Measured | None = None, *, ks: Sequence[int] = KS) -> go.Figure:
    """(1 - alpha^(K+1)) / (1 - alpha) for each K; the measured (alpha, tokens per round) as a red point."""
    fig = go.Figure()
    alphas = _alphas()
    for k in _ks(measured, ks):
        mine = measured is not None and k == measured.k
        fig.add_trace(_k_curve(alphas, theory_curve(alphas, k), k, name=f"K={k}" + (" (this run)" if mine else ""),
                               mine=mine))
    title = "Expected tokens per round = (1 − α^(K+1)) / (1 − α)"
    if measured is not None and measured.alpha is not None and measured.tokens_per_round is not None:
        fig.add_trace(go.Scatter(
            x=[round(measured.alpha, 4)], y=[round(measured.tokens_per_round, 4)], mode="markers", name="measured",
            marker={"color": POINT_COLOUR, "size": 13, "symbol": "diamond", "line": {"color": "white", "width": 1}},
            hovertemplate="measured: α=%{x:.3f}, %{y:.2f} tokens/round<extra></extra>"))
        title += (f"<br><sub>measured {fmt(measured.tokens_per_round, '.2f')} tokens/round; "
                  f"α={fmt(measured.alpha, '.2f')} is fitted so that K={measured.k}'s curve passes through it "
                  f"(below it: rounds the token budget or an end of text cut short)</sub>")
    fig = _k_labelled(_layout(fig, title=title, x="α (chance the target accepts a draft token)", y="tokens per round"))
    fig.update_xaxes(range=[0, 1.0])
    return fig


def theory_speedup_figure(measured: Measured | None = None, *, ks: Sequence[int] = KS, c: float | None = None
                          ) -> go.Figure:
    """(1 - alpha^(K+1)) / ((1 - alpha)(K c + 1)) for each K at the measured c, the measured speedup as a
    red point, and the best K for the measured alpha and c that this tab's K slider can set (a green star on its
    curve, `slider_best`); where the theory's own best lies past the slider, its curve is drawn too, named so."""
    if c is None:
        c = measured.cost_ratio if measured is not None and measured.cost_ratio is not None else DEFAULT_C
    fig = go.Figure()
    alphas = _alphas()
    best = measured.best_k if measured is not None else None
    here, here_speedup = (slider_best(measured.alpha, c, best, measured.best_k_speedup) if measured is not None
                          else (None, None))  # the star: the best K this tab can set
    shown = _ks(measured, ks)
    shown = sorted({*shown, *(k for k in (best, here) if k is not None)})
    for k in shown:
        mine = measured is not None and k == measured.k
        said = " (best)" if k == here else " (the theory's best: Chat tab)" if k == best else ""
        fig.add_trace(_k_curve(alphas, theory_curve(alphas, k, c), k, mine=mine,
                               name=f"K={k}" + (" (this run)" if mine else "") + said))
    fig.add_hline(y=1.0, line={"color": PLAIN_COLOUR, "dash": "dash", "width": 1})
    title = f"Speedup = (1 − α^(K+1)) / ((1 − α)(Kc + 1)), c = {fmt(c, '.3f')}"
    if measured is not None and measured.alpha is not None:
        if measured.speedup is not None:
            fig.add_trace(go.Scatter(
                x=[round(measured.alpha, 4)], y=[round(measured.speedup, 4)], mode="markers",
                name="measured speedup",
                marker={"color": POINT_COLOUR, "size": 13, "symbol": "diamond", "line": {"color": "white", "width": 1}},
                hovertemplate="measured: α=%{x:.3f}, speedup %{y:.2f}×<extra></extra>"))
        if here is not None and here_speedup is not None:
            fig.add_trace(go.Scatter(
                x=[round(measured.alpha, 4)], y=[round(here_speedup, 4)], mode="markers",
                name=f"best K = {here}", marker={"color": BEST_COLOUR, "size": 14, "symbol": "star"},
                hovertemplate=f"best K={here}: theory %{{y:.2f}}×<extra></extra>"))
            measured_part = f"measured {fmt(measured.speedup, '.2f×')}, " if measured.speedup is not None else ""
            # each number beside what it is, on one line: wrapped, "theory at K=7" read over "1.82×" and "best K=1"
            # over "(0.79×)" (`_together`)
            theory = _together(f"theory {fmt(measured.theory_speedup, '.2f×')} at K={measured.k}")
            said = f"best K={_together(best_k_said(measured.alpha, c, best, measured.best_k_speedup))}"
            title += (f"<br><sub>α={fmt(measured.alpha, '.2f')}, c={fmt(c, '.3f')}: {measured_part}{theory}, "
                      f"{said}</sub>")
    else:
        title += "<br><sub>c is a placeholder until a run is measured</sub>"
    fig = _k_labelled(_layout(fig, title=title, x="α (chance the target accepts a draft token)", y="speedup"))
    fig.update_xaxes(range=[0, 1.0])
    return fig


def residual_figure(step: Step | None = None) -> go.Figure:
    """The residual norm(max(0, p − q)) at this round's rejection: its top tokens, the drawn token in red."""
    fig = go.Figure()
    title = "Residual distribution at the rejection"
    if step is not None and step.residual:
        drawn = step.final.token_id if step.final is not None else None
        # a token's text as plotly's text, never its HTML (a '<b>' set the labels in bold), as the token tree's
        labels = [f"{html.escape(repr(c.text), quote=False)} ({c.token_id})" for c in step.residual]
        # the drawn bar: red, hatched and labelled, so more than its hue tells it apart
        fig.add_trace(go.Bar(x=labels, y=[round(c.prob, 5) for c in step.residual], name="norm(max(0, p − q))",
                             marker_color=[POINT_COLOUR if c.token_id == drawn else THEORY_COLOUR
                                           for c in step.residual],
                             marker_pattern_shape=["x" if c.token_id == drawn else "" for c in step.residual],
                             text=["drawn" if c.token_id == drawn else "" for c in step.residual],
                             textposition="outside", cliponaxis=False,
                             hovertemplate="%{x}: %{y:.4f}<extra></extra>"))
        shown = f"its top {len(step.residual)} tokens, {fmt(sum(c.prob for c in step.residual), '.2f')} of its mass"
        if step.final is not None:
            where = "red" if drawn in {c.token_id for c in step.residual} else f"outside the top {len(step.residual)}"
            title += f"<br><sub>{shown}; drawn: {html.escape(repr(step.final.text), quote=False)} ({where})</sub>"
    # each bar reads 'text' (id): the id a student saw nowhere else is named on the axis
    fig = _layout(fig, title=title, height=280, x="token (its id in the vocabulary)", y="probability in the residual",
                  showlegend=False)
    if step is None:  # not plotly's empty axes from -1 to 6: what will fill them
        noted(fig, _note("Decode a prompt and step through it:<br>at a rejection, the tokens the target<br>could "
                         "draw instead show here"), size=14)
    elif not step.residual:  # why this round has none, where the bars would be
        if not step.drafts:
            reason = "No drafts this round:<br>the target drew its token from p"
        elif step.rejected is None:
            reason = "Every draft was accepted:<br>the bonus token comes from p itself"
        else:
            reason = "Greedy mode: the target's most likely token<br>replaces the rejected draft"
        noted(fig, _note(f"None this round. {reason}"), size=14)
    return fig


def k_sweep_figure(points: Sequence[Point] = ()) -> go.Figure:
    """Measured speedup against K, beside Theorem 3.8 at the sweep's pooled alpha and median c."""
    fig = go.Figure()
    pts = sorted((p for p in points if p.speedup is not None), key=lambda p: p.k)
    title = "K sweep: measured speedup against theory"
    if pts:
        fig.add_trace(go.Scatter(x=[p.k for p in pts], y=[round(p.speedup, 4) for p in pts], mode="lines+markers",
                                 name="measured", line={"color": POINT_COLOUR, "width": 2}, marker={"size": 9}))
        alpha, c = pooled_alpha(pts), metrics.median(p.cost_ratio for p in pts)
        if alpha is not None and c is not None:
            ks = list(range(1, max(8, pts[-1].k) + 1))
            fig.add_trace(go.Scatter(x=ks, y=[round(metrics.theoretical_speedup(alpha, k, c), 4) for k in ks],
                                     mode="lines+markers", name=f"theory (α={fmt(alpha, '.2f')}, c={fmt(c, '.3f')})",
                                     line={"color": THEORY_COLOUR, "width": 2, "dash": "dot"}))
            best = metrics.best_k(alpha, c)
            measured_best = max(pts, key=lambda p: p.speedup)
            said = best_k_said(alpha, c, best, metrics.theoretical_speedup(alpha, best, c))
            title += (f"<br><sub>best K: theory {said}, measured {measured_best.k} "
                      f"({fmt(measured_best.speedup, '.2f×')})</sub>")
        fig.add_hline(y=1.0, line={"color": PLAIN_COLOUR, "dash": "dash", "width": 1})
    fig = _layout(fig, title=title, x="K (draft tokens per round)", y="speedup over plain decoding")
    fig.update_xaxes(dtick=1)
    if not pts:
        fig.update_xaxes(range=[0.5, 8.5])
        fig.update_yaxes(range=[0, 3])
        _waiting(fig, "the measured speedup for K = 1…8 beside the theory's curve")
    return fig


def temperature_figure(points: Sequence[Point] = ()) -> go.Figure:
    """Acceptance against temperature: the fitted α, and the mean of min(1, p/q) (at temperature 0, where the rule
    is the argmax's, how often the draft's token is the target's argmax)."""
    fig = go.Figure()
    pts = sorted(points, key=lambda p: p.temperature)
    if not pts:
        fig = _layout(fig, title="Acceptance against temperature", x="temperature (0 = greedy)", y="acceptance")
        fig.update_xaxes(range=[-0.05, 1.55])
        fig.update_yaxes(range=[0, 1.05])
        return _waiting(fig, "α and the mean min(1, p/q) at temperatures 0.3 to 1.5;<br>at 0, how often the draft's "
                             "token is the target's argmax")
    fig.add_trace(go.Scatter(x=[p.temperature for p in pts], y=[_r(p.alpha) for p in pts], mode="lines+markers",
                             name="α (fitted to tokens per round)", line={"color": POINT_COLOUR, "width": 2}))
    # at temperature 0 a draft is kept when it is the target's argmax: its "acceptance probability" is 1 or 0, so the
    # mean there is how often the draft's token is the target's argmax, a point of its own and not min(1, p/q)'s
    sampled, greedy = [p for p in pts if p.temperature > 0], [p for p in pts if p.temperature <= 0]
    if sampled:
        fig.add_trace(go.Scatter(x=[p.temperature for p in sampled], y=[_r(p.mean_accept_prob) for p in sampled],
                                 mode="lines+markers", name="mean min(1, p/q)",
                                 line={"color": THEORY_COLOUR, "width": 2, "dash": "dot"}))
    if greedy:
        fig.add_trace(go.Scatter(x=[p.temperature for p in greedy], y=[_r(p.mean_accept_prob) for p in greedy],
                                 mode="markers", name=GREEDY_AGREEMENT,
                                 marker={"color": THEORY_COLOUR, "size": 11, "symbol": "square-open",
                                         "line": {"width": 2}},
                                 hovertemplate="T = 0: the draft's token is the target's argmax "
                                               "%{y:.0%} of the time<extra></extra>"))
    fig = _layout(fig, title="Acceptance against temperature", x="temperature (0 = greedy)", y="acceptance")
    fig.update_yaxes(range=[0, 1.05])
    return fig


def drafter_figure(points: Sequence[Point] = ()) -> go.Figure:
    """Per drafter: alpha (bars) and measured speedup (diamonds, right axis)."""
    fig = go.Figure()
    labels = [p.label for p in points]
    if not labels:
        fig = _layout(fig, title="Drafters compared: a weaker drafter's acceptance collapses", x="drafter", y="α")
        fig.update_xaxes(showticklabels=False, range=[0, 1])
        fig.update_yaxes(range=[0, 1.05])
        return _waiting(fig, "α (bars) and the measured speedup (diamonds) for the draft model, "
                             "a noisier copy and prompt lookup")
    fig.add_trace(go.Bar(x=labels, y=[_r(p.alpha) for p in points], name="α (fitted to tokens per round)",
                         marker_color=THEORY_COLOUR, opacity=0.7))
    fig.add_trace(go.Scatter(x=labels, y=[_r(p.speedup) for p in points], name="measured speedup", mode="markers",
                             marker={"color": POINT_COLOUR, "size": 13, "symbol": "diamond"}, yaxis="y2"))
    fig = _layout(fig, title="Drafters compared: a weaker drafter's acceptance collapses", x="drafter", y="α",
                  yaxis2={"title": "speedup", "overlaying": "y", "side": "right", "rangemode": "tozero"})
    fig.update_yaxes(range=[0, 1.05], selector={"title": {"text": "α"}})
    return fig


def pooled_alpha(points: Sequence[Point]) -> float | None:
    """The mean alpha of points, weighted by their rounds (a sweep's alpha barely depends on K)."""
    pairs = [(p.alpha, p.rounds) for p in points if p.alpha is not None and p.rounds]
    total = sum(n for _, n in pairs)
    return sum(a * n for a, n in pairs) / total if total else None


def _r(x: float | None, digits: int = 4) -> float | None:
    return None if x is None else round(x, digits)


def verify_cost_figure(curve: dict | None = None) -> go.Figure:
    """The target's forward time for n new tokens ÷ one token (a `VerifyCost.as_dict()`), beside the
    theorem's assumption that it stays 1 and, where measured, the arithmetic floor under it."""
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=[1, 16], y=[1, 1], mode="lines", name="Theorem 3.8 assumes 1",
                             line={"color": THEORY_COLOUR, "dash": "dash"}))
    title = "Verify cost: a forward of n new tokens ÷ a one-token forward"
    if curve:
        fig.add_trace(go.Scatter(x=list(curve["tokens"]), y=[_r(v, 3) for v in curve["ratios"]], mode="lines+markers",
                                 name="measured", line={"color": POINT_COLOUR},
                                 hovertemplate="n=%{x}: %{y:.2f}× one token<extra></extra>"))
        if curve.get("floor_ratios"):  # what the rows' multiply-adds alone would cost (`specui.verify_cost`)
            # a floor of 1 at every n lies on the theorem's line and hides it (a small model's 16 rows on a fast
            # CPU): its name says where it is, as a class saw one grey line where the legend named two
            flat = all(round(v, 2) <= 1.0 for v in curve["floor_ratios"])
            fig.add_trace(go.Scatter(
                x=list(curve["tokens"]), y=[_r(v, 3) for v in curve["floor_ratios"]], mode="lines",
                name=f"floor: multiply-adds at {fmt(2e-9 * curve['fma_rate'], '.0f')} GFLOP/s"
                     + ("<br>(1 at every n: on the theorem's line)" if flat else ""),
                line={"color": PLAIN_COLOUR, "dash": "dot", "width": 3},
                hovertemplate="n=%{x}: the multiply-adds alone, %{y:.2f}× one token<extra></extra>"))
        ms = 1e3 * curve["seconds"][0]
        title += f"<br><sub>one token {fmt(ms, '.1f')} ms, cache {curve['cache_length']} tokens</sub>"
    _layout(fig, title=title, x="n new tokens in one forward (K + 1)", y="÷ one-token forward",
            xaxis={"range": [0.5, 16.5]}, yaxis={"rangemode": "tozero"})
    if not curve:
        _waiting(fig, "the target's forward time for 1…16 new tokens, ÷ one token")
    return fig


# the parts of `specui.bench.budget`: the forwards the theorem counts are solid, the rest hatched
BUDGET_COLOURS = {"forwards": SPEC_COLOUR, "target forwards": SPEC_COLOUR, "draft forwards": "#60a5fa",
                  "verify extra rows": "#f59e0b", "forwards slower in the loop": "#fb923c",
                  "verify slower in the loop": "#fb923c", "step rest": POINT_COLOUR, "verify rest": POINT_COLOUR,
                  "draft rest": "#f87171", "between steps": "#7c3aed", "between rounds": "#7c3aed",
                  "prefill": PLAIN_COLOUR}
COUNTED = ("forwards", "target forwards", "draft forwards")


def time_budget_figure(budget: dict | None = None) -> go.Figure:
    """Two stacked bars, plain and speculative decoding, in ms per generated token (a
    `specui.lesson_budget.time_budget_run` dict): what Theorem 3.8 counts, solid; the rest, hatched."""
    fig = go.Figure()
    title = "Where the time goes: ms per generated token"
    if budget:
        for row in ("plain", "speculative"):
            for name, ms in budget[f"{row}_ms_per_token"].items():
                counted = name in COUNTED
                fig.add_trace(go.Bar(
                    y=[row], x=[_r(max(ms, 0.0), 3)], orientation="h", name=f"{row}: {name}",
                    marker={"color": BUDGET_COLOURS.get(name, PLAIN_COLOUR),
                            "pattern": {"shape": "" if counted else "/"}},
                    hovertemplate=f"{row}: {name}" + (" (Thm 3.8 counts it)" if counted else "")
                                  + ": %{x:.2f} ms a token<extra></extra>"))
        first = budget["efficiency_steps"][0]["efficiency"]
        title += (f"<br><sub>measured {fmt(budget['speedup'], '.2f')}×, Thm 3.8 {fmt(budget['theory'], '.2f')}× "
                  f"(K = {budget['k']}, c = {fmt(budget['c'], '.3f')}): efficiency {fmt(first, '.2f')}</sub>")
    # taller than the other experiments: room for the legend of thirteen parts
    _layout(fig, height=TALL + 100, title=title, x="ms per generated token", y="", barmode="stack")
    fig.update_layout(legend={"traceorder": "normal"})  # plotly reverses a stack's legend; these stack left to right
    if not budget:  # its axes mean nothing before a run (plotly's -1 to 6 both ways): the note alone
        noted(fig, _note("Run the experiment to fill this:<br>plain and speculative decoding's time per token, part by "
                         "part"), size=14)
    return fig
