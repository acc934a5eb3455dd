"""A causal LM with its KV cache, addressed by absolute length.

`CachedLM.length` is the number of tokens whose keys and values are cached. `extend(ids)` runs the
model on new tokens at positions length..length+n-1 and returns their logits; `trim(length)` rolls
the cache back to an absolute length (rejected drafts are simply forgotten). Trimming never uses a
negative slice that could silently empty the cache at 0.

Token trees: `extend_tree(ids, parents=)` feeds tree nodes after the cached prefix, each at position
prefix length + depth and seeing only the prefix and its ancestors (an explicit mask); after
verification `keep_path(start, slots)` moves the accepted path's keys and values to start.. and
forgets the rest.

Three ways to run the model:
- `specui.lean.DecoderStack`, for Llama-style decoders on a CPU (model_type llama, mistral or qwen2;
  full attention; sdpa): the model's own weights without transformers' per-module call machinery,
  with batch-invariant rows (a token's logits do not depend on how many tokens the forward computes,
  so a verify forward gives the bits of plain decoding's one-token forwards). Keys and values go into
  one preallocated buffer, so rolling back is just not advancing (as in gpt-fast).
- `specui.graphs.GraphStack`, the same decoders on a CUDA GPU: every forward a replayed CUDA graph of
  fixed shape (batch-invariant by construction), one per model, its caches reused across generations.
- the model's own `forward` with a transformers `DynamicCache`, for everything else.
"""

from __future__ import annotations

import inspect
import weakref
from contextlib import contextmanager

import torch

from specui.feature_log import FeatureLog
from specui.graphs import GraphKV, GraphStack
from specui.lean import DecoderStack
from specui.static_kv import StaticKV

__all__ = ["CachedLM", "DecoderStack", "StaticKV", "context_limit", "model_device"]


def model_device(model: torch.nn.Module) -> torch.device:
    """Where a model's inputs go: its input embeddings' device (also right for device_map models)."""
    embeddings = model.get_input_embeddings()
    if embeddings.weight.device.type != "meta":
        return embeddings.weight.device
    # accelerate keeps a module mapped to "cpu" on the meta device between calls (its hook brings the weights
    # in): its device map says where the module runs
    mapping = getattr(model, "hf_device_map", None) or {}
    name = next((n for n, m in model.named_modules() if m is embeddings), "")
    while name not in mapping and name:
        name = name.rpartition(".")[0]
    where = mapping.get(name, "cpu")
    return torch.device(f"cuda:{where}" if isinstance(where, int) else where)


def context_limit(model: torch.nn.Module) -> int | None:
    """The longest sequence the model's positions allow, when its config says."""
    return getattr(model.config, "max_position_embeddings", None)


@contextmanager
def cpu_threads(count: int | None):
    """torch's CPU thread count set to `count` (None: left alone) for the block, then put back."""
    before = torch.get_num_threads()
    if count is None or count == before:
        yield
        return
    try:  # set inside the try: a Ctrl-C just after the set (as the call returns) puts torch's count back too
        torch.set_num_threads(count)
        yield
    finally:
        torch.set_num_threads(before)


class CachedLM:
    def __init__(self, model: torch.nn.Module, *, fast: bool = True, drafts: bool = False):
        """fast: use `DecoderStack` when the model supports it (False: always the model's forward).
        drafts: the model drafts (its rows need not be invariant): on a CPU, its small products native too."""
        self.model = model
        self.device = model_device(model)
        self.stack = (GraphStack.shared(model) or DecoderStack.build(model, drafts=drafts)) if fast else None
        # whether the model's own forward can keep one row of logits (inspect's signature is slow to build: asked
        # only where that forward runs)
        parameters = inspect.signature(model.forward).parameters if self.stack is None else {}
        self._keep_arg = "logits_to_keep" in parameters
        # the cache's keyword: `cache` in newer transformers (5.24), which warns of `past_key_values` (gone in 5.40)
        self._cache_arg = "cache" if "cache" in parameters else "past_key_values"
        self.cache = None  # a DynamicCache, or the stack's StaticKV or GraphKV
        self.length = 0
        self.early = None  # (stop, tokens, hidden [n, D]): tokens an early-exit draft ran through layers < stop
        self.tree = None  # (base, parents, depths): the prefix length under the tree, each node's parent and depth
        self.log: FeatureLog | None = None  # the target's states at every cached position, for a reused prompt

    def extend(self, ids: list[int] | torch.Tensor, *, last_only: bool = False, features: tuple[int, ...] = (),
               prompt: bool = False):
        """Feed tokens [n] after the cached ones; returns logits [n, V] ([1, V] with last_only).

        features: indices into transformers' `hidden_states` (0 the embeddings, i the input of layer i,
        the number of layers the final normed state); with them, returns (logits, features [n, F]),
        the named states of every new token side by side (what EAGLE and Medusa heads read).
        Tokens an early-exit draft already ran through the first layers (`extend_early`) start there.
        prompt: the tokens are a prompt (or a follow-up turn's new tokens after a reused conversation), a
        block that plain and speculative decoding compute alike, so the lean forward may take faster kernels
        for it (`DecoderStack.forward`).
        With a `log` (`specui.feature_log`), the forward also keeps its rows' states of the logged layers.
        """
        ids = torch.as_tensor(ids, dtype=torch.long, device=self.device).reshape(1, -1)
        early = self._take_early(ids)
        self.tree = None
        wanted, at = tuple(features), self.length
        if self.log is not None:  # the logged layers too, when this forward can give them
            features = self.log.ask(wanted, at, early_stop=early[0] if early else None)
        out = self._extend(ids, last_only, features, early, prompt)
        return self._logged(out, wanted, features, at)

    def _extend(self, ids, last_only, features, early, prompt):
        with self._whole():
            return self._forward(ids, last_only, features, early, prompt)

    def _forward(self, ids, last_only, features, early, prompt):
        if self.stack is not None:
            self._stack_cache()
            out = self.stack.forward(ids, self.cache, last_only=last_only, features=tuple(features), early=early,
                                     prompt=prompt)
            self.length += ids.shape[1]
            return out
        kwargs = {"logits_to_keep": 1} if (last_only and self._keep_arg) else {}
        if self.cache is None:
            # a plain DynamicCache keeps every layer's keys whole, so it can roll back: a model that attends
            # through a sliding window would otherwise get a cache that drops old keys and cannot crop; the
            # window itself is applied by the model's attention mask, from its config
            from transformers import DynamicCache

            self.cache = DynamicCache()
        out = self.model(input_ids=ids, use_cache=True, output_hidden_states=bool(features),
                         **{self._cache_arg: self.cache}, **kwargs)
        self.cache = out[self._cache_arg]
        self.length += ids.shape[1]
        logits = out.logits[0]
        logits = logits[-1:] if last_only else logits
        if not features:
            return logits
        return logits, torch.cat([out.hidden_states[i][0] for i in features], dim=-1)

    def _logged(self, out, wanted: tuple[int, ...], asked: tuple[int, ...], at: int):
        """A forward's output as its caller asked (`wanted`), its rows' states put in the log (`asked`)."""
        if self.log is None:
            return out
        logits, states = out if asked else (out, None)
        self.log.record(asked, at, states)
        if not wanted:
            return logits
        return logits, states[:, : states.shape[1] // len(asked) * len(wanted)]

    @contextmanager
    def _whole(self):
        """A forward done whole or not at all: one that raises (Ctrl-C, out of memory, a hook's error) leaves the
        cache at `length`, which only a finished forward advances. transformers' own forward appends each layer's
        keys as it reaches the layer, so the layers it reached are cut back (the others never got the block); the
        lean forwards write past `length` and advance the cache's own length last, so it is set back. The tokens
        cached before stay (a conversation's cache is reused, exactly); a tree begun or early layers run ahead
        are forgotten (run again)."""
        try:
            yield
        except BaseException:
            self.early = self.tree = None
            if isinstance(self.cache, (StaticKV, GraphKV)):
                self.cache.length = self.length
            elif self.cache is not None:
                for layer in self.cache.layers:  # transformers 5: a negative crop drops that many tokens
                    extra = layer.get_seq_length() - self.length
                    if extra > 0:
                        layer.crop(-extra)
            raise

    def _stack_cache(self) -> None:
        """The stack's cache, made at the first forward (a GPU stack's goes back to it when this one is gone)."""
        if self.cache is None:
            self.cache = self.stack.new_cache()
            if isinstance(self.cache, GraphKV):
                weakref.finalize(self, self.stack.release, self.cache)

    # -- token trees ---------------------------------------------------------------------------------------

    def extend_tree(self, ids: list[int] | torch.Tensor, *, parents: list[int], features: tuple[int, ...] = ()):
        """Feed tree nodes [n] after the cached ones; returns logits [n, V] (with features as `extend`).

        parents[i]: the tree slot of node i's parent (0 is the first node fed since the tree began, this
        call's nodes included, so a parent precedes its child), or -1 for a node that follows the cached
        prefix directly. The tree begins at the first call after a plain `extend`, `trim` or `keep_path`;
        its prefix is what was cached then. A node sits at position prefix + depth (-1's children: depth 0)
        and attends to the prefix, its ancestors and itself.
        """
        ids = torch.as_tensor(ids, dtype=torch.long, device=self.device).reshape(1, -1)
        self.early = None
        if self.tree is None:
            self.tree = (self.length, [], [])
        base, all_parents, depths = self.tree
        past, n = self.length, ids.shape[1]
        visible = torch.zeros(n, past + n, dtype=torch.bool)
        visible[:, :base] = True
        for i, parent in enumerate(parents):
            slot = past - base + i
            if not -1 <= parent < slot:
                raise ValueError(f"tree node {slot} has parent {parent}; a parent must be -1 or an earlier node")
            all_parents.append(parent)
            depths.append(0 if parent < 0 else depths[parent] + 1)
            visible[i, base + slot] = True
            while parent >= 0:  # the ancestors
                visible[i, base + parent] = True
                parent = all_parents[parent]
        positions = torch.tensor(depths[past - base:], dtype=torch.long) + base
        wanted = tuple(features)
        if self.log is not None:
            features = self.log.ask(wanted, past)
        with self._whole():
            if self.stack is not None:
                self._stack_cache()
                out = self.stack.forward(ids, self.cache, last_only=False, features=tuple(features),
                                         tree=(positions.to(self.device), visible))
                self.length += n
            else:
                out = self._model_tree(ids, positions, visible, features)
        return self._logged(out, wanted, features, past)

    def _model_tree(self, ids, positions, visible, features):
        """The model's own forward over tree nodes: a 4-D additive mask and explicit position ids."""
        if self.cache is None:
            from transformers import DynamicCache

            self.cache = DynamicCache()
        dtype = next(self.model.parameters()).dtype
        mask = torch.zeros(visible.shape, dtype=dtype).masked_fill_(~visible, torch.finfo(dtype).min)
        out = self.model(input_ids=ids, use_cache=True, attention_mask=mask[None, None].to(self.device),
                         position_ids=positions[None].to(self.device), output_hidden_states=bool(features),
                         **{self._cache_arg: self.cache})
        self.cache = out[self._cache_arg]
        self.length += ids.shape[1]
        logits = out.logits[0]
        if not features:
            return logits
        return logits, torch.cat([out.hidden_states[i][0] for i in features], dim=-1)

    def keep_path(self, start: int, slots: list[int]) -> None:
        """Keep cached tokens [0, start) and then the tokens at absolute `slots` (>= start, increasing, a
        tree's accepted path), moved to start..start+len(slots); forget everything else."""
        if not 0 <= start <= self.length or any(not start <= s < self.length for s in slots) or slots != sorted(slots):
            raise ValueError(f"keep_path({start}, {slots}) on a cache of {self.length} tokens")
        end = start + len(slots)
        if slots != list(range(start, end)):
            with torch.inference_mode():  # the lean buffer is an inference tensor
                self._move(start, slots)
        self.trim(end)

    def _move(self, start: int, slots: list[int]) -> None:
        if self.log is not None:
            self.log.move(start, slots)
        if isinstance(self.cache, (StaticKV, GraphKV)):
            self.cache.move(start, slots)
            return
        end = start + len(slots)
        index = torch.tensor(slots, dtype=torch.long, device=self.device)
        for layer in self.cache.layers:
            idx = index.to(layer.keys.device)
            layer.keys[..., start:end, :] = layer.keys.index_select(-2, idx)
            layer.values[..., start:end, :] = layer.values.index_select(-2, idx)

    # -- early exit: a draft that runs the target's first layers on the target's own cache ----------------

    def extend_early(self, ids: list[int] | torch.Tensor, *, stop: int) -> torch.Tensor:
        """Run tokens [n] after the cached and early-run ones through layers 0..stop-1 only, writing those
        layers' keys and values into this cache; returns their hidden states [n, D] entering layer `stop`.
        The next `extend` whose tokens begin with them starts them at layer `stop`: nothing runs twice.
        Needs a lean stack (`DecoderStack`, or `GraphStack` on a GPU)."""
        if self.stack is None:
            raise ValueError("an early-exit draft shares the target's cache through specui's lean forward, which "
                             "this target does not take (it needs a Llama, Mistral or Qwen2 decoder on a CPU or a "
                             "CUDA GPU)")
        self._stack_cache()
        if self.early and self.early[0] != stop:
            self.early = None
        ids = torch.as_tensor(ids, dtype=torch.long, device=self.device).reshape(1, -1)
        done = 0 if not self.early else len(self.early[1])
        hidden = self.stack.run_early(ids, self.cache, self.length + done, stop)
        if self.early:
            self.early = (stop, self.early[1] + ids[0].tolist(), torch.cat([self.early[2], hidden]))
        else:
            self.early = (stop, ids[0].tolist(), hidden)
        return hidden

    def ran_early(self, stop: int, ids: list[int], hidden: torch.Tensor) -> None:
        """Record tokens [n] that a native early-exit round (`specui.native_adapters`) ran through layers 0..stop-1 after
        the cached ones, as `extend_early` would have: their keys and values are in the cache, hidden [n, D] their
        states entering layer `stop`."""
        self.early = (stop, list(ids), hidden)

    @property
    def early_length(self) -> int:
        """Tokens whose first layers are cached: `length` plus those an early-exit draft ran ahead."""
        return self.length + (len(self.early[1]) if self.early else 0)

    def _take_early(self, ids: torch.Tensor) -> tuple[int, torch.Tensor] | None:
        """The early-run tokens' (stop, hidden) when `ids` begin with them; they are consumed either way."""
        early, self.early = self.early, None
        if not early or self.stack is None:
            return None
        stop, tokens, hidden = early
        m = min(len(tokens), ids.shape[1])
        if ids[0, :m].tolist() != tokens[:m]:
            return None  # other tokens: their early layers are recomputed (and overwritten)
        return stop, hidden[:m]

    def trim(self, length: int) -> None:
        """Forget every cached token at position >= length."""
        if not 0 <= length <= self.length:
            raise ValueError(f"cannot trim a cache of {self.length} tokens to {length}")
        self.early = self.tree = None
        drop = self.length - length
        if drop > 0:
            if isinstance(self.cache, (StaticKV, GraphKV)):
                self.cache.length = length  # positions >= length are overwritten by the next extend
            else:
                self.cache.crop(-drop)  # transformers 5: a negative argument is the number of tokens to drop
            self.length = length
        if self.log is not None:
            self.log.trim(length)
        assert self.cache is None or self.cache.get_seq_length() == self.length, "KV cache out of step"
