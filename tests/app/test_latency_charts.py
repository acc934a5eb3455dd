"""A compare run's speculative charts (acceptance per round, tokens per round, acceptance by position) are built once
its run has ended, not again for every frame of the plain run and the final frame: they stand still then, yet each
frame due a chart built them again. Counted by the figures themselves: one object through the plain run and the
final frame, whose JSON is what building them afresh gives (no value changes)."""

from __future__ import annotations

from specui.loading import PairCache
from specui.ui import charts
from specui.ui.request import Settings
from specui.ui.session import Showcase
from tests.helpers import ui_config

PROMPT = "import os\nimport sys\n\n\ndef main(argv):\n"
STILL = ("chart-acceptance", "chart-tokens-per-round", "chart-position")


def test_a_finished_runs_charts_are_built_once_through_the_plain_run():
    showcase = Showcase(ui_config(), PairCache(), text_interval=0, chart_interval=0)  # charts in every frame
    frames = list(showcase.run(PROMPT, Settings(max_new_tokens=24, num_draft_tokens=2, compare=True)))
    final, run = frames[-1]
    assert final.done and run.phase == "done" and run.plain.rounds
    later = [f.figures for f, _ in frames if f.figures and "tokens/s" in f.message]  # from the plain run's start
    assert len(later) >= 3, "too few frames in the plain run to tell"
    for name in STILL:
        assert len({id(figures[name]) for figures in later}) == 1, name  # built once, sent as it was
    fresh = charts.all_figures(run.spec, run.plain)
    assert list(final.figures) == list(fresh)
    assert {name: f.to_json() for name, f in final.figures.items()} == {name: f.to_json() for name, f in fresh.items()}
