"""tools.stop_model: the round model's stop rule and arithmetic, and a real run on the stdlib pair."""

from types import SimpleNamespace

import pytest
import torch

from tools.stop_model import Chain, Costs, accepted, drafts_under, fit_drafting, keep_none, main, predict


def test_a_round_drafts_until_the_chance_falls_below_tau_that_token_included():
    chain = Chain(top=(0.9, 0.5, 0.9, 0.9, 0.9), accepted=5)
    assert drafts_under(chain, 0.0, 3) == 3  # no stop: K
    assert drafts_under(chain, 0.5, 4) == 2  # 0.9, then 0.45 < 0.5: the second token is drafted, then it stops
    assert drafts_under(chain, 0.95, 4) == 1  # always at least one
    assert drafts_under(chain, 0.4, 5) == 4  # 0.9, 0.45, 0.405, then 0.3645: the fourth drafted, the fifth not


def test_predict_walks_an_answer_as_the_engine_would():
    costs = Costs(plain=1.0, verify=(1.0, 1.5, 2.0), first=0.2, next=0.1, rest=0.1)
    # a chain at each of 3 positions (the last one's K capped to nothing, as the engine caps it)
    easy = [Chain(top=(0.9, 0.9), accepted=2), Chain(top=(0.9,), accepted=1), Chain(top=(), accepted=0)]
    # one round: 2 drafts kept and the target's token; 0.2 + 0.1 drafting, a 3-row verify, the rest
    assert predict([easy], costs, 0.0, 2) == (pytest.approx(3 / 2.4), 3.0)
    hard = [Chain(top=(0.9, 0.9), accepted=0), Chain(top=(0.9,), accepted=0), Chain(top=(), accepted=0)]
    # three rounds of one token: 2 drafts (2.4 s), 1 draft (0.2 + 1.5 + 0.1), none (1.0 + 0.1)
    assert predict([hard], costs, 0.0, 2) == (pytest.approx(3 / 5.3), 1.0)
    # a stop that drafts one token a round: position 0 keeps 1, position 2 drafts nothing
    assert predict([easy], costs, 0.95, 2) == (pytest.approx(3 / (1.8 + 1.1)), 1.5)
    free = Costs(plain=1.0, verify=(1.0,) * 3, first=0.0, next=0.0, rest=0.0)
    assert predict([easy], free, 0.0, 2)[0] == pytest.approx(3.0)


def test_keep_none_keeps_no_draft_and_says_which_the_target_agrees_with():
    verdict = keep_none(target_probs=None, draft_tokens=torch.tensor([4, 5, 9]), draft_probs=None, generator=None,
                        target_argmax=torch.tensor([4, 5, 6, 7]))
    assert verdict.num_accepted == 0 and verdict.next_token == 4 and verdict.accept_probs == [1.0, 1.0, 0.0]
    assert accepted(SimpleNamespace(accept_probs=verdict.accept_probs)) == 2
    assert accepted(SimpleNamespace(accept_probs=[0.0, 1.0])) == 0


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
