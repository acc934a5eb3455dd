"""Many conversations' caches for one target (`specui.prompt_cache.PromptCache`, an app serving several chats), kept
within a memory budget: the least recently used go first when a new one needs the room, never one a run is using, and
never the last one (a conversation larger than the whole budget keeps its cache, alone). A turn whose cache went reads
its whole conversation again and gives the same tokens.
"""

from __future__ import annotations

import os
import re
import threading
import weakref
from collections.abc import Sequence

import torch

from specui.kv import context_limit, model_device
from specui.prompt_cache import PromptCache


def bytes_per_token(model: torch.nn.Module) -> int:
    """What one token's keys and values take in the target's cache: 2 x layers x key-value heads x head width x
    bytes a number (a CUDA GPU's graphs keep float32; SmolLM2-135M: 2 x 30 x 3 x 64 x 4 = 46,080)."""
    config = model.config.get_text_config()
    heads = config.num_attention_heads
    width = getattr(config, "head_dim", None) or config.hidden_size // heads
    kv_heads = getattr(config, "num_key_value_heads", None) or heads
    device = model_device(model)
    size = 4 if device.type == "cuda" else model.get_input_embeddings().weight.element_size()
    return 2 * config.num_hidden_layers * kv_heads * width * size


def memory_of(device: torch.device) -> int:
    """The memory a model's caches on `device` live in: a CUDA GPU's free memory, else the machine's (within a
    container's limit)."""
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    for limit in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(limit) as f:
                total = min(total, int(f.read()))
        except (OSError, ValueError):  # no such file, or "max": no limit
            pass
    return total


GPU_CACHES = 4  # on a CUDA GPU each live cache holds its own captured graphs, which no budget of bytes sees


def default_size(device: torch.device) -> int | None:
    """The most caches a pool keeps unless told: on a CUDA GPU `GPU_CACHES` (a cache there carries CUDA graphs
    captured for it, their memory and capture time beyond its keys and values); elsewhere as many as the budget
    holds (None)."""
    return GPU_CACHES if device.type == "cuda" else None


def default_budget(model: torch.nn.Module) -> int:
    """The bytes a pair's conversation caches may hold together unless told (`SPECUI_CONVERSATION_MEMORY`): a
    quarter of the memory they live in (`memory_of`), raised towards one conversation of the model's whole
    context, up to half of that memory."""
    memory = memory_of(model_device(model))
    return max(memory // 4, min(memory // 2, bytes_per_token(model) * (context_limit(model) or 0)))


_UNITS = {"": 1, "b": 1, "k": 1e3, "kb": 1e3, "m": 1e6, "mb": 1e6, "g": 1e9, "gb": 1e9, "t": 1e12, "tb": 1e12,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}


def parse_bytes(text: str) -> int:
    """A size as people write it ("2GB", "512 MB", "1.5GiB", "3000000") in bytes; ValueError otherwise."""
    found = re.fullmatch(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-z]*)\s*", text.lower())
    if found is None or found[2] not in _UNITS:
        raise ValueError(f"{text!r} is not a size (e.g. 2GB, 512MB or 1.5GiB)")
    return int(float(found[1]) * _UNITS[found[2]])


class PromptCaches:
    """Conversations' caches for one target within `budget` bytes (None: `default_budget` of the first model
    picked for): `pick(ids)` gives the free cache that shares the longest prefix with a prompt, else a new one.
    A prefix counts when it is at least 64 tokens or half the prompt: a new chat shares only the template's
    opening with the others, and should not take an ongoing chat's cache for it (nor, whatever its length,
    another owner's whose conversation it does not go on from: `pick`'s owner). To make room for a picked
    cache (its prompt's tokens, at the model's `bytes_per_token`) and for what a run added to one when it ends,
    the least recently used free caches are let go (their memory goes when no run holds them); never a cache a
    run holds, nor the one being made room for, so at least one is always kept. size: at most this many caches
    besides (None: `default_size` for the first model picked for, whatever the budget); with all of them held,
    `pick` gives None."""

    def __init__(self, size: int | None = None, *, budget: int | None = None):
        if size is not None and size < 1:
            raise ValueError(f"size must be at least 1 (got {size})")
        if budget is not None and budget < 0:
            raise ValueError(f"budget must be at least 0 bytes (got {budget})")
        self.size, self.budget = size, budget
        self._sized = size is not None  # else sized by the first model's device (`default_size`)
        self.caches: list[PromptCache] = []  # most recently used first
        # re-entrant: a stream dropped unfinished is closed when collected, which may happen inside `pick` (the
        # collector runs at any allocation), and its cache's close comes back here (`used`) on the same thread
        self._guard = threading.RLock()

    @property
    def nbytes(self) -> int:
        """The memory all the pool's caches hold."""
        with self._guard:
            return sum(c.nbytes for c in self.caches)

    def pick(self, ids: Sequence[int], model: torch.nn.Module | None = None, *,
             owner: str | None = None) -> PromptCache | None:
        """The cache for a generation of prompt `ids`; None when `size` caches are all held. owner: who the
        conversation is (the app: a page's session): another owner's cache is taken for a shared prefix only when
        `ids` goes on from everything it holds, so a visitor's new chat, which shares the template's opening with
        every conversation, does not cut short another visitor's conversation while the budget has room."""
        with self._guard:
            if self.budget is None and model is not None:
                self.budget = default_budget(model)
            if not self._sized and model is not None:  # a budget set by SPECUI_CONVERSATION_MEMORY too
                self.size, self._sized = default_size(model_device(model)), True

            def kept(cache: PromptCache) -> int:  # the prompt's tokens the cache would spare, if it may be taken
                shared = cache.reusable(ids, model)
                return shared if cache.owner == owner or shared >= cache.length else 0

            free = [c for c in self.caches if not c.busy]
            best = max(free, key=kept, default=None)
            shared = 0 if best is None else kept(best)
            if shared == 0 or (shared < 64 and 2 * shared < len(ids)):
                if self.size is None or len(self.caches) < self.size:
                    best = PromptCache()
                    best.pool = weakref.ref(self)
                elif free:
                    best = free[-1]  # the least recently used: its conversation forgotten
                else:
                    return None
            best.owner = owner
            self._make_room(best, len(ids) * bytes_per_token(model) if model is not None else 0)
            return best

    def forget(self, owner: str) -> int:
        """`owner` is gone (the app: a closed tab, whose conversation no page shows any more): its caches leave the
        pool now, a cache a run still holds as that run ends. Returns how many left."""
        with self._guard:
            gone = [c for c in self.caches if c.owner == owner]
            for cache in gone:
                if cache in self.caches:  # a run closed meanwhile (a stream collected in a clear) may have let it go
                    self.caches.remove(cache)
                cache.pool = None  # a run that holds it does not bring it back (`used`)
                cache.clear()  # its memory goes now (a cache a run holds keeps its own until that run ends)
        return len(gone)

    def used(self, cache: PromptCache) -> None:
        """A run ended with `cache` (`PromptCache.close`): the most recently used now, kept within the budget (and
        back in the pool if it was let go between its pick and its run)."""
        with self._guard:
            if cache in self.caches or self.size is None or len(self.caches) < self.size:
                self._make_room(cache, 0)

    def _make_room(self, cache: PromptCache, wanted: int) -> None:
        """`cache` first, and the least recently used free caches let go until the pool holds at most the budget
        with `cache` holding `wanted` bytes (or what it holds, if more)."""
        if cache in self.caches:
            self.caches.remove(cache)
        others = [c for c in self.caches if c.busy or c.lm is not None]  # a cache that never ran holds nothing
        self.caches = [cache, *others]
        if self.budget is None:
            return
        total = max(cache.nbytes, wanted) + sum(c.nbytes for c in others)
        for c in reversed(others):
            if total <= self.budget:
                break
            if not c.busy and c in self.caches:
                total -= c.nbytes
                self.caches.remove(c)
