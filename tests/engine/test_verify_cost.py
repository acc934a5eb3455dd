"""specui.verify_cost: the verify-cost curve's shape and fields (never a time: the machine is shared)."""

import json

import pytest
import torch

from specui.verify_cost import VerifyCost, main, measure_verify_cost, multiply_adds
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


def test_command_line_refuses_a_zero_count_in_one_line(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--max-tokens", "0"])  # before any model loads
    assert exit_.value.code == 2 and "--max-tokens and --repeats must be >= 1" in capsys.readouterr().err


def test_command_line_prints_json(tmp_path, capsys):
    folder = save_tiny_model(tmp_path / "m", "llama", layers=1, seed=0)
    main(["--target", folder, "--cache-length", "5", "--max-tokens", "3", "--repeats", "1", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert out["tokens"] == [1, 2, 3] and out["ratios"][0] == 1.0
    assert out["fma_rate"] > 0 and len(out["multiply_adds"]) == 3 and out["floor_ratios"][0] == 1.0


def test_multiply_adds_count_every_product_and_the_attention_each_row_sees():
    model = make_model("llama", layers=2)
    c = model.config
    width, ffn, head_dim = c.hidden_size, c.intermediate_size, c.hidden_size // c.num_attention_heads
    kv = c.num_key_value_heads * head_dim
    per_row = c.num_hidden_layers * (width * (width + 2 * kv) + width * width + 3 * width * ffn) + width * c.vocab_size
    attention = 2 * c.num_hidden_layers * c.num_attention_heads * head_dim  # per key a row sees (q.k, then p.v)
    assert multiply_adds(model, 10, 1) == per_row + attention * 11
    assert multiply_adds(model, 10, 3) == 3 * per_row + attention * (11 + 12 + 13)
    gpt2 = make_model("gpt2", layers=1)  # Conv1D products count as Linear ones do
    assert multiply_adds(gpt2, 4, 1) > gpt2.config.n_embd * gpt2.config.vocab_size


def test_floor_is_the_multiply_adds_at_the_measured_rate_never_below_one_token():
    cost = VerifyCost(cache_length=1, tokens=(1, 2, 4, 8), seconds=(0.01, 0.011, 0.013, 0.02), repeats=1, threads=1,
                      multiply_adds=(1e8, 2e8, 4e8, 8e8), fma_rate=4e10)  # 8 tokens: 0.02 s of arithmetic
    assert cost.floor_ratios == pytest.approx((1.0, 1.0, 1.0, 2.0))
    assert cost.as_dict()["floor_ratios"] == pytest.approx([1.0, 1.0, 1.0, 2.0])
    assert "floor" in cost.table().splitlines()[1] and "GFLOP/s" in cost.table().splitlines()[-1]
    plain = VerifyCost(cache_length=1, tokens=(1, 2), seconds=(0.01, 0.02), repeats=1, threads=1)
    assert plain.floor_ratios is None and plain.as_dict()["floor_ratios"] is None and "floor" not in plain.table()


def test_measured_floor_starts_at_one_and_never_falls():
    cost = measure_verify_cost(make_model("llama", layers=2), cache_length=8, max_tokens=6, repeats=1, warmup=1,
                               floor=True)
    floor = cost.floor_ratios
    assert cost.fma_rate > 0 and len(cost.multiply_adds) == 6 and floor[0] == 1.0
    assert all(b >= a for a, b in zip(floor, floor[1:]))
    unasked = measure_verify_cost(make_model("llama", layers=1), cache_length=4, max_tokens=2, repeats=1)
    assert unasked.floor_ratios is None
    half = make_model("llama", layers=1).to(torch.bfloat16)  # the rate measured is float32's: no floor for bfloat16
    assert measure_verify_cost(half, cache_length=4, max_tokens=2, repeats=1, floor=True).floor_ratios is None
