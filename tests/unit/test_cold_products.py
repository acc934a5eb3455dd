"""tools.cold_products: a layer matrix's product with its weights in cache against every layer's in turn."""

import pytest

from specui import native


@pytest.mark.skipif(native.best_isa() is None, reason="no x86 CPU with AVX2 and FMA")
def test_it_times_both_ways_for_each_row_count(capsys, monkeypatch):
    from tools import cold_products

    monkeypatch.setenv("SPECUI_PRODUCT_THREADS", "1")  # what the tool sets; restored after the test
    cold_products.main(["--preset", "bundled", "--matrix", "down", "--rows", "1,3", "--repeats", "1"])
    out = capsys.readouterr().out
    assert out.startswith("down: ") and "one thread" in out
    lines = [line for line in out.splitlines() if "in cache" in line]
    assert [line.split()[0] for line in lines] == ["1", "3"] and all("from memory" in line for line in lines)
