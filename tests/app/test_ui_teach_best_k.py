"""The Teach tab's "best K" beside a K slider that stops at 8: a best K past it says where to try it.

The theory searches K 1..16 (`metrics.best_k`), so a well-measured drafter's best K can be 12 while this tab's
slider ends at 8: the number alone read as a K the class could pick here.
"""

from __future__ import annotations

from types import SimpleNamespace

from specui import metrics
from specui.lesson import Measured
from specui.ui import teach_charts
from specui.ui.teach_view import TEACH_K_MAX, render_measured


def _measured(alpha: float, c: float) -> Measured:
    best = metrics.best_k(alpha, c)
    return Measured(k=4, acceptance_rate=alpha, alpha=alpha,
                    tokens_per_round=metrics.expected_tokens_per_round(alpha, 4),
                    cost_ratio=c, verify_cost=1.0, tokens_per_s=20.0, plain_tokens_per_s=10.0, speedup=2.0,
                    theory_tokens_per_round=metrics.expected_tokens_per_round(alpha, 4),
                    theory_speedup=metrics.theoretical_speedup(alpha, 4, c), best_k=best,
                    best_k_speedup=metrics.theoretical_speedup(alpha, best, c))


def test_a_best_k_past_the_slider_says_to_try_it_in_the_chat_tab():
    far = _measured(0.95, 0.02)  # a cheap, good drafter: the theory's best K is past 8
    assert far.best_k > TEACH_K_MAX
    assert "try it in the Chat tab" in render_measured(SimpleNamespace(measured=far))
    assert "Chat tab" in teach_charts.theory_speedup_figure(far).layout.title.text  # the title wraps: the short part


def test_a_best_k_the_slider_reaches_has_no_note():
    near = _measured(0.6, 0.1)
    assert near.best_k <= TEACH_K_MAX
    assert "Chat tab" not in render_measured(SimpleNamespace(measured=near))
    assert "Chat tab" not in teach_charts.theory_speedup_figure(near).layout.title.text
