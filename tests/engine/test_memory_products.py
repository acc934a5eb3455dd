"""Memory the lean forward's prepared products take while they are made (the memory audit): bytes counted by torch's
profiler, never RSS. A product of one weight is packed from the weight itself: a copy of it first (`torch.cat` of one
tensor) was the load's peak, the chat model's 113 MB output layer held three times at once (+109 MB)."""

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

from specui import native, products


def _allocated(how: str, weights: list[torch.Tensor], op: str) -> int:
    """Bytes `op` allocated while `products._prepared` made the product `how` of `weights` (no biases)."""
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        products._prepared(weights, [None] * len(weights), how=how, kernel=native.kernel() if how == "native" else None)
    return sum(max(0, e.cpu_memory_usage) for e in prof.key_averages() if e.key == op)


@pytest.mark.parametrize("how", ["native", "transposed", "packed"])
def test_one_weight_is_prepared_without_a_copy_first(how):
    if how == "native" and native.kernel() is None:
        pytest.skip("the native kernels do not build here")
    if how == "packed" and not products._MKL_PACKED:
        pytest.skip("no MKL packed GEMM in this torch")
    weight = torch.nn.Parameter(torch.randn(1024, 512))  # 2 MiB
    assert _allocated(how, [weight], "aten::cat") == 0


def test_a_product_from_the_weight_itself_computes_what_it_did():
    """The same values packed, from the weight or from a copy of it: the same bits."""
    kernel = native.kernel()
    if kernel is None:
        pytest.skip("the native kernels do not build here")
    gen = torch.Generator().manual_seed(0)
    weight = torch.nn.Parameter(torch.randn(700, 384, generator=gen))
    x = torch.randn(5, 384, generator=gen)
    with torch.inference_mode():
        product, _ = products._prepared([weight], [None], how="native", kernel=kernel)
        assert torch.equal(product(x), kernel.product(weight.detach().clone())(x))
        transposed, _ = products._prepared([weight], [None], how="transposed")
        assert torch.equal(transposed, weight.detach().t()) and transposed.data_ptr() != weight.data_ptr()
