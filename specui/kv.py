"""A causal LM with its KV cache, addressed by absolute length.

`CachedLM.length` is the number of tokens whose keys and values are cached. `extend(ids)` runs the
model on new tokens at positions length..length+n-1 and returns their logits; `trim(length)` rolls
the cache back to an absolute length (rejected drafts are simply forgotten). Trimming never uses a
negative slice that could silently empty the cache at 0.

Two ways to run the model, same numbers:
- `DecoderStack`, for Llama-style decoders (model_type llama, mistral or qwen2 with full attention):
  the model's own weights and modules' constants, the same torch ops in the same order as
  transformers' sdpa forward, but without the per-module call machinery, mask building and cache
  bookkeeping that dominate a small model's forward on a CPU; keys and values go into one
  preallocated buffer, so rolling back is just not advancing (as in gpt-fast's `generate.py`).
- the model's own `forward` with a transformers `DynamicCache`, for everything else.
"""

from __future__ import annotations

import inspect

import torch
import torch.nn.functional as F


def model_device(model: torch.nn.Module) -> torch.device:
    """Where a model's inputs go: its input embeddings' device (also right for device_map models)."""
    return model.get_input_embeddings().weight.device


def context_limit(model: torch.nn.Module) -> int | None:
    """The longest sequence the model's positions allow, when its config says."""
    return getattr(model.config, "max_position_embeddings", None)


class CachedLM:
    def __init__(self, model: torch.nn.Module, *, fast: bool = True):
        """fast: use `DecoderStack` when the model supports it (False: always the model's forward)."""
        self.model = model
        self.device = model_device(model)
        self._keep_arg = "logits_to_keep" in inspect.signature(model.forward).parameters
        self.stack = DecoderStack.build(model) if fast else None
        self.cache = None  # a DynamicCache, or the stack's StaticKV
        self.length = 0

    def extend(self, ids: list[int] | torch.Tensor, *, last_only: bool = False) -> torch.Tensor:
        """Feed tokens [n] after the cached ones; returns logits [n, V] ([1, V] with last_only)."""
        ids = torch.as_tensor(ids, dtype=torch.long, device=self.device).reshape(1, -1)
        if self.stack is not None:
            if self.cache is None:
                self.cache = self.stack.new_cache()
            logits = self.stack.forward(ids, self.cache, last_only=last_only)
            self.length += ids.shape[1]
            return logits
        kwargs = {"logits_to_keep": 1} if (last_only and self._keep_arg) else {}
        out = self.model(input_ids=ids, past_key_values=self.cache, use_cache=True, **kwargs)
        self.cache = out.past_key_values
        self.length += ids.shape[1]
        logits = out.logits[0]
        return logits[-1:] if last_only else logits

    def trim(self, length: int) -> None:
        """Forget every cached token at position >= length."""
        if not 0 <= length <= self.length:
            raise ValueError(f"cannot trim a cache of {self.length} tokens to {length}")
        drop = self.length - length
        if drop > 0:
            if isinstance(self.cache, StaticKV):
                self.cache.length = length  # positions >= length are overwritten by the next extend
            else:
                self.cache.crop(-drop)  # transformers 5: a negative argument is the number of tokens to drop
            self.length = length
        assert self.cache is None or self.cache.get_seq_length() == self.length, "KV cache out of step"


class StaticKV:
    """Keys and values of every layer in one buffer [layers, 2, kv_heads, capacity, head_dim] that
    doubles when full; `length` tokens are valid."""

    def __init__(self, layers: int, kv_heads: int, head_dim: int, *, dtype, device, capacity: int = 256):
        self.buffer = torch.empty(layers, 2, kv_heads, capacity, head_dim, dtype=dtype, device=device)
        self.length = 0

    def get_seq_length(self) -> int:
        return self.length

    def reserve(self, length: int) -> None:
        capacity = self.buffer.shape[3]
        if length > capacity:
            grown = self.buffer.new_empty(*self.buffer.shape[:3], max(length, 2 * capacity), self.buffer.shape[4])
            grown[:, :, :, : self.length] = self.buffer[:, :, :, : self.length]
            self.buffer = grown


class DecoderStack:
    """A lean forward of a Llama-style decoder over a `StaticKV` (batch 1).

    It reads the model's parameters at call time (never copies them) and repeats transformers'
    sdpa path op for op: RMSNorm in float32, rotary embeddings from the model's own `rotary_emb`,
    sdpa with no mask for one new token, `is_causal` for a prefill, a boolean causal mask otherwise.
    """

    MODEL_TYPES = ("llama", "mistral", "qwen2")

    def __init__(self, model):
        base = model.model
        self.model, self.embed, self.norm, self.rotary = model, base.embed_tokens, base.norm, base.rotary_emb
        self.layers = list(base.layers)
        first = self.layers[0].self_attn
        self.head_dim = first.head_dim
        self.kv_heads = first.k_proj.out_features // self.head_dim
        self.groups = first.q_proj.out_features // first.k_proj.out_features

    @classmethod
    def build(cls, model) -> DecoderStack | None:
        """A stack for `model`, or None when its architecture or setup is not one this path repeats exactly."""
        config = getattr(model, "config", None)
        if config is None or getattr(config, "model_type", None) not in cls.MODEL_TYPES or model.training:
            return None
        layer_types = getattr(config, "layer_types", None)
        full_attention = (all(t == "full_attention" for t in layer_types) if layer_types is not None
                          else getattr(config, "sliding_window", None) is None)
        if not full_attention or getattr(config, "hidden_act", None) != "silu":
            return None
        if getattr(config, "_attn_implementation", "sdpa") not in ("sdpa", None):
            return None
        try:
            stack = cls(model)
            modules = [stack.embed, stack.norm, model.lm_head]
            for layer in stack.layers:
                attn, mlp = layer.self_attn, layer.mlp
                modules += [attn.q_proj, attn.k_proj, attn.v_proj, attn.o_proj, mlp.gate_proj, mlp.up_proj,
                            mlp.down_proj, layer.input_layernorm, layer.post_attention_layernorm]
                _ = attn.scaling, layer.input_layernorm.variance_epsilon, layer.post_attention_layernorm.variance_epsilon
        except (AttributeError, IndexError, TypeError):
            return None
        device = model_device(model)
        for m in modules:
            if getattr(m, "_hf_hook", None) is not None or m._forward_hooks or m._forward_pre_hooks:
                return None  # offloaded (accelerate) or instrumented: let the model's forward run
            for p in m.parameters(recurse=False):
                if type(p) is not torch.nn.Parameter or not p.dtype.is_floating_point or p.device != device:
                    return None  # quantized or spread over devices
        return stack

    def new_cache(self) -> StaticKV:
        weight = self.layers[0].self_attn.k_proj.weight
        return StaticKV(len(self.layers), self.kv_heads, self.head_dim, dtype=weight.dtype, device=weight.device)

    def forward(self, ids: torch.Tensor, cache: StaticKV, *, last_only: bool) -> torch.Tensor:
        """ids [1, n] at positions cache.length.. -> logits [n, V] ([1, V] with last_only)."""
        n, past = ids.shape[1], cache.length
        end = past + n
        cache.reserve(end)
        x = self.embed(ids)  # [1, n, D]
        positions = torch.arange(past, end, device=ids.device).unsqueeze(0)
        cos, sin = self.rotary(x, position_ids=positions)  # [1, n, head_dim]
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        if n == 1:
            mask, causal = None, False  # one query sees every cached key
        elif past == 0:
            mask, causal = None, True  # a prefill: plain causal attention
        else:  # query i (position past+i) sees keys 0..past+i
            mask = (torch.arange(end, device=ids.device) <= positions.reshape(n, 1)).view(1, 1, n, end)
            causal = False
        buffer = cache.buffer
        for i, layer in enumerate(self.layers):
            attn, mlp = layer.self_attn, layer.mlp
            h = _rms_norm(x, layer.input_layernorm)
            q = F.linear(h, attn.q_proj.weight, attn.q_proj.bias).view(1, n, -1, self.head_dim).transpose(1, 2)
            k = F.linear(h, attn.k_proj.weight, attn.k_proj.bias).view(1, n, -1, self.head_dim).transpose(1, 2)
            v = F.linear(h, attn.v_proj.weight, attn.v_proj.bias).view(1, n, -1, self.head_dim).transpose(1, 2)
            q = (q * cos) + (_rotate_half(q) * sin)
            k = (k * cos) + (_rotate_half(k) * sin)
            buffer[i, 0, :, past:end] = k[0]
            buffer[i, 1, :, past:end] = v[0]
            keys, values = buffer[i, 0, :, :end].unsqueeze(0), buffer[i, 1, :, :end].unsqueeze(0)
            extra = {}
            if self.groups > 1:
                if mask is None:
                    extra["enable_gqa"] = True
                else:
                    keys, values = _repeat_kv(keys, self.groups), _repeat_kv(values, self.groups)
            out = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask, dropout_p=0.0, scale=attn.scaling,
                                                 is_causal=causal, **extra)
            out = out.transpose(1, 2).contiguous().reshape(1, n, -1).contiguous()
            x = x + F.linear(out, attn.o_proj.weight, attn.o_proj.bias)
            h = _rms_norm(x, layer.post_attention_layernorm)
            gate = F.linear(h, mlp.gate_proj.weight, mlp.gate_proj.bias)
            up = F.linear(h, mlp.up_proj.weight, mlp.up_proj.bias)
            x = x + F.linear(F.silu(gate) * up, mlp.down_proj.weight, mlp.down_proj.bias)
        cache.length = end
        x = _rms_norm(x[:, -1:] if last_only else x, self.norm)
        head = self.model.lm_head
        return F.linear(x, head.weight, head.bias)[0]


def _rms_norm(x: torch.Tensor, norm) -> torch.Tensor:
    """transformers' LlamaRMSNorm, op for op."""
    dtype = x.dtype
    h = x.to(torch.float32)
    variance = h.pow(2).mean(-1, keepdim=True)
    h = h * torch.rsqrt(variance + norm.variance_epsilon)
    return norm.weight * h.to(dtype)


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def _repeat_kv(x: torch.Tensor, groups: int) -> torch.Tensor:
    batch, heads, length, dim = x.shape
    return x[:, :, None].expand(batch, heads, groups, length, dim).reshape(batch, heads * groups, length, dim)
