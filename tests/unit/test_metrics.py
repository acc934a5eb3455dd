"""specui.metrics: the formulas against the reference examples, and their edge cases."""

from types import SimpleNamespace

import pytest

from specui.events import Round
from specui.metrics import (
    acceptance_rate,
    alpha_from_mean_accepted_length,
    best_k,
    draft_cost_ratio,
    efficiency,
    expected_tokens_per_round,
    mean_accepted_length,
    theoretical_speedup,
)


def _round(drafted, accepted, emitted=None):
    """A minimal Round: `drafted` tokens proposed, `accepted` of them kept, one more emitted."""
    emitted = accepted + 1 if emitted is None else emitted
    return Round(index=0, token_ids=list(range(emitted)), kinds=["accepted"] * emitted, drafted=list(range(drafted)),
                 num_accepted=accepted, target_probs=[], draft_probs=[], accept_probs=[], uniforms=[],
                 token_target_probs=[], token_draft_probs=[], residual_top=[], num_draft_tokens=drafted,
                 draft_s=0.0, verify_s=0.0, elapsed_s=0.0)


@pytest.mark.parametrize("c, k, speedup", [(0.05, 8, 3.1), (0.1, 6, 2.5), (0.2, 4, 1.9)])
def test_reference_examples(c, k, speedup):
    # REFERENCE.md: alpha = 0.8 with c = 0.05 / 0.1 / 0.2 -> K = 8 / 6 / 4, 3.1x / 2.5x / 1.9x
    assert best_k(0.8, c) == k
    assert theoretical_speedup(0.8, k, c) == pytest.approx(speedup, abs=0.05)


def test_measured_verify_cost():
    assert theoretical_speedup(0.8, 4, 0.05, verify_cost=1.0) == theoretical_speedup(0.8, 4, 0.05)
    assert theoretical_speedup(0.8, 4, 0.05, verify_cost=1.3) == pytest.approx(
        expected_tokens_per_round(0.8, 4) / (4 * 0.05 + 1.3))
    with pytest.raises(ValueError, match="verify_cost"):
        theoretical_speedup(0.8, 4, 0.05, verify_cost=0.0)


def test_expected_tokens_per_round():
    assert expected_tokens_per_round(0.5, 2) == pytest.approx(1 + 0.5 + 0.25)
    assert expected_tokens_per_round(0.8, 0) == pytest.approx(1.0)


def test_alpha_edges():
    assert expected_tokens_per_round(1.0, 4) == 5.0  # every draft and the bonus
    assert expected_tokens_per_round(0.0, 4) == 1.0  # only the target's own token
    assert expected_tokens_per_round(1 - 1e-12, 4) == pytest.approx(5.0, rel=1e-6)  # continuous at 1
    assert theoretical_speedup(1.0, 4, 0.0) == 5.0
    assert theoretical_speedup(0.0, 4, 0.1) == pytest.approx(1 / 1.4)
    assert best_k(0.0, 0.1) == 1  # drafting never pays: the smallest K loses least
    assert best_k(1.0, 0.1, k_max=16) == 16  # everything accepted: draft as far as allowed
    assert best_k(1.0, 0.0, k_max=3) == 3


def test_best_k_is_the_integer_argmax():
    for alpha in (0.3, 0.6, 0.9):
        for c in (0.01, 0.1, 0.5):
            k = best_k(alpha, c, k_max=12)
            assert all(theoretical_speedup(alpha, k, c) >= theoretical_speedup(alpha, j, c) for j in range(1, 13))


@pytest.mark.parametrize("bad", [-0.1, 1.1, float("nan")])
def test_bad_alpha(bad):
    with pytest.raises(ValueError, match="alpha"):
        expected_tokens_per_round(bad, 3)


def test_bad_k_and_c():
    with pytest.raises(ValueError, match="K"):
        expected_tokens_per_round(0.5, -1)
    with pytest.raises(ValueError, match="c"):
        theoretical_speedup(0.5, 3, -0.1)
    with pytest.raises(ValueError, match="k_max"):
        best_k(0.5, 0.1, k_max=0)


def test_rates_from_rounds():
    rounds = [_round(4, 4, 5), _round(4, 1, 2), _round(4, 0, 1)]
    assert acceptance_rate(rounds) == pytest.approx(5 / 12)
    assert mean_accepted_length(rounds) == pytest.approx(8 / 3)  # tokens per target forward, bonus included


def test_plain_and_empty_rounds():
    plain = [_round(0, 0, 1) for _ in range(5)]
    assert acceptance_rate(plain) is None  # nothing drafted
    assert mean_accepted_length(plain) == 1.0
    assert acceptance_rate([]) is None
    assert mean_accepted_length([]) is None


def test_duck_typed_rounds():
    rounds = [SimpleNamespace(num_accepted=2, num_drafted=3), SimpleNamespace(num_accepted=3, drafted=[1, 2, 3])]
    assert acceptance_rate(rounds) == pytest.approx(5 / 6)
    assert mean_accepted_length(rounds) == pytest.approx(7 / 2)  # accepted + 1 without token_ids


def test_draft_cost_ratio_and_efficiency():
    assert draft_cost_ratio(0.001, 0.01) == pytest.approx(0.1)
    assert draft_cost_ratio([0.001, 0.002, 0.9], [0.01, 0.02, 0.02]) == pytest.approx(0.1)  # medians
    with pytest.raises(ValueError):
        draft_cost_ratio(0.001, 0.0)
    assert efficiency(1.8, 2.0) == pytest.approx(0.9)
    assert efficiency(1.0, 0.0) is None


@pytest.mark.parametrize("alpha, k", [(0.0, 4), (0.3, 1), (0.8, 4), (0.95, 8), (1.0, 3)])
def test_alpha_from_mean_accepted_length_inverts_eq1(alpha, k):
    length = expected_tokens_per_round(alpha, k)
    assert alpha_from_mean_accepted_length(length, k) == pytest.approx(alpha, abs=1e-9)


def test_alpha_from_mean_accepted_length_bounds():
    with pytest.raises(ValueError):
        alpha_from_mean_accepted_length(6.0, 4)  # more than K+1 tokens per round is impossible
    with pytest.raises(ValueError):
        alpha_from_mean_accepted_length(0.5, 4)
