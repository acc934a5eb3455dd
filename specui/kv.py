"""A causal LM with its KV cache, addressed by absolute length.

`CachedLM.length` is the number of tokens whose keys and values are cached. `extend(ids)` runs the
model on new tokens at positions length..length+n-1 and returns their logits; `trim(length)` rolls
the cache back to an absolute length (rejected drafts are simply forgotten). Trimming never uses a
negative slice that could silently empty the cache at 0.

Two ways to run the model, with the same logits bit for bit:
- `DecoderStack`, for Llama-style decoders on a CPU (model_type llama, mistral or qwen2; full
  attention; sdpa): the model's own parameters and the same torch ops in the same order as
  transformers' forward, without the per-module call machinery, mask building and cache
  bookkeeping that cost a small model about a third of its forward time on a CPU. Keys and values
  go into one preallocated buffer, so rolling back is just not advancing (as in gpt-fast).
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
        self._views()

    def _views(self) -> None:
        self.keys = list(self.buffer[:, 0].unbind(0))  # per layer [kv_heads, capacity, head_dim]
        self.values = list(self.buffer[:, 1].unbind(0))

    def get_seq_length(self) -> int:
        return self.length

    def reserve(self, length: int) -> None:
        capacity = self.buffer.shape[3]
        if length > capacity:
            grown = self.buffer.new_empty(*self.buffer.shape[:3], max(length, 2 * capacity), self.buffer.shape[4])
            grown[:, :, :, : self.length] = self.buffer[:, :, :, : self.length]
            self.buffer = grown
            self._views()


class DecoderStack:
    """A lean forward of a Llama-style decoder over a `StaticKV` (batch 1).

    It holds references to the model's own parameters (never copies) and repeats transformers'
    sdpa path op for op, so its logits equal the model's cached forward bit for bit (tests check):
    RMSNorm in float32, rotary embeddings from the model's own `rotary_emb`, sdpa with no mask for
    one new token, `is_causal` for a prefill, an additive causal mask otherwise (keys and values
    repeated for grouped-query attention under a mask, `enable_gqa` without one, as transformers does).
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
        # (norm, q, k, v, o, norm, gate, up, down) as (weight, bias | eps) pairs, and the attention scale:
        # plain references, so a forward does not pay nn.Module attribute lookups
        self.params = []
        for layer in self.layers:
            attn, mlp = layer.self_attn, layer.mlp
            lin = [(m.weight, m.bias) for m in (attn.q_proj, attn.k_proj, attn.v_proj, attn.o_proj,
                                                   mlp.gate_proj, mlp.up_proj, mlp.down_proj)]
            norms = [(m.weight, m.variance_epsilon) for m in (layer.input_layernorm, layer.post_attention_layernorm)]
            self.params.append((norms[0], *lin[:4], norms[1], *lin[4:], attn.scaling))
        # Static rotary embeddings (rope_type "default") are a function of the position alone: a table
        # of the module's own cos and sin, grown with the cache, equals calling it per forward bit for bit
        # (vectorised cos/sin see whole vectors either way when head_dim is a multiple of 16; tests check).
        rope = getattr(model.config, "rope_parameters", None) or {}
        self.rope_table = rope.get("rope_type") == "default" and self.head_dim % 16 == 0
        self.cos_table = self.sin_table = None  # [positions, head_dim]; sin with its first half negated

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
        if getattr(config, "_attn_implementation", None) != "sdpa":
            return None  # eager or flash attention: other kernels, other last bits
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
        if device.type != "cpu":
            return None  # measured and tested on CPUs only; elsewhere the model's own forward runs
        for m in modules:
            if getattr(m, "_hf_hook", None) is not None or m._forward_hooks or m._forward_pre_hooks:
                return None  # offloaded (accelerate) or instrumented: let the model's forward run
            for p in m.parameters(recurse=False):
                if type(p) is not torch.nn.Parameter or not p.dtype.is_floating_point or p.device != device:
                    return None  # quantized or spread over devices
        return stack

    def _rotary(self, x: torch.Tensor, past: int, end: int) -> tuple[torch.Tensor, torch.Tensor]:
        """cos and sin (first half negated, see the rotation below) at positions past..end-1."""
        if not self.rope_table:
            positions = torch.arange(past, end, device=x.device).unsqueeze(0)
            cos, sin = self.rotary(x, position_ids=positions)  # [1, n, head_dim]
            return cos.unsqueeze(1), _signed_sin(sin).unsqueeze(1)
        if self.cos_table is None or end > self.cos_table.shape[0]:
            size = max(end, 256, 2 * (0 if self.cos_table is None else self.cos_table.shape[0]))
            cos, sin = self.rotary(x, position_ids=torch.arange(size, device=x.device).unsqueeze(0))
            self.cos_table, self.sin_table = cos[0], _signed_sin(sin)[0]
        return self.cos_table[past:end][None, None], self.sin_table[past:end][None, None]

    def new_cache(self) -> StaticKV:
        weight = self.layers[0].self_attn.k_proj.weight
        return StaticKV(len(self.layers), self.kv_heads, self.head_dim, dtype=weight.dtype, device=weight.device)

    def forward(self, ids: torch.Tensor, cache: StaticKV, *, last_only: bool) -> torch.Tensor:
        """ids [1, n] at positions cache.length.. -> logits [n, V] ([1, V] with last_only)."""
        if not torch.is_inference_mode_enabled():  # the buffer is an inference tensor, written in place
            with torch.inference_mode():
                return self.forward(ids, cache, last_only=last_only)
        n, past = ids.shape[1], cache.length
        end = past + n
        cache.reserve(end)
        x = self.embed(ids)  # [1, n, D]
        cos, sin = self._rotary(x, past, end)  # [1, 1, n, head_dim] each
        if n == 1:
            mask, causal = None, False  # one query sees every cached key
        elif past == 0:
            mask, causal = None, True  # a prefill: plain causal attention
        else:  # query i (position past+i) sees keys 0..past+i; additive, as sdpa turns a boolean mask
            # into in every layer (the same bits: tests check), so that conversion happens once here
            positions = torch.arange(past, end, device=ids.device).reshape(n, 1)
            hidden = torch.arange(end, device=ids.device) > positions
            mask = torch.zeros(1, 1, n, end, dtype=x.dtype, device=ids.device).masked_fill_(hidden, float("-inf"))
            causal = False
        keys_all, values_all = cache.keys, cache.values
        hd, half = self.head_dim, self.head_dim // 2
        for i, params in enumerate(self.params):
            norm1, (wq, bq), (wk, bk), (wv, bv), (wo, bo), norm2, (wg, bg), (wu, bu), (wd, bd), scaling = params
            h = _rms_norm(x, *norm1)  # [1, n, D]
            q = F.linear(h, wq, bq).view(1, n, -1, hd).transpose(1, 2)
            k = F.linear(h, wk, bk).view(1, n, -1, hd).transpose(1, 2)
            v = F.linear(h, wv, bv).view(1, n, -1, hd).transpose(1, 2)  # [1, kv_heads, n, hd]
            # rotate_half(t) * sin == cat(t2, t1) * cat(-sin1, sin2) exactly: (-a) * b == a * (-b) in IEEE arithmetic
            q = (q * cos) + (torch.cat((q[..., half:], q[..., :half]), dim=-1) * sin)
            k = (k * cos) + (torch.cat((k[..., half:], k[..., :half]), dim=-1) * sin)
            key_buf, value_buf = keys_all[i], values_all[i]
            key_buf[:, past:end] = k[0]
            value_buf[:, past:end] = v[0]
            keys, values = key_buf[None, :, :end], value_buf[None, :, :end]  # [1, kv_heads, end, hd]
            extra = {}
            if self.groups > 1:
                if mask is None:
                    extra["enable_gqa"] = True
                else:
                    keys, values = _repeat_kv(keys, self.groups), _repeat_kv(values, self.groups)
            out = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask, dropout_p=0.0, scale=scaling,
                                                 is_causal=causal, **extra)
            out = out.transpose(1, 2).contiguous().reshape(1, n, -1).contiguous()
            x = x + F.linear(out, wo, bo)
            h = _rms_norm(x, *norm2)
            x = x + F.linear(F.silu(F.linear(h, wg, bg)) * F.linear(h, wu, bu), wd, bd)
        cache.length = end
        x = _rms_norm(x[:, -1:] if last_only else x, self.norm.weight, self.norm.variance_epsilon)
        head = self.model.lm_head
        return F.linear(x, head.weight, head.bias)[0]


def _signed_sin(sin: torch.Tensor) -> torch.Tensor:
    half = sin.shape[-1] // 2
    return torch.cat((-sin[..., :half], sin[..., half:]), dim=-1)


def _rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """transformers' LlamaRMSNorm, op for op (the casts are skipped when they are no-ops)."""
    dtype = x.dtype
    h = x if dtype == torch.float32 else x.to(torch.float32)
    variance = h.pow(2).mean(-1, keepdim=True)
    h = h * torch.rsqrt(variance + eps)
    return weight * (h if dtype == torch.float32 else h.to(dtype))


def _repeat_kv(x: torch.Tensor, groups: int) -> torch.Tensor:
    batch, heads, length, dim = x.shape
    return x[:, :, None].expand(batch, heads, groups, length, dim).reshape(batch, heads * groups, length, dim)
