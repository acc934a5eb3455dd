"""int8 drafters (specui.int8, native.c's I8 panels): specui's own drafters rounded to integers in [-127, 127]
times a power of two per row, packed as int8 with their scales, computing the bits of float32 products of the
rounded weights (a quarter of the bytes); the target never rounded; a preset's `int8_drafters` rounds its EAGLE
head and chat draft as they load, and greedy output stays plain greedy decoding."""

import dataclasses

import pytest
import torch

from specui import chat_draft, int8, load_engine, native
from specui.heads import eagle
from specui.presets import load_config
from tests.helpers import make_model

pytestmark = pytest.mark.skipif(native.best_isa() is None, reason="no x86 CPU with AVX2 and FMA")


def _rounded(n: int, k: int, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    weight = int8.rounded(torch.randn(n, k, generator=gen) * torch.rand(n, 1, generator=gen) * 3)
    weight[min(2, n - 1)] = 0.0  # an empty row keeps scale 1
    return weight


def test_rounding_is_integers_times_a_power_of_two_per_row():
    weight = torch.randn(50, 33) * torch.logspace(-6, 3, 50)[:, None]
    rounded = int8.rounded(weight)
    scales = int8.exact_scales(rounded)
    assert scales is not None and torch.equal(torch.exp2(torch.log2(scales).round()), scales)
    values = rounded / scales[:, None]
    assert torch.equal(values, values.round()) and values.abs().max() <= 127
    assert bool(((rounded - weight).abs() <= scales[:, None] / 2).all())  # to the nearest step
    assert bool((values.abs().amax(dim=1) >= 63).all())  # each row's largest keeps 7 bits or more


@pytest.mark.parametrize("n,k", [(1, 1), (9, 17), (50, 576), (131, 97), (600, 40)])
def test_int8_panels_give_the_bits_of_float32_panels(kernel, n, k):
    weight, bias = _rounded(n, k, seed=n), torch.randn(n)
    packed, full = kernel.product(weight, bias), kernel.product(weight, bias, half=False)
    assert packed.panels.dtype is torch.int8 and full.panels.dtype is torch.float32
    x = torch.randn(20, k)
    for m in range(1, x.shape[0] + 1):  # every tiling of rows
        assert torch.equal(packed(x[:m]), full(x[:m])), m
    threads = torch.get_num_threads()
    try:  # a large one, split over the product threads
        torch.set_num_threads(2)
        big = _rounded(4096, 576, seed=1)
        assert torch.equal(kernel.product(big)(x[:5, :1].expand(5, 576).contiguous()),
                           kernel.product(big, half=False)(x[:5, :1].expand(5, 576).contiguous()))
    finally:
        torch.set_num_threads(threads)


def test_both_instruction_sets_read_int8_alike():
    if native.best_isa() != "avx512":
        pytest.skip("this CPU has no AVX-512")
    weight, x = _rounded(300, 257), torch.randn(11, 257)
    assert torch.equal(native.kernel("avx512").product(weight)(x), native.kernel("avx2").product(weight)(x))


@pytest.mark.parametrize("spoil", ["not a step", "nan", "a half step"])
def test_other_weights_are_not_int8(kernel, spoil):
    weight = _rounded(40, 24)
    if spoil == "not a step":
        weight[5, 3] += weight[5].abs().max() / 1000
    elif spoil == "nan":
        weight[5, 3] = float("nan")
    else:
        weight[5] = 0.0
        weight[5, :2] = torch.tensor([127.0, 0.5])  # 127 needs scale 1, 0.5 a half step
    assert int8.exact_scales(weight) is None
    assert kernel.product(weight).panels.dtype is not torch.int8
    assert int8.exact_scales(torch.randn(64, 64)) is None  # ordinary weights, a target's


def test_a_head_and_a_chat_draft_round_what_pays_and_leave_the_target_alone():
    target = make_model("llama", vocab_size=96, layers=3, seed=7)
    before = {k: v.clone() for k, v in target.state_dict().items()}
    head = eagle.build(target, token_ids=torch.arange(96)).eval()
    fuse, fc = head.fuse.weight.clone(), head.fc.weight.clone()
    assert int8.round_drafter(head) == 5
    for linear in (head.layer.qkv, head.layer.o, head.layer.gate_up, head.layer.down):
        assert int8.exact_scales(linear.weight.detach()) is not None
    assert int8.exact_scales(head.output._rows) is not None
    assert torch.equal(head.fuse.weight, fuse) and torch.equal(head.fc.weight, fc)  # rounding them cost acceptance
    head.output.bind(target)  # bound again: still rounded
    assert int8.exact_scales(head.output._rows) is not None
    draft = chat_draft.build(target, num_layers=1, token_ids=torch.arange(0, 96, 2), init_layers=[0])
    assert int8.round_drafter(draft) == 8  # q, k, v, o, gate, up, down, the output rows
    assert draft.get_input_embeddings() is target.get_input_embeddings()
    assert all(torch.equal(v, before[k]) for k, v in target.state_dict().items())
    assert int8.round_drafter(make_model("llama", vocab_size=96, layers=1, seed=2)) == 0  # not one of specui's


@pytest.mark.slow
def test_a_preset_rounds_its_drafters_and_keeps_plain_greedy_output():
    preset = dataclasses.replace(load_config().presets["bundled"], int8_drafters=True)
    engine = load_engine(preset)
    assert int8.exact_scales(engine.heads["eagle"].layer.qkv.weight.detach()) is not None
    assert int8.exact_scales(engine.heads["medusa"].output._rows) is None  # only EAGLE heads and chat drafts
    prompt = engine.tokenizer("def read_config(path):\n    ")["input_ids"]
    plain = engine.generate(prompt, max_new_tokens=48, speculative=False).token_ids
    assert engine.generate(prompt, max_new_tokens=48, drafter="eagle").token_ids == plain
    assert engine.generate(prompt, max_new_tokens=48).token_ids == plain
