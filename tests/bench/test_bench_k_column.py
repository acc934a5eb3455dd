"""`python -m specui.bench --drafter all`'s K column says "<=K" exactly where a confidence stop may end a drafter's
rounds sooner, by the rule the app's arena table follows (`specui.arena.k_said`, "≤ K" there), and its footnote
names those drafters alone: not prompt lookup (no confidence to stop on) nor a drafter at K 1 (a round drafts its one
token whatever), which `--draft-confidence` gives a stop too. A hand-made report: no model."""

from __future__ import annotations

from specui.bench.report import format_drafter_table, format_table


def _row(label: str, k: int | None, confidence: float | None) -> dict:
    return {"label": label, "num_draft_tokens": k, "draft_confidence": confidence, "tokens_per_s": 10.0,
            "speedup_vs_plain": 1.0, "acceptance_rate": 0.5, "mean_accepted_length": 1.5, "draft_cost_ratio": 0.1,
            "theoretical_speedup": 1.2, "identical_to_plain": True}


def test_the_k_column_and_its_footnote_mark_only_the_drafters_a_stop_can_cut_short():
    drafters = {"plain": _row("plain (target alone)", None, None), "model": _row("draft model", 4, 0.5),
                "medusa": _row("Medusa", 1, 0.5), "prompt_lookup": _row("prompt lookup", 2, 0.5),
                "eagle": _row("EAGLE", 4, 0.0), "model_lookup": _row("draft model + lookup", 4, 0.5)}
    report = {"num_draft_tokens": 4, "drafters": drafters, "temperature": 0.0, "preset": "p", "max_new_tokens": 4,
              "num_prompts": 1, "repeats": 1, "device": "cpu", "torch_threads": 1, "torch_version": "t",
              "transformers_version": "t", "identical_to_plain": True, "rows": []}
    lines = format_drafter_table(report).splitlines()
    k = {label: line[24:28].strip() for line in lines for label in (d["label"] for d in drafters.values())
         if line[:24].rstrip() == label}
    assert k == {"plain (target alone)": "n/a", "draft model": "<=4", "Medusa": "1", "prompt lookup": "2", "EAGLE": "4",
                 "draft model + lookup": "4"}  # its copies run to 6 tokens, past this K: no "<="
    assert any(line.startswith("<=K: drafting while confident") and "(draft_confidence: draft model 0.5)" in line
               for line in lines), lines


class _Figures(dict):
    """A one-drafter report by hand: the fields the header reads, any other figure 1.0."""

    def __missing__(self, key):
        return 1.0


def test_the_one_drafter_tables_k_follows_the_same_rule():
    """`python -m specui.bench --drafter prompt_lookup --draft-confidence 0.5` (or any drafter at K 1) said "K=4 at
    most, drafting while confident >= 0.5" and "speculative (K<=4)" of rounds no confidence can cut short."""
    def header(drafter: str, k: int, confidence: float) -> list[str]:
        text = format_table(_Figures(drafter=drafter, num_draft_tokens=k, draft_confidence=confidence, preset="p",
                                     temperature=0.0, max_new_tokens=4, num_prompts=1, repeats=1, device="cpu",
                                     torch_threads=1, rows=[]))
        return [line for line in text.splitlines() if line.startswith(("specui bench:", "speculative"))]

    assert "K=4 at most, drafting while confident >= 0.5," in header("model", 4, 0.5)[0]
    assert "(K<=4)" in header("model", 4, 0.5)[1]
    for drafter, k in (("prompt_lookup", 4), ("model", 1), ("model_lookup", 4)):
        first, spec = header(drafter, k, 0.5)
        assert f"K={k}," in first and "confident" not in first and f"(K={k})" in spec, (first, spec)
