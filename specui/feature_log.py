"""The target's states at every cached position, kept beside its KV cache for a reused conversation.

An EAGLE or Medusa head drafts from the target's hidden states (`target_features`): when a chat's next
turn reuses the target's keys and values of the conversation so far (`specui.prompt_cache`), the head also
needs those positions' states, which only the target's forward produced. `CachedLM` keeps them here when a
`PromptCache` asks (`CachedLM.log`): every forward then also returns the logged layers' states, and the log
follows the cache exactly as its keys and values do: rows written at the positions the forward fed,
forgotten by `trim`, moved by a tree's `keep_path`.

`valid` counts the leading positions whose states are logged. A forward that cannot give them (an
early-exit draft's tokens enter the verify forward past the logged layers) ends the log there; a later
`trim` to at most `valid` positions lets it go on.
"""

from __future__ import annotations

import torch


class FeatureLog:
    """States [positions, len(key) * D] of the target's layers `key` (indices into transformers'
    `hidden_states`, as a drafter's `target_features`) at positions 0..valid-1."""

    def __init__(self, key: tuple[int, ...]):
        self.key = tuple(key)
        self.rows: torch.Tensor | None = None  # [capacity, F], grown by doubling
        self.valid = 0

    def ask(self, features: tuple[int, ...], at: int, *, early_stop: int | None = None) -> tuple[int, ...]:
        """The layers a forward of new tokens at position `at` computes: the caller's `features`, then the
        logged ones it lacks, when the log can take this forward's rows (else the caller's alone)."""
        if not self.key or self.valid != at or (early_stop is not None and min(self.key) < early_stop):
            return tuple(features)
        return tuple(features) + tuple(i for i in self.key if i not in features)

    def record(self, asked: tuple[int, ...], at: int, states: torch.Tensor | None) -> None:
        """Log the key's columns of `states` [n, len(asked) * D] (rows at positions at..at+n-1), if `asked`
        has them (`ask` said so), else end the log at `at`."""
        if states is None or not self.key or not set(self.key) <= set(asked) or self.valid != at:
            self.valid = min(self.valid, at)
            return
        width = states.shape[1] // len(asked)
        columns = [states[:, asked.index(i) * width:(asked.index(i) + 1) * width] for i in self.key]
        rows = columns[0] if len(columns) == 1 else torch.cat(columns, dim=1)
        end = at + rows.shape[0]
        if self.rows is None or self.rows.shape[0] < end or self.rows.shape[1] != rows.shape[1] \
                or self.rows.dtype != rows.dtype or self.rows.device != rows.device:
            grown = rows.new_empty(max(end, 2 * (0 if self.rows is None else self.rows.shape[0]), 64), rows.shape[1])
            if self.rows is not None and self.rows.shape[1] == rows.shape[1] and self.rows.dtype == rows.dtype:
                grown[:at] = self.rows[:at].to(grown.device)
            self.rows = grown
        self.rows[at:end] = rows
        self.valid = end

    def trim(self, length: int) -> None:
        self.valid = min(self.valid, length)

    def move(self, start: int, slots: list[int]) -> None:
        """A tree's accepted path at `slots` moves to start..: its states go with it (when logged)."""
        if slots and self.valid > max(slots):
            index = torch.tensor(slots, dtype=torch.long, device=self.rows.device)
            self.rows[start:start + len(slots)] = self.rows.index_select(0, index)
            self.valid = start + len(slots)
        else:
            self.valid = min(self.valid, start)

    def holds(self, features: tuple[int, ...]) -> bool:
        """Whether the log keeps every layer of `features`."""
        return set(features) <= set(self.key)

    def states(self, length: int, features: tuple[int, ...]) -> torch.Tensor:
        """The logged states of positions 0..length-1 (0 < length <= valid, `holds(features)`), laid out as a
        drafter's `features` are."""
        if not 0 < length <= self.valid or not self.holds(features):
            raise ValueError(f"the log holds {self.valid} positions of layers {self.key}, not {length} of {features}")
        width = self.rows.shape[1] // len(self.key)
        if tuple(features) == self.key:
            return self.rows[:length].clone()
        return torch.cat([self.rows[:length, self.key.index(i) * width:(self.key.index(i) + 1) * width]
                          for i in features], dim=1)
