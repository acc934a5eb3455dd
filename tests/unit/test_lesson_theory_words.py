"""The Teach tab's theory help says how the acceptance rate and the fitted α compare as they do in its own K sweep: a
short greedy run at K = 1 (16 tokens: eight rounds of one draft, seven accepted, then a last round with one token
left that asks for none) has an acceptance rate of 7/8 and an α of 7/8 too (the last round, asked for no draft, says
nothing about α; it read 0.78 when α was fitted to 16/9 tokens a round at K = 1); a rate above α comes of rounds whose
drafter proposed fewer than it was asked (a confidence stop, prompt lookup without a match), and the help says so."""

from __future__ import annotations

from types import SimpleNamespace

from specui import metrics
from specui.ui import teach_view
from specui.ui.teach_view import THEORY_HELP


def test_the_help_says_when_the_acceptance_rate_is_lower_than_alpha():
    rounds = ([SimpleNamespace(num_accepted=1, num_drafted=1, num_draft_tokens=1)] * 7
              + [SimpleNamespace(num_accepted=0, num_drafted=1, num_draft_tokens=1),
                 SimpleNamespace(num_accepted=0, num_drafted=0, num_draft_tokens=0)])
    assert sum(r.num_accepted + 1 for r in rounds) == 16
    rate, alpha = metrics.acceptance_rate(rounds), metrics.fitted_alpha(rounds)
    assert rate == 0.875 and round(alpha, 6) == 0.875  # the K sweep's K = 1 row: the budget's last round left out
    unmatched = rounds[:7] + [SimpleNamespace(num_accepted=0, num_drafted=0, num_draft_tokens=1)]  # proposed none
    assert metrics.acceptance_rate(unmatched) == 1.0 > metrics.fitted_alpha(unmatched)
    said = " ".join(THEORY_HELP.split())
    assert "is lower than α because" not in said  # not always
    assert "usually lower than α" in said and "proposed fewer than K" in said  # and why not always
    assert "not as rejections" in said  # the budget's short rounds
    first = said.split("* **Tokens per round**")[0]  # α's own line: fitted per round, not to the mean at one K
    assert "each round at the K it was asked" in first and "expected tokens per round equal" not in first


def test_the_theory_tokens_hint_names_an_end_of_text_beside_the_budget():
    """An end of text inside an accepted block cuts a round's emitted tokens, not what its check accepted (the fit's
    count): K 4, a round of 5 tokens, then one of 2 (its verification accepted 4). α is 1 and the theory's 5 tokens a
    round stand above the measured 3.5; the hint beside them named only the token budget's short rounds."""
    rounds = [SimpleNamespace(num_accepted=4, num_drafted=4, num_draft_tokens=4, token_ids=[0] * n) for n in (5, 2)]
    measured = SimpleNamespace(alpha=metrics.fitted_alpha(rounds), acceptance_rate=1.0,
                               tokens_per_round=metrics.mean_accepted_length(rounds), theory_tokens_per_round=5.0,
                               cost_ratio=None, verify_cost=None, speedup=None, theory_speedup=None, best_k=None,
                               best_k_speedup=None, k=4, tokens_per_s=1.0, plain_tokens_per_s=None)
    assert (measured.alpha, measured.tokens_per_round) == (1.0, 3.5)
    html = teach_view.render_measured(SimpleNamespace(measured=measured))
    hint = html.split("theory tokens per round")[0].rsplit('title="', 1)[1]
    assert "token budget" in hint and "end of text" in hint
