"""The native row-invariant products (specui/rowgemm.c through specui.native): every row's bits are
independent of how many rows are computed with it, of the tiling, of threads and of the instruction
set; the lean forward uses them; and where they cannot be built, the forward falls back with a logged
reason instead of failing."""

import logging

import pytest
import torch

from specui import native, native_build
from specui.kv import CachedLM
from specui.products import SMALL_WEIGHT, rows_invariant
from tests.helpers import make_config

pytestmark = pytest.mark.skipif(native.best_isa() is None, reason="no x86 CPU with AVX2 and FMA")


def _case(n: int, k: int, rows: int = 20, *, bias: bool, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    weight = torch.randn(n, k, generator=gen)
    b = torch.randn(n, generator=gen) if bias else None
    return torch.randn(rows, k, generator=gen), weight, b


# panel edges (n below, at and above a panel of 8 or 16), k odd and below the prefetch distance
@pytest.mark.parametrize("n,k", [(1, 1), (7, 3), (16, 64), (17, 97), (50, 576), (129, 200)])
@pytest.mark.parametrize("bias", [False, True], ids=["no bias", "bias"])
def test_rows_do_not_depend_on_the_row_count(kernel, n, k, bias):
    x, weight, b = _case(n, k, bias=bias)
    product = kernel.product(weight, b)
    full = product(x)
    for m in range(1, x.shape[0] + 1):  # every tiling of rows: one tile of 1..12, then tiles of 8
        assert torch.equal(product(x[:m]), full[:m]), m
    for i in range(x.shape[0]):  # one row alone
        assert torch.equal(product(x[i:i + 1]), full[i:i + 1])
    wide = torch.randn(x.shape[0], k + 5)
    wide[:, 3:3 + k] = x  # rows of a wider tensor: a stride that is not k
    assert torch.equal(product(wide[:, 3:3 + k]), full)
    reference = x.double() @ weight.double().T + (0 if b is None else b.double())
    assert torch.allclose(full.double(), reference, rtol=1e-5, atol=1e-4 * (1 + reference.abs().max().item()))


@pytest.mark.parametrize("kind", [torch.bfloat16, torch.float16], ids=["bfloat16", "float16"])
def test_half_precision_weights_are_packed_half_and_give_the_same_bits(kernel, kind):
    """A float32 weight whose values are all exactly bfloat16 (float16) values, as in a half-precision
    checkpoint loaded as float32, is packed in that type: half the bytes, the bits of float32 panels."""
    x, weight, b = _case(131, 97, bias=True)
    weight = weight.to(kind).float()
    weight[3, 5] = -0.0
    weight[4] = torch.finfo(kind).tiny / 4  # subnormal in that type, still exact
    if kind == torch.float16:
        weight[7, :3] = torch.tensor([65504.0, 1 / 1024, 3 * 2.0 ** -20])  # not all bfloat16 values
    half, full = kernel.product(weight, b), kernel.product(weight, b, half=False)
    assert native.half_kind(weight) is kind
    assert half.panels.dtype is kind and full.panels.dtype is torch.float32
    assert half.panels.element_size() * 2 == full.panels.element_size()
    for m in range(1, x.shape[0] + 1):
        assert torch.equal(half(x[:m]), full(x[:m])), m
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        big, big_b = torch.randn(2048, 576).to(kind).float(), torch.randn(2048)
        assert torch.equal(kernel.product(big, big_b)(x[:9, :1].expand(9, 576).contiguous()),
                           kernel.product(big, big_b, half=False)(x[:9, :1].expand(9, 576).contiguous()))
    finally:
        torch.set_num_threads(threads)


@pytest.mark.parametrize("spoil", ["one ulp", "nan", "too large"])
def test_other_weights_stay_float32(kernel, spoil):
    weight = torch.randn(40, 24).to(torch.float16).float()
    if spoil == "one ulp":
        weight[2, 2] = torch.nextafter(weight[2, 2], torch.tensor(9.0))
    elif spoil == "nan":
        weight[2, 2] = float("nan")
    else:
        weight[2, 2] = 1e5  # beyond float16 (its others are float16 values, most not bfloat16 ones)
    assert native.half_kind(weight) is None
    assert kernel.product(weight).panels.dtype is torch.float32


def test_instruction_sets_give_the_same_bits():
    if native.best_isa() != "avx512":
        pytest.skip("this CPU has no AVX-512")
    wide, narrow = native.kernel("avx512"), native.kernel("avx2")
    assert wide.width == 16 and narrow.width == 8
    x, weight, b = _case(300, 257, rows=11, bias=True)
    assert torch.equal(wide.product(weight, b)(x), narrow.product(weight, b)(x))
    for kind in (torch.bfloat16, torch.float16):  # the widening loads of each build
        exact = weight.to(kind).float()
        assert torch.equal(wide.product(exact, b)(x), narrow.product(exact, b)(x))
    logits = torch.randn(5, 49152)
    logits[2, 17] = logits[2, 40000] = 99.0  # a tie
    assert torch.equal(wide.argmax(logits), narrow.argmax(logits))


def test_the_lean_forward_uses_it(kernel):
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(make_config("llama", vocab_size=1024, layers=2, hidden=192)).eval()
    stack = CachedLM(model).stack
    mlp = model.model.layers[0].mlp
    assert 2 * mlp.gate_proj.weight.numel() > SMALL_WEIGHT and model.lm_head.weight.numel() > SMALL_WEIGHT
    assert stack.head.native is kernel and all(layer[4].native is kernel for layer in stack.params)  # gate/up
    small = stack.params[0][1]  # q/k/v: 192 x 384, below SMALL_WEIGHT
    assert small.out * 192 <= SMALL_WEIGHT
    # a small weight is a plain GEMM where its rows do not depend on the row count, else the kernel's too
    assert small.native is (None if rows_invariant("transposed") else kernel) and not small.by_row


def test_where_the_gemm_is_not_row_invariant_rows_run_alone_without_the_kernel(monkeypatch):
    """The fallback of `RowLinear` without native kernels on such a CPU: every row its own two-row product."""
    from specui import products

    monkeypatch.setattr(products.native, "kernel", lambda *a, **k: None)
    linear = torch.nn.Linear(96, 288)
    product = products.RowLinear([linear])
    assert product.native is None and product.by_row == (not rows_invariant("transposed"))
    product.by_row = True  # what it does on such a CPU, checked on any
    x = torch.randn(9, 96)
    together = product(x)
    for i in range(9):
        assert torch.equal(together[i], product(x[i:i + 1].repeat(2, 1))[0])
    assert torch.allclose(together, linear(x), atol=1e-5)


def test_rows_run_alone_with_a_warning_that_says_how_to_avoid_it(monkeypatch, caplog):
    from specui import products

    monkeypatch.setattr(products.native, "kernel", lambda *a, **k: None)
    monkeypatch.setattr(products, "rows_invariant", lambda how: False)
    monkeypatch.setenv("CC", "no-such-cc")  # no compiler: the case the advice is for (`rows_alone_why`)
    monkeypatch.delenv("SPECUI_NATIVE", raising=False)
    monkeypatch.setattr(products.native, "best_isa", lambda: "avx2")
    products.slow_rows_warning.cache_clear()
    try:
        with caplog.at_level(logging.WARNING, logger="specui.products"):
            first, second = products.RowLinear([torch.nn.Linear(8, 8)]), products.RowLinear([torch.nn.Linear(8, 8)])
    finally:
        products.slow_rows_warning.cache_clear()
    assert first.by_row and second.by_row
    said = [r.getMessage() for r in caplog.records if "alone" in r.getMessage()]
    assert len(said) == 1 and "C compiler" in said[0]  # once per process


def test_products_refuse_rows_they_cannot_compute(kernel):
    product = kernel.product(torch.randn(10, 8))
    for bad in (torch.randn(2, 9), torch.randn(2, 8, dtype=torch.float64)):
        with pytest.raises(ValueError, match="float32 rows of 8"):
            product(bad)


@pytest.mark.parametrize("n", [1, 7, 16, 100, 8192, 49152])
def test_argmax_is_torchs(kernel, n):
    gen = torch.Generator().manual_seed(n)
    rows = torch.randn(6, n, generator=gen)
    rows[1] = rows[1].round()  # many ties: the first maximum wins
    rows[2] = -torch.inf  # all equal
    rows[3, n // 2] = torch.nan  # NaN counts as the largest
    rows[4, n - 1] = torch.inf
    rows[5] = torch.zeros(n)
    rows[5, n // 3:] = -0.0  # -0.0 == 0.0: still the first
    assert torch.equal(kernel.argmax(rows), rows.argmax(-1))
    for row in rows:
        assert torch.equal(kernel.argmax(row), row.argmax(-1))
    assert torch.equal(kernel.argmax(rows[:, : n // 2 + 1]), rows[:, : n // 2 + 1].argmax(-1))  # strided rows
    half = rows.to(torch.bfloat16)
    assert torch.equal(kernel.argmax(half), half.argmax(-1))  # not float32: torch's own


@pytest.mark.parametrize("n", [63, 64, 65, 129, 200])
def test_argmax_finds_the_first_maximum_in_every_lane_and_tail(kernel, n):
    """The maximum is taken over four vector accumulators and then searched for a vector at a time: wherever the
    first of two equal maxima sits (any lane, any accumulator, the tail), it is the one found."""
    builds = {kernel, native.kernel("avx2")} - {None}  # both vector widths where this CPU runs both
    gen = torch.Generator().manual_seed(n)
    for first in range(n):
        row = torch.randn(n, generator=gen)
        row[first] = 10.0
        row[(first + 1 + (first * 7) % max(1, n - first - 1)) % n if first < n - 1 else first] = 10.0
        zeros = row.clone()
        zeros[first] = -0.0 if first % 2 else 0.0  # a zero maximum of either sign
        zeros[zeros > 0] = -1.0
        for build in builds:
            assert int(build.argmax(row)) == int(row.argmax()), (build.isa, first)
            assert int(build.argmax(zeros)) == int(zeros.argmax()), (build.isa, first)


def test_without_a_compiler_it_falls_back_with_a_reason(monkeypatch, tmp_path, caplog):
    monkeypatch.setattr(native, "_kernels", {})
    monkeypatch.setenv("SPECUI_CACHE", str(tmp_path))  # nothing built yet
    monkeypatch.setattr(native_build.tempfile, "gettempdir", lambda: str(tmp_path))
    monkeypatch.setenv("CC", str(tmp_path / "no-such-compiler"))
    with caplog.at_level(logging.WARNING, logger="specui.native"):
        assert native.kernel() is None
    assert "no C compiler" in caplog.text and "MKL" in caplog.text
    monkeypatch.setenv("SPECUI_NATIVE", "0")
    monkeypatch.setattr(native, "_kernels", {})
    monkeypatch.delenv("CC")
    assert native.kernel() is None  # switched off: not even built


def test_a_failed_build_falls_back(monkeypatch, tmp_path, caplog):
    monkeypatch.setattr(native, "_kernels", {})
    monkeypatch.setenv("SPECUI_CACHE", str(tmp_path))
    monkeypatch.setattr(native_build.tempfile, "gettempdir", lambda: str(tmp_path))
    broken = tmp_path / "broken.c"
    broken.write_text("this is not C\n")
    monkeypatch.setattr(native_build, "LAYER_SOURCE", broken)
    with caplog.at_level(logging.WARNING, logger="specui.native"):
        assert native.kernel() is None
    assert "error" in caplog.text  # the compiler's own message, so the user can act on it
    assert not list((tmp_path / "native").iterdir())  # no half-built library left to load later, no objects


def test_an_installed_package_carries_every_native_source():
    """pyproject's package data lists every file the build compiles or includes, so an installed specui
    builds the same kernels as a checkout."""
    import fnmatch
    from pathlib import Path

    tomllib = pytest.importorskip("tomllib")  # Python 3.11 on
    listed = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-data"]["specui"]
    def carried(name: str) -> bool:  # the list holds patterns (*.c) since 636a318
        return any(fnmatch.fnmatch(name, pattern) for pattern in listed)

    assert all(carried(p.name) for p in native_build.sources())
    assert all(carried(p.name) for p in Path(native.__file__).parent.glob("native*.[ch]"))


def _attention_case(hd: int, *, rows: int = 5, heads: int = 6, kv_heads: int = 2, capacity: int = 512, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(rows, heads + kv_heads, hd, generator=gen)[:, :heads]  # a view, as the forward passes it
    keys = torch.randn(kv_heads, hd, capacity, generator=gen)
    values = torch.randn(kv_heads, capacity, hd, generator=gen)
    return q, keys, values


def _reference(q, keys, values, visible: list[list[int]], scale: float) -> torch.Tensor:
    """Softmax attention in float64 over each row's visible slots."""
    rows, heads, hd = q.shape
    groups = heads // keys.shape[0]
    out = torch.zeros(rows, heads, hd, dtype=torch.float64)
    for r, slots in enumerate(visible):
        for h in range(heads):
            k, v = keys[h // groups][:, slots].double(), values[h // groups][slots].double()
            out[r, h] = torch.softmax(q[r, h].double() @ k * scale, -1) @ v
    return out.reshape(rows, heads * hd)


def _seen(prefix: list[int], extra: list[list[int]] | None = None) -> native.Seen:
    counts = None if extra is None else torch.tensor([len(e) for e in extra], dtype=torch.int32)
    slots = None if extra is None else torch.tensor([s for e in extra for s in e] or [0], dtype=torch.int32)
    longest = max(p + (0 if extra is None else len(e)) for p, e in zip(prefix, extra or [[]] * len(prefix)))
    return native.Seen(torch.tensor(prefix, dtype=torch.int32), counts, slots, longest)


@pytest.mark.parametrize("hd", [16, 32, 48, 64, 128])
def test_attention_is_softmax_attention(kernel, hd):
    q, keys, values = _attention_case(hd)
    prefix = [300, 301, 302, 302, 40]  # a verify's rows (one repeated), and a short one
    out = kernel.attend(q, keys, values, _seen(prefix), 0.125)
    reference = _reference(q, keys, values, [list(range(p)) for p in prefix], 0.125)
    assert torch.allclose(out.double(), reference, atol=2e-6, rtol=1e-5)
    extra = [[305, 310], [], [400], [301, 302, 303], [41]]  # tree rows: the prefix, then scattered slots
    out = kernel.attend(q, keys, values, _seen(prefix, extra), 0.125)
    reference = _reference(q, keys, values, [list(range(p)) + e for p, e in zip(prefix, extra)], 0.125)
    assert torch.allclose(out.double(), reference, atol=2e-6, rtol=1e-5)


@pytest.mark.parametrize("hd", [32, 48, 64])
def test_attention_rows_depend_only_on_the_keys_they_see(kernel, hd):
    """The same query over the same sequence of keys gives the same bits: alone or among other rows,
    with the keys at consecutive slots (a chain) or scattered after a shorter prefix (a token tree)."""
    q, keys, values = _attention_case(hd, rows=9)
    prefix = [200 + r for r in range(9)]
    together = kernel.attend(q, keys, values, _seen(prefix), 0.1)
    for r in range(9):
        alone = kernel.attend(q[r:r + 1], keys, values, _seen([prefix[r]]), 0.1)
        assert torch.equal(alone[0], together[r]), r
    # row 5 sees slots 0..204; move slots 198..204 to scattered slots 300, 310, ... with the same contents
    moved_keys, moved_values = keys.clone(), values.clone()
    scattered = [300 + 10 * i for i in range(7)]
    moved_keys[:, :, scattered] = keys[:, :, 198:205]
    moved_values[:, scattered] = values[:, 198:205]
    moved_keys[:, :, 198:205] = torch.randn(keys.shape[0], hd, 7)  # what sits there now: other branches
    tree = kernel.attend(q[5:6], moved_keys, moved_values, _seen([198], [scattered]), 0.1)
    assert torch.equal(tree[0], together[5])


def test_attention_builds_give_the_same_bits():
    if native.best_isa() != "avx512":
        pytest.skip("this CPU has no AVX-512")
    q, keys, values = _attention_case(64, rows=7, heads=9, kv_heads=3)
    seen = _seen([100, 101, 102, 103, 104, 105, 106], [[], [200], [], [201, 300], [], [], [400]])
    assert torch.equal(native.kernel("avx512").attend(q, keys, values, seen, 0.125),
                       native.kernel("avx2").attend(q, keys, values, seen, 0.125))


def test_attention_takes_a_long_block(kernel):
    """A long continuation (a second chat turn: hundreds of new tokens after a cache) runs natively too;
    its rows are still each row alone."""
    q, keys, values = _attention_case(64, rows=600, heads=9, kv_heads=3, capacity=1024)
    prefix = [300 + r for r in range(600)]
    out = kernel.attend(q, keys, values, _seen(prefix), 0.125)
    for r in (0, 299, 599):
        assert torch.equal(kernel.attend(q[r:r + 1], keys, values, _seen([prefix[r]]), 0.125)[0], out[r])


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_a_long_block_runs_in_blocks_of_rows_on_threads_with_the_same_bits(kernel, monkeypatch, threads):
    """A prompt's rows go to the kernel ATTEND_ROWS at a time (bounded scratch), shared over torch's threads:
    every row's bits are those of one call over all the rows."""
    q, keys, values = _attention_case(32, rows=700, heads=6, kv_heads=2, capacity=1024, seed=1)
    seen = _seen([1 + r for r in range(700)])  # a prompt read into an empty cache: row r sees keys 0..r
    monkeypatch.setattr(native, "ATTEND_ROWS", 10_000)
    whole = kernel.attend(q, keys, values, seen, 0.125)
    monkeypatch.setattr(native, "ATTEND_ROWS", 96)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        blocks = kernel.attend(q, keys, values, seen, 0.125)
    finally:
        torch.set_num_threads(before)
    assert torch.equal(blocks, whole)
    reference = _reference(q[::97], keys, values, [list(range(1 + r)) for r in range(0, 700, 97)], 0.125)
    assert torch.allclose(blocks[::97].double(), reference, atol=2e-6, rtol=1e-5)


def test_heads_draft_through_the_native_products(kernel):
    """`specui.products.linear` (what the heads draft with): in inference mode on float32 a large weight's
    native product (prepared once, remade after an in-place edit, float16 panels for float16 values); a small
    weight, or with autograd, F.linear."""
    from specui import products
    from specui.products import linear

    def prepared(w):
        return products._prepared_cache[("native", id(w))][2][0]

    weight, bias = torch.randn(2100, 64).half().float(), torch.randn(2100)  # large: small ones take F.linear
    x = torch.randn(3, 5, 64)
    with torch.inference_mode():
        small = torch.randn(300, 64)
        assert torch.equal(linear(x, small), torch.nn.functional.linear(x, small))
        assert ("native", id(small)) not in products._prepared_cache
    with torch.inference_mode():
        y = linear(x, weight, bias)
        product = prepared(weight)
        assert product.panels.dtype == torch.float16 and linear(x, weight, bias) is not None
        assert prepared(weight) is product  # made once
        torch.testing.assert_close(y, torch.nn.functional.linear(x, weight, bias), atol=1e-4, rtol=1e-5)
        assert torch.equal(y[1, 2], product(x[1, 2:3].contiguous())[0])
    with torch.no_grad():
        weight.mul_(2)  # an in-place edit: the product is remade
    with torch.inference_mode():
        torch.testing.assert_close(linear(x, weight, bias), torch.nn.functional.linear(x, weight, bias),
                                   atol=1e-4, rtol=1e-5)
    with torch.inference_mode():  # a weight made in inference mode (no version counter) works too
        frozen = torch.randn(40, 64)
        torch.testing.assert_close(linear(x, frozen), torch.nn.functional.linear(x, frozen), atol=1e-4,
                                   rtol=1e-5)
    trained = weight.clone().requires_grad_(True)
    out = linear(x, trained, bias)  # outside inference mode: torch's product, with a gradient
    out.sum().backward()
    assert trained.grad is not None and ("native", id(trained)) not in products._prepared_cache
