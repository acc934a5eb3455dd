"""The chat's stats line says what its figures are: the acceptance rate and the theoretical speedup's fitted α each
say, in their tooltips, why they differ; a token-tree run names its rate as the rate along the walked path (not a
share of every drafted node) and says how many nodes a round drafted, with the budgets that pay on a CPU past them;
the API's refusal of a drafter lists the names and the labels, both of which it takes. Real runs of tiny models."""

from __future__ import annotations

import html
import re

import pytest

from specui import runstats
from specui.engine import SpeculativeEngine
from specui.settings import SettingsError
from specui.ui import stats
from specui.ui.request import Settings
from tests.helpers import make_model, noisy_copy

PROMPT = [5, 6, 7, 8, 5, 6, 7, 9, 5, 6]


@pytest.fixture(scope="module")
def engine():
    target = make_model("llama", layers=2, seed=0)
    return SpeculativeEngine(target, noisy_copy(target, noise=0.3, seed=1))


def shown(line: str) -> dict[str, tuple[str, str]]:
    """The stats line's figures: name -> (value, tooltip), as the page shows them."""
    spans = re.findall(r'<span class="stat" title="([^"]*)"><span class="stat-name">([^<]*)</span> '
                       r'<span class="stat-value">([^<]*)</span>', line)
    return {html.unescape(name): (html.unescape(value), html.unescape(title)) for title, name, value in spans}


def test_a_chains_acceptance_rate_and_fitted_alpha_each_say_why_they_differ(engine):
    result = engine.generate(PROMPT, max_new_tokens=24, num_draft_tokens=4, seed=0)
    figures = shown(stats.stats_html(runstats.run_stats(result, k=4)))
    rate, rate_tip = figures["acceptance rate"]
    theory, theory_tip = figures["theoretical speedup"]
    assert rate == f"{result.acceptance_rate:.1%}" and "fitted α=" in theory
    assert "those after a rejection" in rate_tip and "Not the fitted α" in rate_tip
    assert "fitted so that (1 - α^(K+1)) / (1 - α) is the measured tokens per round" in theory_tip
    assert "not the acceptance rate" in theory_tip and "each round at the K it was asked" in theory_tip
    # no plain run here: c's target forward is this run's verify of K+1 tokens, and the tooltip says what that does
    assert "the plain run's (Compare on), else this run's verify forwards of K+1 tokens" in theory_tip
    assert "tree" not in figures and "acceptance along the path" not in figures


def test_a_static_tree_names_its_rate_along_the_path_and_says_its_126_nodes_are_past_what_pays(engine):
    """Width 2, K 6, Tree nodes 0: 126 nodes a round, of which each round keeps one path. The rate counts the nodes the
    target judged along that path (the accepted ones and the child rejected where the walk stopped), as the engine
    defines it for trees: named so, and its tooltip says it is not a share of every drafted node."""
    result = engine.generate(PROMPT, max_new_tokens=24, num_draft_tokens=6, tree_width=2, seed=0)
    trees = [r for r in result.rounds if r.tree]
    assert max(len(r.tree) for r in trees) == 126
    walked = sum(len(r.tree_path) + (len(r.drafted) > len(r.tree_path)) for r in trees)
    assert result.acceptance_rate == pytest.approx(sum(len(r.tree_path) for r in trees) / walked)
    line = stats.stats_html(runstats.run_stats(result))
    figures = shown(line)
    assert "acceptance rate" not in figures
    rate, tip = figures["acceptance along the path"]
    assert rate == f"{result.acceptance_rate:.1%}"
    assert "judged along each round's path" in tip and "Not a share of every drafted node" in tip
    tree, tree_tip = figures["tree"]
    assert tree == "up to 126 nodes a round: on a CPU, Tree nodes 7 to 11 pay best"
    assert "the static tree" in tree_tip and "126 at width 2 and K 6" in tree_tip
    assert figures["theoretical speedup"][0] == "– (token trees)"
    assert "theory" in runstats.run_stats(result).as_dict() and "tree_nodes" not in runstats.run_stats(result).as_dict()


def test_a_token_tree_arenas_rate_is_named_along_the_path_in_its_table_chart_and_title(engine):
    """The arena races token trees too (tree_width > 1): its table's column, its chart's panel and a contestant's
    title named the tree's rate "acceptance rate", which the stats line calls "acceptance along the path" (the nodes
    judged along each round's path, not a share of every drafted node); a chain arena's stay "acceptance rate"."""
    from specui import arena
    from specui.ui import arena_view, charts

    plain = engine.generate(PROMPT, max_new_tokens=12, speculative=False, seed=0)
    for width, named in ((2, "acceptance along the path"), (1, "acceptance rate")):
        tree = engine.generate(PROMPT, max_new_tokens=12, num_draft_tokens=3, tree_width=width,
                               tree_nodes=5 if width > 1 else 0, seed=0)
        outcome = arena.summarise({"plain": plain, "model": tree}, greedy=False)
        rate = stats.arena_rows(outcome)[1][stats.ARENA_HEADERS.index("acceptance rate")]
        assert rate == f"{tree.acceptance_rate:.3f}" + (" along the path" if width > 1 else "")
        panels = [a.text for a in charts.arena_figure(outcome).layout.annotations]
        assert named in panels and ("acceptance rate" in panels) == (width == 1)
        assert f"{named} {tree.acceptance_rate:.2f}" in arena_view._title("model", outcome.standing("model"))


def test_a_dynamic_tree_within_what_pays_gives_its_nodes_alone(engine):
    result = engine.generate(PROMPT, max_new_tokens=24, num_draft_tokens=6, tree_width=2, tree_nodes=9, seed=0)
    figures = shown(stats.stats_html(runstats.run_stats(result)))
    assert figures["tree"][0] == "up to 9 nodes a round"


def test_a_bad_drafter_is_refused_with_the_names_and_the_labels_both_taken():
    with pytest.raises(SettingsError) as refused:
        Settings.from_ui(num_draft_tokens=4, max_new_tokens=16, drafter="oracle")
    message = str(refused.value)
    assert ("a name (model, model_lookup, eagle, medusa, early_exit, early_exit_lookup, prompt_lookup) or a label "
            "(draft model, draft model + lookup, EAGLE, Medusa, early exit, early exit + lookup, prompt lookup)") \
        in message and message.endswith("(got 'oracle')")
    for taken in ("early_exit_lookup", "early exit + lookup", "EAGLE", "eagle"):
        assert Settings.from_ui(num_draft_tokens=4, max_new_tokens=16, drafter=taken).drafter in (
            "early_exit_lookup", "eagle")
