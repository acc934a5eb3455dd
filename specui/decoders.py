"""Which models specui's lean forwards compute: `plain_decoder`, the check that the CPU's `specui.lean.DecoderStack`
and the GPU's `specui.graphs.GraphStack` share before they run a model's weights in a forward of their own.

They repeat the math of transformers' Llama, Mistral and Qwen2 decoders, so they may only run a model that is
exactly one of those: the model type's own classes, plain linear layers and embeddings, full sdpa attention,
SiLU, no hooks and no adapters, every parameter a plain floating-point tensor on one device. Anything else
runs the model's own forward.
"""

from __future__ import annotations

import torch

MODEL_TYPES = ("llama", "mistral", "qwen2")
# the module classes whose forward this path repeats, per model type (anything else: the model's forward)
EXACT_CLASSES = {kind: {f"{prefix}{name}" for name in ("ForCausalLM", "Model", "DecoderLayer", "Attention", "MLP",
                                                     "RMSNorm", "RotaryEmbedding")}
                 for kind, prefix in (("llama", "Llama"), ("mistral", "Mistral"), ("qwen2", "Qwen2"))}


def plain_decoder(model, device: torch.device) -> bool:
    """True when `model` is a Llama, Mistral or Qwen2 decoder whose math the lean forwards repeat (full sdpa
    attention, SiLU, plain modules: see `_plain_modules`), evaluating, with every
    parameter a plain floating-point tensor on `device`."""
    config = getattr(model, "config", None)
    if config is None or getattr(config, "model_type", None) not in MODEL_TYPES or model.training:
        return False
    layer_types = getattr(config, "layer_types", None)
    full_attention = (all(t == "full_attention" for t in layer_types) if layer_types is not None
                      else getattr(config, "sliding_window", None) is None)
    if not full_attention or getattr(config, "hidden_act", None) != "silu":
        return False
    if getattr(config, "_attn_implementation", None) != "sdpa":
        return False  # eager or flash attention: the user chose other kernels
    try:
        base = model.model
        modules = [base.embed_tokens, base.norm, model.lm_head]
        for layer in base.layers:
            attn, mlp = layer.self_attn, layer.mlp
            modules += [attn.q_proj, attn.k_proj, attn.v_proj, attn.o_proj, mlp.gate_proj, mlp.up_proj,
                        mlp.down_proj, layer.input_layernorm, layer.post_attention_layernorm]
            _ = attn.scaling, attn.head_dim, base.rotary_emb
            _ = layer.input_layernorm.variance_epsilon, layer.post_attention_layernorm.variance_epsilon
    except (AttributeError, IndexError, TypeError):
        return False
    if not _plain_modules(model):
        return False  # a hook, an adapter or a subclass with its own forward: only the model knows its math
    for m in modules:
        for p in m._parameters.values():  # m.parameters(recurse=False), without its generator's cost per module
            if p is not None and (type(p) is not torch.nn.Parameter or not p.dtype.is_floating_point
                                  or p.device != device):
                return False  # quantized or spread over devices
    return True


def _records_only(hook) -> bool:
    """transformers' own output-capturing hook (installed by the first `output_hidden_states=True` call):
    it only records a module's output while a caller collects them, and never changes it."""
    return getattr(hook, "__module__", "") == "transformers.utils.output_capturing"


def _plain_modules(model) -> bool:
    """True when every module of `model` is exactly a class this path repeats, with no hook anywhere:
    no forward (pre-)hook on any module (but transformers' recording-only output capture) or registered
    globally, no accelerate hook, every linear layer exactly `nn.Linear` (not a LoRA wrapper or a subclass
    with its own forward), the embeddings exactly `nn.Embedding`, everything else one of the model type's
    own transformers classes."""
    from torch.nn.modules import module as torch_module

    if torch_module._global_forward_hooks or torch_module._global_forward_pre_hooks:
        return False
    exact = EXACT_CLASSES[model.config.model_type] | {"SiLUActivation"}
    plain = (torch.nn.Linear, torch.nn.Embedding, torch.nn.ModuleList, torch.nn.SiLU, torch.nn.Identity)
    for m in model.modules():
        # accelerate sets `_hf_hook` as a plain attribute (in the module's __dict__; getattr would go through
        # nn.Module.__getattr__ and its exception for every module without one): checked once per generation
        if (m._forward_pre_hooks or m.__dict__.get("_hf_hook") is not None
                or (m._forward_hooks and any(not _records_only(h) for h in m._forward_hooks.values()))):
            return False
        kind = type(m)
        if kind in plain:
            continue
        if not (kind.__module__.startswith("transformers.") and kind.__name__ in exact):
            return False
    return True
