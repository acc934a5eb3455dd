"""specui.verify_cost: the verify-cost curve's shape and fields (never a time: the machine is shared)."""

import json

import pytest

from specui.verify_cost import VerifyCost, main, measure_verify_cost
from tests.helpers import make_model, save_tiny_model


def test_curve_has_one_median_per_block_size():
    model = make_model("llama", layers=2)
    cost = measure_verify_cost(model, cache_length=10, max_tokens=5, repeats=3, warmup=1)
    assert cost.tokens == (1, 2, 3, 4, 5)
    assert len(cost.seconds) == 5 and all(s > 0 for s in cost.seconds)
    assert cost.ratios[0] == 1.0 and cost.ratio(1) == 1.0
    assert cost.ratio(4) == cost.seconds[3] / cost.seconds[0]
    assert cost.cache_length == 10 and cost.repeats == 3 and cost.threads >= 1
    assert set(cost.as_dict()) >= {"cache_length", "tokens", "seconds", "ratios", "repeats", "threads"}
    assert "÷ one token" in cost.table() and len(cost.table().splitlines()) == 2 + 5


def test_model_without_the_lean_forward_is_measured_too():
    cost = measure_verify_cost(make_model("gpt2", layers=1), cache_length=4, max_tokens=3, repeats=1, warmup=0)
    assert cost.tokens == (1, 2, 3)


def test_ratios_follow_the_seconds():
    cost = VerifyCost(cache_length=1, tokens=(1, 2, 3), seconds=(0.01, 0.011, 0.02), repeats=1, threads=1)
    assert cost.ratios == pytest.approx((1.0, 1.1, 2.0))


@pytest.mark.parametrize("bad", [{"cache_length": 0}, {"max_tokens": 0}, {"repeats": 0}])
def test_bad_arguments_are_refused(bad):
    with pytest.raises(ValueError):
        measure_verify_cost(make_model("llama", layers=1), **bad)


def test_command_line_prints_json(tmp_path, capsys):
    folder = save_tiny_model(tmp_path / "m", "llama", layers=1, seed=0)
    main(["--target", folder, "--cache-length", "5", "--max-tokens", "3", "--repeats", "1", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert out["tokens"] == [1, 2, 3] and out["ratios"][0] == 1.0
