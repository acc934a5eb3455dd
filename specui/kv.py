"""A causal LM with its KV cache, addressed by absolute length.

`CachedLM.length` is the number of tokens whose keys and values are cached. `extend(ids)` runs the
model on new tokens at positions length..length+n-1 and returns their logits; `trim(length)` rolls
the cache back to an absolute length (rejected drafts are simply forgotten). Trimming never uses a
negative slice that could silently empty the cache at 0.

Two ways to run the model:
- `specui.lean.DecoderStack`, for Llama-style decoders on a CPU (model_type llama, mistral or qwen2;
  full attention; sdpa): the model's own weights without transformers' per-module call machinery,
  with batch-invariant rows (a token's logits do not depend on how many tokens the forward computes,
  so a verify forward gives the bits of plain decoding's one-token forwards). Keys and values go into
  one preallocated buffer, so rolling back is just not advancing (as in gpt-fast).
- the model's own `forward` with a transformers `DynamicCache`, for everything else.
"""

from __future__ import annotations

import inspect

import torch

from specui.lean import DecoderStack, StaticKV

__all__ = ["CachedLM", "DecoderStack", "StaticKV", "context_limit", "model_device"]


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
        if self.cache is None:
            # a plain DynamicCache keeps every layer's keys whole, so it can roll back: a model that attends
            # through a sliding window would otherwise get a cache that drops old keys and cannot crop; the
            # window itself is applied by the model's attention mask, from its config
            from transformers import DynamicCache

            self.cache = DynamicCache()
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
