"""Why the lean forward computes a verify's rows one by one, said true to the case (`products.rows_alone_why`): a C
compiler is advised only where it is what is missing, never for a half-precision model, a head size native attention
does not take, SPECUI_NATIVE=0, a CPU without AVX2 and FMA, or a build that failed with a compiler present."""

from __future__ import annotations

import logging

import torch

from specui import native, products


def said(monkeypatch, *, env=None, cc=None, isa="avx2", **keywords) -> str:
    monkeypatch.delenv("SPECUI_NATIVE", raising=False)
    for name, value in (env or {}).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("CC", cc or "sh")  # a program every machine has: a compiler present
    monkeypatch.setattr(native, "best_isa", lambda: isa)  # the CPU this machine is not
    return products.rows_alone_why(**keywords)


def test_a_compiler_is_advised_only_where_one_is_missing(monkeypatch):
    missing = said(monkeypatch, cc="no-such-cc")
    assert "none on PATH (no-such-cc)" in missing and "compute all rows at once" in missing
    for why in (said(monkeypatch, dtype=torch.bfloat16), said(monkeypatch, kernel=object(), head_dim=80),
                said(monkeypatch, env={"SPECUI_NATIVE": "0"}, cc="no-such-cc"),
                said(monkeypatch, isa=None, cc="no-such-cc"), said(monkeypatch)):
        assert "compiler" not in why, why
    assert "bfloat16" in said(monkeypatch, dtype=torch.bfloat16)
    assert "heads of 80 dimensions" in said(monkeypatch, kernel=object(), head_dim=80)
    assert "SPECUI_NATIVE=0" in said(monkeypatch, env={"SPECUI_NATIVE": "0"})
    assert "AVX2 and FMA" in said(monkeypatch, isa=None)
    assert "did not build" in said(monkeypatch)


def test_the_warning_gives_the_reason_once_per_reason(monkeypatch, caplog):
    products.slow_rows_warning.cache_clear()
    try:
        with caplog.at_level(logging.WARNING, logger="specui.products"):
            for _ in range(2):
                products.slow_rows_warning(said(monkeypatch, dtype=torch.float16))
    finally:
        products.slow_rows_warning.cache_clear()
    (record,) = [r.getMessage() for r in caplog.records if "alone" in r.getMessage()]
    assert "float16" in record and "compiler" not in record
