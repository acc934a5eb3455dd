"""The Teach tab's theory chart titles read as formulas: wrapped to fit a phone's chart (`teach_charts._wrapped`), a
line never ends inside a sum or a difference. At 42 characters a line the speedup chart's title read
"Speedup = (1 − α^(K+1)) / ((1 − α)(Kc +" over "1)), c = 0.005", on a desktop's 682 px chart as on a phone's, and
its subtitle's "theory at K=7" over "1.82×". Built from a hand-written `Measured`, no model."""

from __future__ import annotations

import re

from specui import metrics
from specui.lesson import Measured
from specui.ui import teach_charts

ALPHA, C, K = 0.47, 0.005, 7


def _lines(title: str) -> list[str]:
    """A plotly title's lines as read: its <br> breaks, without the <sub> and <span> marks around them."""
    return [re.sub(r"<[^>]+>", "", line).replace("\u00a0", " ") for line in title.split("<br>")]


def test_the_speedup_title_is_cut_between_its_terms_never_at_a_sign():
    best = metrics.best_k(ALPHA, C, k_max=8)
    m = Measured(k=K, acceptance_rate=0.15, alpha=ALPHA, tokens_per_round=1.88, cost_ratio=C, verify_cost=1.09,
                 tokens_per_s=20.0, plain_tokens_per_s=20.6, speedup=0.97, theory_tokens_per_round=1.88,
                 theory_speedup=metrics.theoretical_speedup(ALPHA, K, C), best_k=best,
                 best_k_speedup=metrics.theoretical_speedup(ALPHA, best, C))
    for fig in (teach_charts.theory_speedup_figure(m), teach_charts.theory_speedup_figure(),
                teach_charts.theory_tokens_figure(m)):
        lines = _lines(fig.layout.title.text)
        assert all(not re.search(r"[+−(]$", line.rstrip()) and not re.match(r"\s*[+−]", line) for line in lines), lines
        said = " ".join(lines)
        assert "(1 − α)" in said and "(1 − α^(K+1))" in said
    speedup = _lines(teach_charts.theory_speedup_figure(m).layout.title.text)
    assert any("((1 − α)(Kc + 1))" in line for line in speedup), speedup
    theory = f"theory {m.theory_speedup:.2f}× at K={K}"
    assert any(theory in line for line in speedup), speedup  # the number beside what it is, on one line



def test_a_best_k_and_its_speedup_stay_on_one_line():
    """At α 0.03 and c 0.3 the speedup chart's subtitle read "... best K=1" over "(0.79×)": the best K is kept beside
    its speedup."""
    best = metrics.best_k(0.03, 0.3, k_max=8)
    m = Measured(k=8, acceptance_rate=0.01, alpha=0.03, tokens_per_round=1.03, cost_ratio=0.3, verify_cost=1.0,
                 tokens_per_s=20.0, plain_tokens_per_s=20.6, speedup=None, theory_tokens_per_round=1.03,
                 theory_speedup=metrics.theoretical_speedup(0.03, 8, 0.3), best_k=best,
                 best_k_speedup=metrics.theoretical_speedup(0.03, best, 0.3))
    lines = _lines(teach_charts.theory_speedup_figure(m).layout.title.text)
    assert any(f"K={best} ({m.best_k_speedup:.2f}×)" in line for line in lines), lines
