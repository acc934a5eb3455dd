"""The lean forward runs only for exactly the modules it repeats: a hook, an adapter or a subclass with
its own forward sends the model through its own forward, whose output then includes their effect."""

from __future__ import annotations

import torch

from specui import SpeculativeEngine
from specui.kv import CachedLM
from specui.lean import DecoderStack
from tests.helpers import make_model

PROMPT = [5, 9, 11, 3, 7]


def own_greedy(model, n=12):
    with torch.inference_mode():
        out = model.generate(torch.tensor([PROMPT]), max_new_tokens=n, do_sample=False)
    return out[0, len(PROMPT):].tolist()


def engine_greedy(model, n=12):
    return SpeculativeEngine(model, None).generate(PROMPT, max_new_tokens=n, speculative=False).token_ids


def test_plain_models_take_the_lean_path():
    assert DecoderStack.build(make_model("llama")) is not None
    assert DecoderStack.build(make_model("qwen2")) is not None


def test_a_forward_hook_on_a_decoder_layer_is_honoured():
    model = make_model("llama", seed=1)
    before = engine_greedy(model)
    steer = model.model.layers[1].register_forward_hook(lambda _m, _i, out: (out[0] + 3.0,) + tuple(out[1:])
                                                        if isinstance(out, tuple) else out + 3.0)
    assert DecoderStack.build(model) is None and CachedLM(model).stack is None
    steered = engine_greedy(model)
    assert steered == own_greedy(model) and steered != before
    steer.remove()
    assert DecoderStack.build(model) is not None


def test_a_pre_hook_and_an_accelerate_hook_are_honoured():
    from accelerate.hooks import ModelHook, add_hook_to_module, remove_hook_from_module

    class Shift(ModelHook):
        def pre_forward(self, module, *args, **kwargs):
            return (args[0] + 1.0, *args[1:]), kwargs

    model = make_model("llama", seed=4)
    before = engine_greedy(model)
    pre = model.model.layers[0].mlp.register_forward_pre_hook(lambda _m, args: (args[0] * 2.0,))
    assert DecoderStack.build(model) is None
    pre_hooked = engine_greedy(model)
    assert pre_hooked == own_greedy(model) and pre_hooked != before
    pre.remove()
    add_hook_to_module(model.model.layers[1].mlp, Shift())  # accelerate's own mechanism: `_hf_hook`, a new forward
    assert DecoderStack.build(model) is None and CachedLM(model).stack is None
    shifted = engine_greedy(model)
    assert shifted == own_greedy(model) and shifted != before
    remove_hook_from_module(model.model.layers[1].mlp)
    assert DecoderStack.build(model) is not None and engine_greedy(model) == before


class LoraLinear(torch.nn.Module):
    """Shaped like PEFT's LoRA wrapper: base_layer plus lora_A, lora_B."""

    def __init__(self, base: torch.nn.Linear, rank: int = 4):
        super().__init__()
        self.base_layer = base
        self.lora_A = torch.nn.Linear(base.in_features, rank, bias=False)
        self.lora_B = torch.nn.Linear(rank, base.out_features, bias=False)
        torch.nn.init.normal_(self.lora_B.weight, std=0.5)
        self.weight = base.weight  # PEFT exposes the base weight too

    def forward(self, x):
        return self.base_layer(x) + self.lora_B(self.lora_A(x))


class ScaledLinear(torch.nn.Linear):
    def forward(self, x):
        return 2.0 * super().forward(x)


def test_an_adapter_wrapped_projection_is_honoured():
    model = make_model("llama", seed=2)
    before = engine_greedy(model)
    for layer in model.model.layers:
        layer.mlp.down_proj = LoraLinear(layer.mlp.down_proj)
    assert DecoderStack.build(model) is None
    adapted = engine_greedy(model)
    assert adapted == own_greedy(model) and adapted != before


def test_a_linear_subclass_with_its_own_forward_is_honoured():
    model = make_model("qwen2", seed=3)
    before = engine_greedy(model)
    old = model.model.layers[0].self_attn.o_proj
    new = ScaledLinear(old.in_features, old.out_features, bias=old.bias is not None)
    new.load_state_dict(old.state_dict())
    model.model.layers[0].self_attn.o_proj = new
    assert DecoderStack.build(model) is None
    changed = engine_greedy(model)
    assert changed == own_greedy(model) and changed != before


def test_the_models_own_forward_gets_its_cache_by_the_name_it_takes():
    """Newer transformers (5.24) renamed `past_key_values` to `cache` (the old name warns, and goes in 5.40): a
    model's own forward (GPT-2 here: no lean path) is handed its cache by the name its signature takes, with no
    warning, and a greedy run through it is still the model's own greedy `generate`, trees included."""
    import inspect
    import warnings

    model = make_model("gpt2", seed=2)
    cached = CachedLM(model)
    assert cached.stack is None
    assert cached._cache_arg in inspect.signature(model.forward).parameters
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        got = SpeculativeEngine(model, None).generate(PROMPT, max_new_tokens=12, speculative=False).token_ids
        tree = SpeculativeEngine(model, make_model("gpt2", seed=3)).generate(
            PROMPT, max_new_tokens=12, num_draft_tokens=3, tree_width=2, tree_nodes=4).token_ids
    assert got == own_greedy(model) == tree
