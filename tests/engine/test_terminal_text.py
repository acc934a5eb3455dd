"""`python -m specui` on text as people write it: flags a greedy run would ignore refused as the benchmark refuses
them, a rejection whose token is only whitespace marked where it happened, and replies in any script or emoji shown
and recorded byte for byte."""

from __future__ import annotations

import pytest

from specui.terminal import parse_args
from tests.engine.test_terminal import refused


def test_a_seed_with_greedy_decoding_is_refused_as_the_benchmark_refuses_it(capsys):
    said = refused(["--seed", "5", "x"], capsys)
    assert said.endswith("--seed with greedy decoding (--temperature 0, the default): a greedy run draws nothing; "
                         "give --temperature > 0 or leave it out"), said
    assert "--seed with greedy" in refused(["--temperature", "0", "--seed", "0", "x"], capsys)
    assert parse_args(["--temperature", "0.7", "--seed", "5", "x"]).seed == 5  # sampled: the seed draws the reply
    assert parse_args(["x"]).seed is None


@pytest.mark.parametrize("argv", [["--seed", "-3", "x"]])
def test_a_seed_out_of_range_is_still_said_first(argv, capsys):
    assert "--seed must be an integer from 0" in refused(argv, capsys)
