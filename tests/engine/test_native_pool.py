"""Product threads (specui/native_pool.c through specui.native): a large product split between the calling thread
and native workers gives the unsplit product's bits, serves one caller at a time, survives a fork, and follows
SPECUI_PRODUCT_THREADS."""

import logging

import pytest
import torch

from specui import native

pytestmark = pytest.mark.skipif(native.best_isa() is None, reason="no x86 CPU with AVX2 and FMA")


def _case(n: int, k: int, rows: int, *, bias: bool, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    weight = torch.randn(n, k, generator=gen)
    b = torch.randn(n, generator=gen) if bias else None
    return torch.randn(rows, k, generator=gen), weight, b


@pytest.mark.parametrize("half", [False, True], ids=["float32 panels", "half panels"])
def test_product_threads_give_the_same_bits(kernel, monkeypatch, half):
    """A large product split over the product threads (native_pool.c: this thread and native workers, shares
    of the panels that fall on no tile edge) equals the unsplit product bit for bit, for every row count."""
    x, weight, b = _case(2000, 576, rows=13, bias=True)
    if half:
        weight = weight.bfloat16().float()  # exactly bfloat16 values: panels at half width
    assert weight.numel() >= native.SPLIT_WORK  # large enough to be split
    product = kernel.product(weight, b)
    assert (product.panels.dtype == torch.bfloat16) == half
    for threads in ("1", "2", "3", "5"):
        monkeypatch.setenv("SPECUI_PRODUCT_THREADS", threads)
        assert native.product_threads() == int(threads)
        for m in (1, 2, 5, 8, 9, 13):
            y = torch.empty(m, 2000)
            used = kernel.rowgemm_split(x.data_ptr(), m, x.stride(0), product._w, 2000, 576, product._b, y.data_ptr(),
                                        2000, 0, product.count, product._kind, int(threads))
            assert used == int(threads) and torch.equal(y, product(x[:m])) and torch.equal(product(x[:m]), _alone(
                kernel, product, x[:m])), (threads, m)


def _alone(kernel, product, x):
    """The product on this thread alone (rowgemm over every panel)."""
    y = torch.empty(x.shape[0], product.n)
    kernel.rowgemm(x.data_ptr(), x.shape[0], x.stride(0), product._w, product.n, product.k, product._b, y.data_ptr(),
                   product.n, 0, product.count, product._kind)
    return y


def test_product_threads_serve_one_caller_at_a_time(kernel, monkeypatch):
    """Python threads that multiply at once: one splits, the others compute alone; every result is right."""
    import threading

    monkeypatch.setenv("SPECUI_PRODUCT_THREADS", "2")
    x, weight, _ = _case(3000, 576, rows=4, bias=False)
    product = kernel.product(weight)
    expected, results, errors = _alone(kernel, product, x), [], []

    def run():
        try:
            results.extend(torch.equal(product(x), expected) for _ in range(200))
        except Exception as error:  # noqa: BLE001 - reported below
            errors.append(error)

    threads = [threading.Thread(target=run) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors and len(results) == 600 and all(results)


def test_a_forked_child_splits_with_workers_of_its_own(kernel, monkeypatch):
    """The workers stay in the parent when a process forks; the child starts its own (pthread_atfork) instead of
    waiting for workers it does not have."""
    import multiprocessing

    monkeypatch.setenv("SPECUI_PRODUCT_THREADS", "2")
    x, weight, _ = _case(3000, 576, rows=2, bias=False)
    product = kernel.product(weight)
    expected = product(x)  # the parent's workers are running now
    context = multiprocessing.get_context("fork")
    reader, writer = context.Pipe(duplex=False)
    child = context.Process(target=lambda: writer.send(float(product(x).double().sum())), daemon=True)  # no pickling
    child.start()
    try:
        assert reader.poll(60), "the forked child's split product never finished"
        assert reader.recv() == float(expected.double().sum())
    finally:
        child.join(timeout=30)
        if child.is_alive():
            child.kill()


def test_product_threads_setting(monkeypatch, caplog):
    monkeypatch.setenv("SPECUI_PRODUCT_THREADS", "1")
    assert native.product_threads() == 1
    monkeypatch.delenv("SPECUI_PRODUCT_THREADS")
    assert native.product_threads() == 1  # off unless asked for
    monkeypatch.setenv("SPECUI_PRODUCT_THREADS", "many")
    with caplog.at_level(logging.WARNING, logger="specui.native"):
        assert native.product_threads() == native._threads_for("")
    assert "not a positive integer" in caplog.text
