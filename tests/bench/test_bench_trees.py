"""`python -m specui.bench --tree-width ...` on one short prompt: the drafters that draft trees run side by side
with plain decoding and with their own chain of the same K, and report the tree's ratios over that chain;
prompt lookup is reported as skipped (it cannot draft trees), with no numbers, and is not run as a chain.
No timing is asserted."""

from __future__ import annotations

import pytest

from specui.bench.report import format_drafter_table
from tests.bench.test_bench import BUNDLED, _run, bench_config  # noqa: F401 - bench_config is a fixture


@pytest.mark.slow
def test_every_drafter_that_can_draft_trees_side_by_side_and_the_rest_skipped(bench_config, tmp_path):  # noqa: F811
    report, stdout = _run([*bench_config, "--drafter", "all", "--tree-width", "2"], tmp_path)
    assert report["tree_width"] == 2 and "prompt_lookup" not in report["drafters"]
    assert list(report["drafters"])[:3] == ["plain", "model", "model chain"] and report["identical_to_plain"] is True
    tree, chain = report["drafters"]["model"], report["drafters"]["model chain"]
    assert chain["label"] == "draft model, chain" and chain["identical_to_plain"] is True
    assert tree["tree_vs_chain_length"] == pytest.approx(tree["mean_accepted_length"] / chain["mean_accepted_length"])
    assert tree["tree_vs_chain_speed"] == pytest.approx(tree["tokens_per_s"] / chain["tokens_per_s"])
    assert "tree_vs_chain_length" not in chain and "prompt_lookup chain" not in report["drafters"]
    assert "tree / chain, draft model:" in stdout and "the chain of K=" in stdout
    copying = {"model_lookup", "prompt_lookup"}
    assert set(report["skipped"]) == ({*copying, "early_exit", "early_exit_lookup"} if BUNDLED.exists() else copying)
    assert report["skipped"]["prompt_lookup"] == "cannot draft token trees (no distributions to rank children by)"
    assert "skipped: prompt lookup: it cannot draft token trees" in stdout and "token trees of width 2" in stdout


def test_the_table_names_skipped_drafters_and_the_tree_shape():
    d = {"label": "plain (target alone)", "tokens_per_s": 10.0, "speedup_vs_plain": 1.0, "acceptance_rate": None,
         "mean_accepted_length": 1.0, "draft_cost_ratio": None, "theoretical_speedup": None, "identical_to_plain": None}
    report = {"num_draft_tokens": 3, "drafters": {"plain": d}, "temperature": 0.0, "tree_width": 3, "tree_nodes": 8,
              "preset": "p", "max_new_tokens": 4, "num_prompts": 1, "repeats": 1, "device": "cpu", "torch_threads": 1,
              "torch_version": "t", "transformers_version": "t", "identical_to_plain": True, "rows": [],
              "skipped": {"prompt_lookup": "cannot draft token trees", "early_exit": "cannot draft token trees"}}
    table = format_drafter_table(report)
    assert "token trees of width 3 (8 nodes)" in table
    assert "skipped: prompt lookup: it cannot draft token trees (tree width 3)" in table
    assert "skipped: early exit" in table
    assert "token trees" not in format_drafter_table({**report, "tree_width": 1, "skipped": {}})


@pytest.mark.slow
def test_one_drafters_tree_is_timed_beside_its_chain(bench_config, tmp_path):  # noqa: F811
    report, stdout = _run([*bench_config, "--tree-width", "3", "--tree-nodes", "5", "--num-draft-tokens", "3"],
                          tmp_path)
    assert report["tree_width"] == 3 and report["tree_nodes"] == 5 and report["identical_to_plain"] is True
    assert report["chain_identical_to_plain"] is True and report["chain_tokens_per_s"] > 0
    assert report["tree_vs_chain_length"] == pytest.approx(report["mean_accepted_length"]
                                                           / report["chain_mean_accepted_length"])
    speed = report["speculative_tokens_per_s"] / report["chain_tokens_per_s"]
    assert report["tree_vs_chain_speed"] == pytest.approx(speed)
    assert "token trees of width 3 (5 nodes) against the chain of K=3" in stdout
    assert "with a token tree, the theorem's chain of K" in stdout  # what the theory line means for a tree


def test_a_chain_run_has_no_chain_arm():
    from specui.bench.run import ARMS, CHAIN, plan_arms
    from specui.settings import DecodeSettings

    assert plan_arms(DecodeSettings()) == ARMS
    arms = plan_arms(DecodeSettings(tree_width=2))
    assert list(arms) == [*ARMS, CHAIN] and arms[CHAIN].chain and arms[CHAIN].method == "speculative"
