"""Chart builders without a server: real plotly figures from hand-made rounds, checked by their data."""

from __future__ import annotations

import json

import plotly.graph_objects as go
import pytest

from specui.events import GenerationResult, Round
from specui.ui import charts


def rnd(index, *, drafted, accepted, emitted=None, accept_probs=None, draft_s=0.01, verify_s=0.04, plain=False):
    emitted = accepted + 1 if emitted is None else emitted
    kinds = ["plain"] if plain else ["accepted"] * accepted + (["bonus"] if accepted == drafted else ["resampled"])
    return Round(index=index, token_ids=list(range(emitted)), kinds=kinds[:emitted], drafted=list(range(drafted)),
                 num_accepted=accepted, target_probs=[0.5] * drafted, draft_probs=[0.5] * drafted,
                 accept_probs=accept_probs if accept_probs is not None
                 else [1.0] * accepted + [0.0] * (drafted - accepted),
                 uniforms=[], token_target_probs=[0.5] * emitted, token_draft_probs=[None] * emitted, residual_top=[],
                 num_draft_tokens=drafted, draft_s=draft_s, verify_s=verify_s, elapsed_s=0.0, speculative=not plain)


def result_of(rounds, prefill=0.05):
    result = GenerationResult(prefill_s=prefill)
    for r in rounds:
        result.add(r)
    return result


@pytest.fixture
def spec():
    # 4 rounds of K=4: all accepted (5 tokens), 2 accepted (3), none (1), all accepted (5)
    return result_of([rnd(0, drafted=4, accepted=4), rnd(1, drafted=4, accepted=2, accept_probs=[1.0, 0.9, 0.3, 0.2]),
                      rnd(2, drafted=4, accepted=0), rnd(3, drafted=4, accepted=4)])


@pytest.fixture
def plain():
    return result_of([rnd(i, drafted=0, accepted=0, draft_s=0.0, verify_s=0.03, plain=True) for i in range(14)])


def test_speed_figure_plots_running_tokens_per_second_for_both_runs(spec, plain):
    fig = charts.speed_figure(spec, plain)
    assert isinstance(fig, go.Figure)
    names = [t.name for t in fig.data]
    assert names == ["speculative", "plain (target alone)"]
    xs, ys = fig.data[0].x, fig.data[0].y
    assert list(xs) == pytest.approx([0.1, 0.15, 0.2, 0.25])  # prefill + (draft + verify) per round
    assert list(ys) == pytest.approx([5 / 0.1, 8 / 0.15, 9 / 0.2, 14 / 0.25], rel=1e-3)
    assert fig.data[1].y[-1] == pytest.approx(14 / (0.05 + 14 * 0.03), rel=1e-3)


def test_acceptance_figure_has_per_round_bars_and_the_running_rate(spec):
    fig = charts.acceptance_figure(spec)
    bars, line = fig.data
    assert bars.type == "bar" and line.type == "scatter"
    assert list(bars.x) == [1, 2, 3, 4]
    assert list(bars.y) == pytest.approx([1.0, 0.5, 0.0, 1.0])
    assert list(line.y) == pytest.approx([1.0, 6 / 8, 6 / 12, 10 / 16])


def test_round_tokens_histogram_counts_rounds_by_tokens_emitted(spec):
    fig = charts.round_tokens_figure(spec)
    (bars,) = fig.data
    assert list(bars.x) == [1, 2, 3, 4, 5]
    assert list(bars.y) == [1, 0, 1, 0, 2]


def test_position_figure_gives_acceptance_by_draft_position(spec):
    fig = charts.position_figure(spec)
    share, mean_prob = fig.data
    assert list(share.x) == [1, 2, 3, 4]
    assert list(share.y) == pytest.approx([3 / 4, 3 / 4, 2 / 4, 2 / 4])
    # the mean of min(1, p/q) where the target judged the draft: up to each round's first rejection (these greedy
    # rounds record 0 for the drafts after it too, as the engine does, and the mean leaves them out)
    assert list(mean_prob.y) == pytest.approx([3 / 4, 2.9 / 3, 2.3 / 3, 2 / 2], abs=1e-4)  # to 4 decimals


def test_rounds_without_drafts_are_left_out_of_acceptance_charts():
    result = result_of([rnd(0, drafted=0, accepted=0, emitted=1), rnd(1, drafted=2, accepted=1)])
    assert list(charts.acceptance_figure(result).data[0].x) == [2]
    assert list(charts.position_figure(result).data[0].x) == [1, 2]


def test_empty_figures_are_valid_and_every_chart_serialises(spec, plain):
    for figures in (charts.all_figures(), charts.all_figures(spec, plain), charts.all_figures(result_of([]))):
        assert set(figures) == {"chart-speed", "chart-acceptance", "chart-tokens-per-round", "chart-position"}
        for fig in figures.values():
            assert json.loads(fig.to_json())["layout"]["title"]["text"]


def test_charts_before_a_run_say_what_will_fill_them_instead_of_empty_axes(spec, plain):
    for empty in (None, result_of([])):
        for name, fig in charts.all_figures(empty).items():
            assert len(fig.layout.annotations) == 1 and fig.layout.annotations[0].text, name
            assert fig.layout.xaxis.visible is False and fig.layout.yaxis.visible is False, name
    for name, fig in charts.all_figures(spec, plain).items():  # a run's charts: its axes, no note
        assert not fig.layout.annotations and fig.layout.xaxis.visible is not False, name


def test_verify_cost_figure_draws_the_curve_beside_the_theorems_one():
    import json

    from specui.ui import teach_charts

    empty = teach_charts.verify_cost_figure()
    assert len(empty.data) == 1 and "Run the experiment" in empty.layout.annotations[0].text
    curve = {"tokens": [1, 2, 4], "seconds": [0.05, 0.05, 0.06], "ratios": [1.0, 1.0, 1.2], "cache_length": 40}
    fig = teach_charts.verify_cost_figure(curve)
    assert list(fig.data[1].y) == [1.0, 1.0, 1.2] and list(fig.data[0].y) == [1, 1]
    assert "50.0 ms" in fig.layout.title.text
    json.loads(fig.to_json())
    floored = teach_charts.verify_cost_figure({**curve, "floor_ratios": [1.0, 1.0, 1.1], "fma_rate": 1e11})
    assert list(floored.data[2].y) == [1.0, 1.0, 1.1] and "200 GFLOP/s" in floored.data[2].name
    json.loads(floored.to_json())


def test_verify_cost_table_has_a_floor_column_only_where_measured():
    from specui.ui.teach_view import render_verify_cost

    curve = {"tokens": [1, 2], "seconds": [0.05, 0.06], "ratios": [1.0, 1.2]}
    assert "floor" not in render_verify_cost(curve) and render_verify_cost(curve).count("<td") == 6
    floored = render_verify_cost({**curve, "floor_ratios": [1.0, 1.05]})
    assert "<th class=\"num\">floor</th>" in floored and "1.05×" in floored and floored.count("<td") == 8


def test_time_budget_figure_stacks_counted_parts_solid_and_the_rest_hatched():
    from specui.ui import teach_charts, teach_view

    empty = teach_charts.time_budget_figure()
    assert not empty.data and "Run the experiment" in empty.layout.annotations[0].text
    assert empty.layout.xaxis.visible is False and empty.layout.yaxis.visible is False  # no axes from -1 to 6
    budget = {"plain_ms_per_token": {"forwards": 5.0, "step rest": 0.5, "between steps": 0.1, "prefill": 0.2},
              "speculative_ms_per_token": {"target forwards": 1.2, "verify extra rows": 0.1, "verify rest": -0.05,
                                           "draft forwards": 0.6, "draft rest": 0.2, "between rounds": 0.02,
                                           "prefill": 0.25},
              "plain_total_ms_per_token": 5.8, "speculative_total_ms_per_token": 2.32, "speedup": 2.5, "theory": 3.0,
              "k": 7, "c": 0.08, "tokens": 64, "target_forward_ms": 5.0, "draft_forward_ms": 0.4,
              "efficiency_steps": [{"without": "these runs", "efficiency": 0.83},
                                   {"without": "<b>all</b>", "efficiency": 1.0}]}
    fig = teach_charts.time_budget_figure(budget)
    bars = {bar.name: bar for bar in fig.data}
    assert len(bars) == 11 and fig.layout.barmode == "stack"
    assert fig.layout.legend.traceorder == "normal"  # the legend lists the parts in the order they stack
    assert bars["plain: forwards"].marker.pattern.shape == "" and bars["plain: step rest"].marker.pattern.shape == "/"
    assert bars["speculative: draft forwards"].marker.pattern.shape == ""
    assert list(bars["speculative: verify rest"].x) == [0.0]  # a part measured below zero draws as nothing
    assert "efficiency 0.83" in fig.layout.title.text and "Thm 3.8 3.00×" in fig.layout.title.text
    json.loads(fig.to_json())
    table = teach_view.render_budget(budget)
    assert table.count('class="teach-point"') == 2 and "&lt;b&gt;all&lt;/b&gt;" in table and "<b>" not in table


def test_every_chart_carries_plotly_whites_look_in_a_small_template(spec, plain):
    import plotly.io as pio

    from specui.ui import theme

    white = pio.templates["plotly_white"].to_plotly_json()
    kept = theme.TEMPLATE.to_plotly_json()
    assert kept["layout"] == {key: white["layout"][key] for key in kept["layout"]}  # the same values, fewer of them
    assert {"xaxis", "yaxis", "colorway", "font", "paper_bgcolor", "plot_bgcolor"} <= set(kept["layout"])
    assert kept["data"] == {kind: white["data"][kind] for kind in ("bar", "scatter")}
    for fig in [*charts.all_figures(spec, plain).values(), charts.arena_figure()]:
        template = fig.to_plotly_json()["layout"]["template"]
        assert template == kept
        assert {trace.type for trace in fig.data} <= {"bar", "scatter"}  # the kinds the template has defaults for
        assert len(json.dumps(template)) < 1500  # plotly_white by name was 7 kB in every figure sent
    titles = len(charts.ARENA_PANELS)  # the arena's panels come from one cached layout, which no figure changes
    assert [len(charts.arena_figure().layout.annotations) for _ in range(2)] == [titles + 1] * 2  # + the hint


def test_an_empty_charts_note_reads_at_aa_contrast_on_white():
    from specui.ui import theme

    def luminance(hex_colour):
        rgb = [int(hex_colour[i:i + 2], 16) / 255 for i in (1, 3, 5)]
        lin = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb]
        return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]

    colour = charts.speed_figure().layout.annotations[0].font.color
    assert 1.05 / (luminance(colour) + 0.05) >= 4.5, colour
    assert colour == theme.NOTE_COLOUR


def test_a_token_trees_acceptance_chart_names_its_rate_along_the_path(spec):
    """A tree round's drafted lists the path the target walked (its accepted nodes and the child rejected where it
    stopped), so its rate is the stats line's "acceptance along the path": the chart names its bars and line so."""
    from dataclasses import replace

    from specui.events import TreeNode

    node = TreeNode(index=0, token_id=7, parent=-1, target_prob=0.5, draft_prob=0.5, accept_prob=1.0, uniform=None,
                    verdict="accepted")
    tree = result_of([replace(r, tree=(node,), tree_path=(0,)) for r in spec.rounds])
    names = [t.name for t in charts.acceptance_figure(tree).data]
    assert names == ["accepted / judged along the path, this round", "running acceptance along the path"]
    assert [t.name for t in charts.acceptance_figure(spec).data] == ["accepted / drafted, this round",
                                                                     "running acceptance rate"]
