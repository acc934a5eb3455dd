"""tools.native_ab: the drafters' native rounds against their Python steps (SPECUI_NATIVE_ROUNDS=0), one process;
tools.sort_ab: top-p's sort in native code against numpy's; sampled verifies that read their rows as the rule needs
them against verifies that transform every row; a row's token drawn by native code against torch's searches."""

import pytest

from specui import native
from specui.native_chain import picks
from specui.sampling import Sampling


def test_the_switch_keeps_every_round_in_python(monkeypatch):
    assert picks(Sampling()) and picks(Sampling(temperature=0.7))
    assert picks(Sampling(temperature=0.7, top_p=0.9)) and picks(Sampling(temperature=0.7, top_k=5))
    monkeypatch.setenv("SPECUI_NATIVE_ROUNDS", "0")
    assert not picks(Sampling()) and not picks(Sampling(temperature=0.7))


@pytest.mark.skipif(native.best_isa() is None, reason="no x86 CPU with AVX2 and FMA")
@pytest.mark.parametrize("temperature", [0.0, 0.7])
def test_both_arms_run_and_draft_alike(capsys, temperature):
    from tools import native_ab

    native_ab.main(["--preset", "bundled", "--drafter", "model", "--temperature", str(temperature), "--prompts", "2",
                    "--tokens", "16", "--passes", "1"])
    out = capsys.readouterr().out
    assert out.count("tokens per forward") == 3
    assert "the Python steps and the native rounds gave the same output in 2 of 2 runs" in out
    assert ("the native rounds equal plain decoding in 2 of 2" in out) == (temperature == 0)


def test_the_ab_says_a_slower_way_is_slower():
    """sort_ab's last column: the second way's tokens/s over the first's, 0.739 said '1.353x slower', never
    '0.739x faster' (the run's timings decide which a run prints: the tests below count either)."""
    from tools.sort_ab import faster_or_slower

    assert faster_or_slower(0.739) == "1.353x slower" and faster_or_slower(1.352) == "1.352x faster"
    assert faster_or_slower(1.0) == "1.000x faster"


@pytest.mark.skipif(native.best_isa() is None, reason="no x86 CPU with AVX2 and FMA")
def test_the_sort_ab_times_both_sorts_and_finds_the_same_output(capsys):
    from specui import sampling
    from tools import sort_ab

    sort_ab.main(["--preset", "bundled", "--drafters", "model", "--prompts", "2", "--tokens", "16", "--passes", "1"])
    out = capsys.readouterr().out
    assert out.count("x faster") + out.count("x slower") == 2 and "both ways gave the same output in 4 of 4 runs" in out
    assert "this machine sorts with" in out and "numpy's sort" in out
    assert sampling._sorter.__name__ == "_sorter"  # put back


def test_the_rows_ab_reads_rows_both_ways_with_the_same_output(capsys):
    """`--compare rows`: every row transformed against the rows the rule reads, chains and trees."""
    from specui import chain_round, sampling, tree_round
    from tools import sort_ab

    for tree in ([], ["--tree", "2,4"]):
        sort_ab.main(["--compare", "rows", "--preset", "bundled", "--drafters", "model", "--prompts", "2",
                      "--tokens", "16", "--passes", "1", *tree])
        out = capsys.readouterr().out
        assert out.count("x faster") + out.count("x slower") == 2
        assert "both ways gave the same output in 4 of 4 runs" in out
        assert "every row" in out and "rows read" in out
        assert chain_round.Rows is sampling.Rows and tree_round.Rows is sampling.Rows  # put back


@pytest.mark.skipif(native.best_isa() is None, reason="no x86 CPU with AVX2 and FMA")
def test_the_draw_ab_draws_both_ways_with_the_same_output(capsys):
    from tools import sort_ab

    sort_ab.main(["--compare", "draw", "--preset", "bundled", "--drafters", "model", "--prompts", "2",
                  "--tokens", "16", "--passes", "1"])
    out = capsys.readouterr().out
    assert out.count("x faster") + out.count("x slower") == 2 and "both ways gave the same output in 4 of 4 runs" in out
    assert "torch's draw" in out and native.kernel().has_draw  # put back
