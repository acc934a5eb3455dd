"""tools.build_ab: another commit's native kernels against this tree's, side by side in one process."""

import shutil

import pytest

from specui import native


@pytest.mark.slow
@pytest.mark.skipif(native.best_isa() is None, reason="no x86 CPU with AVX2 and FMA")
@pytest.mark.skipif(shutil.which("git") is None or shutil.which("cc") is None, reason="needs git and a C compiler")
def test_both_builds_run_and_decode_alike(capsys):
    from tools import build_ab

    isa = native.best_isa()
    ours = native.kernel(isa)
    build_ab.main(["--preset", "bundled", "--prompts", "1", "--tokens", "12", "--passes", "1", "--rows", "1,5",
                   "--prefill", "20",
                   "--arm", '{"tree_width": 2, "tree_nodes": 3}'])  # a tree: the verify's rows through both builds
    assert native.kernel(isa) is ours  # this tree's build put back for the rest of the session
    out = capsys.readouterr().out
    assert out.count("over its plain") == 2 and "old build" in out and "this tree" in out
    assert out.count("x faster)") == 3  # the forward table's two rows, the prefill table's one
    assert "prefill of n prompt tokens" in out
    assert "{'tree_width': 2, 'tree_nodes': 3}, greedy" in out
    assert "the four arms gave the same output in 1 of 1 prompts" in out
