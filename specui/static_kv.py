"""The lean forward's KV cache: preallocated key and value buffers for every layer, grown by doubling.

Rolling back is just not advancing `length` (gpt-fast); a token tree's accepted path is moved into place
(`move`). Keys are stored transposed, as attention's scores read them (`specui.lean`, `specui.native`).
"""

from __future__ import annotations

import torch

KEY_BLOCK = 256  # attention sums values over blocks of this many keys (the cache capacity is a multiple)


class StaticKV:
    """Keys [layers, kv_heads, head_dim, capacity] (stored transposed, as the attention scores read
    them) and values [layers, kv_heads, capacity, head_dim] of every layer, zero-initialised (attention
    reads whole blocks and masks the unwritten keys, which must not be NaN); capacity, a multiple of
    KEY_BLOCK, doubles when full. `length` tokens are valid."""

    def __init__(self, layers: int, kv_heads: int, head_dim: int, *, dtype, device, capacity: int = KEY_BLOCK):
        self.keys = torch.zeros(layers, kv_heads, head_dim, capacity, dtype=dtype, device=device)
        self.values = torch.zeros(layers, kv_heads, capacity, head_dim, dtype=dtype, device=device)
        self.length = 0

    def get_seq_length(self) -> int:
        return self.length

    def reserve(self, length: int) -> None:
        capacity = self.values.shape[2]
        if length > capacity:
            size = -(-max(length, 2 * capacity) // KEY_BLOCK) * KEY_BLOCK
            keys = self.keys.new_zeros(*self.keys.shape[:3], size)
            values = self.values.new_zeros(self.values.shape[0], self.values.shape[1], size, self.values.shape[3])
            keys[..., :capacity] = self.keys  # all of it: an early-exit draft may have written past `length`
            values[:, :, :capacity] = self.values
            self.keys, self.values = keys, values

    def move(self, start: int, slots: list[int]) -> None:
        """Move the keys and values at `slots` to start..start+len(slots) (a tree's accepted path)."""
        index, end = torch.tensor(slots, dtype=torch.long, device=self.keys.device), start + len(slots)
        self.keys[..., start:end] = self.keys.index_select(3, index)
        self.values[:, :, start:end] = self.values.index_select(2, index)
