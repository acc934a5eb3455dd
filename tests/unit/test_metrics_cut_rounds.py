"""specui.metrics.fitted_alpha on rounds the token budget or an eos cut short, with figures worked out by hand.

The engine asks a round for K = min(K, tokens left - 1) drafts, so a run's last rounds may ask fewer than K (a
round with one token left asks none); an eos inside an accepted block cuts the round's emitted tokens after it,
its verification's num_accepted unchanged. Neither says anything about how often the target accepts a draft:
each round counts at the K it was asked (`num_draft_tokens`), with the tokens its verification gave.
"""

import math

import pytest

from specui.events import Round
from specui.metrics import (
    acceptance_rate,
    alpha_from_mean_accepted_length,
    expected_tokens_per_round,
    fitted_alpha,
    mean_accepted_length,
    theory,
)


def _round(asked, accepted, *, drafted=None, emitted=None, copied=False):
    """A Round asked for `asked` drafts, `drafted` of them proposed (default: as asked), `accepted` kept; it
    emitted `emitted` tokens (default: accepted + 1; fewer where an eos cut it)."""
    drafted = asked if drafted is None else drafted
    emitted = accepted + 1 if emitted is None else emitted
    return Round(index=0, token_ids=list(range(emitted)), kinds=["accepted"] * emitted, drafted=list(range(drafted)),
                 num_accepted=accepted, target_probs=[], draft_probs=[], accept_probs=[], uniforms=[],
                 token_target_probs=[], token_draft_probs=[], residual_top=[], num_draft_tokens=asked,
                 draft_s=0.0, verify_s=0.0, elapsed_s=0.0, copied=copied)


def test_a_last_round_the_budget_cut_short_is_not_read_as_rejections():
    """K = 4, 17 tokens: three full rounds of 5 tokens, then 2 tokens left: the last round asks 1 draft and the
    target accepts it. Every draft was accepted: alpha is 1 (the old fit read 17/4 = 4.25 tokens a round at K = 4
    as alpha < 1)."""
    rounds = [_round(4, 4)] * 3 + [_round(1, 1)]
    assert mean_accepted_length(rounds) == 17 / 4  # the run's own count: the cut round's 2 tokens
    assert acceptance_rate(rounds) == 1.0
    assert fitted_alpha(rounds) == 1.0
    assert fitted_alpha(rounds, 4) == 1.0


def test_a_round_asked_for_no_drafts_says_nothing_about_alpha():
    """K = 1, 16 tokens: seven rounds accept their draft (2 tokens each), the eighth rejects it (1 token), and the
    ninth, with one token left, asks none (1 token). Over the eight rounds that could accept: 15 tokens = 8 (1 + alpha),
    alpha = 7/8, the acceptance rate (the old fit took 16/9 tokens a round at K = 1: alpha = 7/9)."""
    rounds = [_round(1, 1)] * 7 + [_round(1, 0), _round(0, 0)]
    assert acceptance_rate(rounds) == 7 / 8
    assert fitted_alpha(rounds) == pytest.approx(7 / 8, abs=1e-12)


def test_a_round_an_eos_cut_counts_its_verification():
    """K = 4: a round accepts all 4 drafts (5 tokens); the next accepts all 4 too, but its second token is the eos,
    which ends the run: 2 tokens emitted. Its verification accepted 4 of 4: alpha is 1."""
    rounds = [_round(4, 4), _round(4, 4, emitted=2)]
    assert mean_accepted_length(rounds) == 7 / 2  # tokens emitted per target forward
    assert acceptance_rate(rounds) == 1.0
    assert fitted_alpha(rounds) == 1.0


def test_the_k_chosen_above_what_the_budget_let_any_round_ask():
    """K 8 chosen with 8 new tokens: the one round asks 7 (its own token is the eighth) and accepts all 7. At K = 8,
    alpha is 1 (the old fit put 8 tokens a round on K = 8's curve, alpha < 1), and the theory's tokens per round at
    K = 8 are 9, what a full round gives."""
    rounds = [_round(7, 7)]
    assert fitted_alpha(rounds, 8) == 1.0
    fit = theory(rounds, c=0.1, k=8)
    assert (fit.alpha, fit.k, fit.tokens_per_round) == (1.0, 8, 9.0)


def test_rounds_of_different_k_each_count_at_their_own():
    """A round asked 1 draft accepts it (2 tokens), a round asked 2 rejects the first (1 token): (1 + a) + (1 + a + a²)
    = 3, a² + 2a - 1 = 0, a = sqrt(2) - 1."""
    rounds = [_round(1, 1), _round(2, 0)]
    alpha = fitted_alpha(rounds, 2)
    assert alpha == pytest.approx(math.sqrt(2) - 1, abs=1e-12)
    assert expected_tokens_per_round(alpha, 1) + expected_tokens_per_round(alpha, 2) == pytest.approx(3)


def test_a_fixed_k_run_without_cuts_inverts_eq1_at_its_mean_accepted_length():
    """Nothing cut: alpha is eq. 1 inverted at the mean accepted length, 8/3 tokens a round at K = 4; a drafter that
    proposed nothing where it was asked for 4 (prompt lookup without a match) counts as a round of one token at K 4."""
    rounds = [_round(4, 4), _round(4, 1), _round(4, 0, drafted=0)]
    assert fitted_alpha(rounds) == pytest.approx(alpha_from_mean_accepted_length(8 / 3, 4), abs=1e-12)
    assert fitted_alpha([_round(4, 0)] * 3) == pytest.approx(0.0, abs=1e-12)


def test_no_fit_without_drafts_or_for_a_mix_of_copies_and_the_models_rounds():
    assert fitted_alpha([_round(0, 0)]) is None  # a run of one token: it asked for no drafts
    assert fitted_alpha([_round(0, 0)], 4) is None
    assert fitted_alpha([]) is None
    assert fitted_alpha([_round(4, 2), _round(4, 6, drafted=6, copied=True)]) is None
    assert fitted_alpha([_round(2, 5, drafted=5, copied=True)]) == 1.0  # a copy longer than K, all accepted
