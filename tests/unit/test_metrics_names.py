"""One name, one meaning: "alpha" (α) is the theory's fitted per-token acceptance (`metrics.fitted_alpha`) wherever
a figure is named so, and accepted / drafted is the acceptance rate. `python -m specui.bench --drafter all`'s table
headed its accepted / drafted column "alpha" and its footnote said "alpha: accepted / drafted", beside a "theory"
column at the fitted alpha; the one-drafter table said its alpha was "fitted to the mean accepted length", which it
is not where the budget cut rounds short. A token tree's rate counts the nodes judged along each round's path (the
engine's `drafted` of a tree round), which the app's stats line names "acceptance along the path"; the benchmark
called it "acceptance rate (accepted / drafted)" as a chain's. Hand-made reports: no model."""

from __future__ import annotations

from specui.bench.report import format_drafter_table, format_table


def _row(label: str, k: int | None) -> dict:
    return {"label": label, "num_draft_tokens": k, "draft_confidence": 0.0, "tokens_per_s": 10.0,
            "speedup_vs_plain": 1.0, "acceptance_rate": 0.123, "mean_accepted_length": 1.5, "draft_cost_ratio": 0.1,
            "theoretical_speedup": 1.2, "identical_to_plain": True}


class _Figures(dict):
    """A one-drafter report by hand: the fields the header reads, any other figure 1.0."""

    def __missing__(self, key):
        return 1.0


def _drafter_report(**extra) -> dict:
    """A `--drafter all` report by hand: plain and the draft model at K 4, `extra` on top."""
    return {"num_draft_tokens": 4, "drafters": {"plain": _row("plain (target alone)", None),
                                               "model": _row("draft model", 4)},
            "temperature": 0.0, "preset": "p", "max_new_tokens": 4, "num_prompts": 1, "repeats": 1, "device": "cpu",
            "torch_threads": 1, "torch_version": "t", "transformers_version": "t", "identical_to_plain": True,
            "rows": [], **extra}


def test_the_drafter_tables_accepted_over_drafted_is_the_acceptance_rate_not_alpha():
    lines = format_drafter_table(_drafter_report()).splitlines()
    header = next(line for line in lines if line.startswith("drafter"))
    assert "alpha" not in header.split() and "accept" in header.split()
    note = next(line for line in lines if "accepted / drafted" in line)
    assert note.startswith("accept: acceptance rate, accepted / drafted") and "fitted per-token alpha" in note
    assert "alpha: accepted" not in "\n".join(lines)
    row = next(line for line in lines if line.startswith("draft model"))
    assert "0.123" in row  # the column holds the acceptance rate


def test_the_one_drafter_tables_alpha_says_how_it_is_fitted():
    text = format_table(_Figures(drafter="model", num_draft_tokens=4, draft_confidence=0.0, preset="p",
                                 temperature=0.0, max_new_tokens=4, num_prompts=1, repeats=1, device="cpu",
                                 torch_threads=1, rows=[], theoretical_speedup=2.0, alpha_per_token=0.8))
    line = next(line for line in text.splitlines() if line.startswith("theoretical speedup"))
    assert "per-token alpha 0.800 fitted to the tokens per round, each at the K it asked" in line
    assert "fitted to the mean accepted length" not in text


def test_a_token_trees_rate_is_named_as_the_stats_line_names_it():
    figures = dict(drafter="model", num_draft_tokens=4, draft_confidence=0.0, preset="p", temperature=0.0,
                   max_new_tokens=4, num_prompts=1, repeats=1, device="cpu", torch_threads=1, rows=[],
                   theoretical_speedup=2.0, alpha_per_token=0.8, acceptance_rate=0.75)
    chain = format_table(_Figures(figures, tree_width=1))
    assert "acceptance rate 0.750 (accepted / drafted)" in chain and "along the path" not in chain
    tree = format_table(_Figures(figures, tree_width=2, tree_nodes=0))
    assert "acceptance along the path 0.750 (token trees: accepted nodes / the nodes judged along each round's path" \
        in tree and "(accepted / drafted)" not in tree
    lines = format_drafter_table(_drafter_report(tree_width=2, tree_nodes=0)).splitlines()
    note = next(line for line in lines if "accepted / drafted" in line)
    assert "a token tree's: accepted nodes / the nodes judged along each round's path" in note
    # c of a tree is per level (`runstats.draft_forwards`, d79fe93), not per node along its walked path
    cost = next(line for line in lines if line.startswith("c: "))
    assert cost.startswith("c: median seconds per drafted token, a token tree's per level (one draft forward each) /")
