"""Product threads (specui/native_pool.c through specui.native): a large product split between the calling thread
and native workers gives the unsplit product's bits, serves one caller at a time, survives a fork, gives way when
splits cost more than they save, and follows SPECUI_PRODUCT_THREADS; idle workers yield their core for a set time,
then sleep, and are woken only by large products (GGUF blocks counted at their float32 size)."""

import logging
import time

import pytest
import torch

from specui import native
from tests.helpers import q4_1

pytestmark = pytest.mark.skipif(native.best_isa() is None, reason="no x86 CPU with AVX2 and FMA")


@pytest.fixture
def splitting(kernel):
    """The kernel with giving way off (every large product splits, whatever this machine's load) and the
    counts cleared; giving way back on afterwards."""
    kernel.pool_state(give_way=False, clear=True)
    yield kernel
    kernel.pool_state(give_way=True, clear=True)


def _case(n: int, k: int, rows: int, *, bias: bool, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    weight = torch.randn(n, k, generator=gen)
    b = torch.randn(n, generator=gen) if bias else None
    return torch.randn(rows, k, generator=gen), weight, b


@pytest.mark.parametrize("half", [False, True], ids=["float32 panels", "half panels"])
def test_product_threads_give_the_same_bits(splitting, monkeypatch, half):
    """A large product split over the product threads (native_pool.c: this thread and native workers, shares
    of the panels that fall on no tile edge) equals the unsplit product bit for bit, for every row count."""
    kernel = splitting
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


def test_product_threads_give_way_when_splits_cost_more_than_they_save(splitting, monkeypatch):
    """Splits that took longer than this thread alone would have (a worker's core taken by another program) start
    a rest: products run alone, right, until it ends; each rest is twice the last, up to 2 s, and each window
    of splits that paid halves the next; splits that save start none."""
    kernel = splitting
    kernel.pool_state(give_way=True)
    monkeypatch.setenv("SPECUI_PRODUCT_THREADS", "2")
    x, weight, _ = _case(2000, 576, rows=3, bias=False)  # large enough to wake workers that went to sleep
    product = kernel.product(weight)
    expected = _alone(kernel, product, x)
    at = time.monotonic() - 10.0  # native_pool.c's clock
    for i in range(300):  # splits that saved, over three windows: no rest
        assert kernel.pool_account(2e-4, 1e-4, at + i * 1e-3) <= at + i * 1e-3
    assert kernel.pool_state(clear=True) == {"splits": 300, "alone_resting": 0, "rests": 0, "alone_asleep": 0}
    at = time.monotonic()
    assert kernel.pool_account(1e-4, 8e-3, at) == pytest.approx(at + 0.05)  # cost 7.9 ms more: a rest of 50 ms
    assert torch.equal(product(x), expected)
    assert kernel.pool_state() == {"splits": 1, "alone_resting": 1, "rests": 1, "alone_asleep": 0}  # resting
    time.sleep(0.06)
    assert torch.equal(product(x), expected) and kernel.pool_state()["splits"] == 2  # split again
    kernel.pool_state(clear=True)  # that split was timed for real: on a loaded machine it may have lost and rested
    at += 1.0
    for rest in (0.05, 0.1, 0.2, 0.4, 0.8, 1.6, 2.0, 2.0):  # splits that keep failing: each twice the last, at most 2 s
        assert kernel.pool_account(1e-4, 8e-3, at) == pytest.approx(at + rest)
        at += rest + 0.01
    for i in range(22):  # two windows of splits that paid: the next rest a quarter as long
        assert kernel.pool_account(2e-4, 1e-4, at + i * 0.01) < at
    at += 0.22
    assert kernel.pool_account(1e-4, 8e-3, at) == pytest.approx(at + 0.5)
    kernel.pool_state(clear=True)
    at = time.monotonic() + 100.0  # a window of small losses, each under the limit, ends in a rest
    for i in range(11):
        until = kernel.pool_account(1e-4, 2e-4, at + i * 0.011)
    assert until > at and kernel.pool_state()["rests"] == 1
    kernel.pool_state(give_way=False)  # giving way off: never a rest
    assert kernel.pool_account(1e-4, 1.0, at + 10.0) <= at + 10.0


def _until_asleep(kernel, small, x, expected) -> None:
    """Call a product under WAKE_BYTES now and then until one finds the workers asleep and runs alone (right)."""
    for _ in range(40):  # idle long enough for the workers to sleep (a split in between wakes them again)
        time.sleep(0.05)
        assert torch.equal(small(x), expected)
        if kernel.pool_state()["alone_asleep"]:
            break
    assert kernel.pool_state()["alone_asleep"] == 1


def test_a_small_product_does_not_wake_sleeping_workers(splitting, monkeypatch):
    """Workers that went to sleep (no split for half a millisecond or more) are woken only by a product of at least
    WAKE_BYTES of weights (native_pool.c); a smaller one runs alone, right; with giving way off it splits."""
    kernel = splitting
    kernel.pool_state(give_way=True)
    monkeypatch.setenv("SPECUI_PRODUCT_THREADS", "2")
    x, weight, _ = _case(1500, 576, rows=1, bias=False)  # 3.5 MB of float32 weights, under WAKE_BYTES (4 MiB)
    small = kernel.product(weight)
    expected = _alone(kernel, small, x)
    _until_asleep(kernel, small, x, expected)
    big_x, big_weight, _ = _case(2000, 576, rows=1, bias=False)  # 4.6 MB: wakes them
    big = kernel.product(big_weight)
    splits = kernel.pool_state()["splits"]
    assert torch.equal(big(big_x), _alone(kernel, big, big_x)) and kernel.pool_state()["splits"] == splits + 1
    kernel.pool_state(give_way=False)
    time.sleep(0.05)
    assert torch.equal(small(x), expected) and kernel.pool_state()["splits"] == splits + 2  # woken: split


def test_idle_workers_yield_for_a_set_time_then_sleep(splitting, monkeypatch):
    """An idle worker yields its core for `pool_yield` seconds by the clock (YIELD_SECONDS, 3 ms), not for a count
    of yields (a VM's sched_yield returned in 0.17 us: a thousand of them slept through a speculative round's Python):
    a small product 20 ms after the last split finds the workers awake where they yield 10 s, asleep where 0."""
    kernel = splitting
    kernel.pool_state(give_way=True)
    monkeypatch.setenv("SPECUI_PRODUCT_THREADS", "2")
    x, weight, _ = _case(1500, 576, rows=1, bias=False)  # under WAKE_BYTES: does not wake sleeping workers
    small, big_x, big_weight = kernel.product(weight), *_case(2000, 576, rows=1, bias=False)[:2]
    big = kernel.product(big_weight)  # wakes them
    expected = _alone(kernel, small, x)
    before = kernel.pool_yield()
    assert before == pytest.approx(3e-3)
    try:
        for seconds, awake in ((10.0, True), (0.0, False)):
            assert kernel.pool_yield(seconds) in (before, 10.0)
            big(big_x)  # a split: the workers wait for the next share
            time.sleep(0.02)
            counts = kernel.pool_state(clear=True)
            assert torch.equal(small(x), expected)
            assert kernel.pool_state()["alone_asleep"] == (0 if awake else 1), (seconds, counts)
            kernel.pool_state(give_way=True)  # (clear leaves giving way as it is)
    finally:
        kernel.pool_yield(before)


def test_product_threads_setting(monkeypatch, caplog):
    monkeypatch.setenv("SPECUI_PRODUCT_THREADS", "1")
    assert native.product_threads() == 1
    monkeypatch.delenv("SPECUI_PRODUCT_THREADS")
    import os

    assert native.product_threads() == min(2, len(os.sched_getaffinity(0)))  # two where two cores are usable
    monkeypatch.setenv("SPECUI_PRODUCT_THREADS", "many")
    with caplog.at_level(logging.WARNING, logger="specui.native"):
        assert native.product_threads() == native._threads_for("")
    assert "not a positive integer" in caplog.text


def test_gguf_blocks_wake_sleeping_workers_by_their_float32_size(splitting, monkeypatch):
    """A product read from GGUF blocks costs about what its float32 panels do (the rebuild), so it counts at its float32
    size: 2000 x 576 Q4 blocks (0.9 MB; 4.6 MB as float32) wake sleeping workers and split."""
    kernel = splitting
    kernel.pool_state(give_way=True)
    monkeypatch.setenv("SPECUI_PRODUCT_THREADS", "2")
    x, weight, _ = _case(1500, 576, rows=1, bias=False)
    small = kernel.product(weight)
    _until_asleep(kernel, small, x, _alone(kernel, small, x))
    weight = q4_1(torch.randn(2000, 576))
    blocks = kernel.product(weight)
    assert blocks.blocks is not None and blocks.blocks.numel() < 1 << 22  # under WAKE_BYTES (4 MiB) as blocks
    splits = kernel.pool_state()["splits"]
    time.sleep(0.05)
    y = blocks(x)
    assert kernel.pool_state()["splits"] == splits + 1 and kernel.pool_state()["alone_asleep"] == 1
    assert torch.equal(y, _alone(kernel, kernel.product(weight, half=False), x))  # the same from float32 panels, alone


def test_a_prompt_block_splits_small_products_and_wakes_the_workers(splitting, monkeypatch):
    """A block of BLOCK_SPLIT_ROWS rows or more (a prompt) counts its work in all its rows: a small model's products
    (the stdlib target's 96-wide ones, far under SPLIT_WORK a row) split and wake sleeping workers, with the unsplit
    product's bits; the same product over a verify's few rows still runs alone."""
    kernel = splitting
    kernel.pool_state(give_way=True)
    monkeypatch.setenv("SPECUI_PRODUCT_THREADS", "2")
    x, weight, b = _case(288, 96, rows=256, bias=True)  # 27,648 multiply-adds a row, 110 kB of weights
    assert weight.numel() < native.SPLIT_WORK <= weight.numel() * native.BLOCK_SPLIT_ROWS
    small = kernel.product(weight, b)
    few = x[:8]
    splits = kernel.pool_state()["splits"]
    assert torch.equal(small(few), _alone(kernel, small, few)) and kernel.pool_state()["splits"] == splits
    medium_x, medium_weight, _ = _case(1500, 576, rows=1, bias=False)  # split, but under WAKE_BYTES
    medium = kernel.product(medium_weight)
    _until_asleep(kernel, medium, medium_x, _alone(kernel, medium, medium_x))
    splits = kernel.pool_state()["splits"]
    time.sleep(0.05)  # asleep again
    y = small(x)
    assert kernel.pool_state()["splits"] == splits + 1 and kernel.pool_state()["alone_asleep"] == 1  # woken: split
    assert torch.equal(y, _alone(kernel, small, x))
