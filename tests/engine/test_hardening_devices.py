"""Draws happen on the device of the tensors they sample (issue #12, item 6): a target spread over
devices may put its logits on another device than its embeddings."""

from __future__ import annotations

import pytest
import torch

from specui import SpeculativeEngine
from specui.sampling import Generators, derived_seed, sample
from tests.helpers import make_model, noisy_copy


def test_the_generator_lives_on_the_tensors_device():
    generators = Generators(7, home="cpu")
    g = generators.for_tensor(torch.zeros(3))
    assert g.device == torch.device("cpu") and g.initial_seed() == 7  # home: the seed itself
    assert generators.for_tensor(torch.ones(2)) is g  # one stream per device, made once


def test_another_device_gets_its_own_derived_stream():
    # the home device is a GPU (none needed: its generator is only made when something draws there)
    generators = Generators(7, home="cuda:0")
    g = generators.on("cpu")
    assert g.device == torch.device("cpu") and g.initial_seed() == derived_seed(7, "cpu") != 7
    assert derived_seed(7, "cpu") == derived_seed(7, "cpu") != derived_seed(8, "cpu")
    assert 0 <= derived_seed(2**64 - 1, "cuda:1") < 2**64


def test_a_single_device_run_draws_what_one_seeded_generator_draws():
    probs = torch.softmax(torch.randn(5, 50, generator=torch.Generator().manual_seed(0)), -1)
    ours = sample(probs, Generators(11, home="cpu").for_tensor(probs))
    assert torch.equal(ours, sample(probs, torch.Generator().manual_seed(11)))


needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@needs_cuda
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_a_target_spread_over_cpu_and_gpu(tmp_path, temperature):
    """Embeddings on the CPU, layers and lm_head on the GPU (an accelerate device map): the engine runs,
    and greedy output equals the same model's on one device."""
    from transformers import AutoModelForCausalLM

    target = make_model("llama", layers=2, seed=0)
    target.save_pretrained(tmp_path / "t")
    device_map = {"model.embed_tokens": "cpu", "model.layers": 0, "model.norm": 0, "model.rotary_emb": 0, "lm_head": 0}
    spread = AutoModelForCausalLM.from_pretrained(tmp_path / "t", device_map=device_map, dtype=torch.float32).eval()
    # accelerate keeps a module mapped to "cpu" in CPU memory (its parameters on the meta device, a hook bringing
    # them in for each call: seen on an H200 with accelerate 1.15), so ask its map where each part lives
    assert spread.hf_device_map["model.embed_tokens"] == "cpu" and spread.lm_head.weight.device.type == "cuda"
    draft = noisy_copy(target, noise=0.3, seed=1).to("cuda")
    engine = SpeculativeEngine(spread, draft)
    prompt = [4, 8, 15, 16, 23, 42]
    for speculative in (True, False):
        result = engine.generate(prompt, max_new_tokens=24, num_draft_tokens=3, temperature=temperature, seed=3,
                                 speculative=speculative)
        assert len(result.token_ids) == 24
        if temperature == 0:
            assert result.token_ids == SpeculativeEngine(target).generate(prompt, max_new_tokens=24,
                                                                          speculative=False).token_ids
