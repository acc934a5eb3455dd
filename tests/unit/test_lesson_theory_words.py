"""The Teach tab's theory help says how the acceptance rate and the fitted α compare as they do in its own K sweep: a
short greedy run at K = 1 (16 tokens: eight rounds of one draft, seven accepted, then a last round with one token
left that drafts none) has an acceptance rate of 7/8 = 0.875 above its α of 0.78, fitted to its 16/9 tokens per
round, where the help said the rate "is lower than α" without a condition and a class saw the K sweep's table
disagree."""

from __future__ import annotations

from types import SimpleNamespace

from specui import metrics
from specui.ui.teach_view import THEORY_HELP


def test_the_help_says_when_the_acceptance_rate_is_lower_than_alpha():
    rounds = ([SimpleNamespace(num_accepted=1, num_drafted=1, num_draft_tokens=1)] * 7
              + [SimpleNamespace(num_accepted=0, num_drafted=1, num_draft_tokens=1),
                 SimpleNamespace(num_accepted=0, num_drafted=0, num_draft_tokens=0)])
    assert sum(r.num_accepted + 1 for r in rounds) == 16
    rate, alpha = metrics.acceptance_rate(rounds), metrics.fitted_alpha(rounds)
    assert rate == 0.875 and round(alpha, 2) == 0.78 and rate > alpha  # the K sweep's K = 1 row
    said = " ".join(THEORY_HELP.split())
    assert "is lower than α because" not in said  # not always
    assert "usually lower than α" in said and "fewer than K" in said  # and why not always
