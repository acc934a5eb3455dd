"""tools.stop_model: the round model's stop rule and arithmetic, and a real run on the stdlib pair."""

from types import SimpleNamespace

import pytest

from tools.stop_model import Chain, Costs, drafts_under, fit_drafting, main, predict


def test_a_round_drafts_until_the_chance_falls_below_tau_that_token_included():
    chain = Chain(top=(0.9, 0.5, 0.9, 0.9, 0.9), accepted=5)
    assert drafts_under(chain, 0.0, 3) == 3  # no stop: K
    assert drafts_under(chain, 0.5, 4) == 2  # 0.9, then 0.45 < 0.5: the second token is drafted, then it stops
    assert drafts_under(chain, 0.95, 4) == 1  # always at least one
    assert drafts_under(chain, 0.4, 5) == 4  # 0.9, 0.45, 0.405, then 0.3645: the fourth drafted, the fifth not


def test_predict_counts_tokens_and_seconds_as_rounds_do():
    costs = Costs(plain=1.0, verify=(1.0, 1.5, 2.0), first=0.2, next=0.1, rest=0.1)
    chains = [Chain(top=(0.9, 0.9), accepted=2), Chain(top=(0.9, 0.9), accepted=0)]
    # K 2, no stop: tokens 3 + 1, seconds 2 * (0.2 + 0.1 + 2.0 + 0.1)
    speedup, per_round = predict(chains, costs, 0.0, 2)
    assert per_round == 2.0 and speedup == pytest.approx(4 / 4.8)
    # free verify rows and drafting: what is left is one forward and the rest a round
    free = Costs(plain=1.0, verify=(1.0,) * 3, first=0.0, next=0.0, rest=0.0)
    assert predict(chains, free, 0.0, 2)[0] == pytest.approx(2.0)


def test_drafting_cost_is_fitted_as_a_first_token_and_each_further_one():
    rounds = [SimpleNamespace(drafted=[0] * k, draft_s=0.5 + 0.25 * (k - 1)) for k in (1, 2, 3, 5)]
    first, next_ = fit_drafting(rounds)
    assert first == pytest.approx(0.5) and next_ == pytest.approx(0.25)
    same = [SimpleNamespace(drafted=[0, 0], draft_s=s) for s in (0.3, 0.4, 0.5)]
    assert fit_drafting(same) == (pytest.approx(0.4), 0.0)  # one chain length: its mean, no slope


def test_it_models_the_stdlib_pairs_eagle_beside_a_measured_run(capsys):
    out = main(["--preset", "bundled", "--drafter", "eagle", "--prompts", "1", "--tokens", "24", "--k", "4"])
    text = capsys.readouterr().out
    assert "the preset (K <= 7, tau 0.0): measured" in text and "verify rows free" in text
    assert out["measured"] > 0 and out["predicted"] > 0
    assert set(out["table"]) == {"today", "drafting free", "no rest a round", "verify rows free", "all three"}
    # free parts never make the model slower
    for tau, today in out["table"]["today"].items():
        assert out["table"]["all three"][tau] >= today
