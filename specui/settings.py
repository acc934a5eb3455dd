"""The settings of one decoding run, validated once: `DecodeSettings`, and the limits it enforces.

The engine, the chat and Teach tabs, the lesson's experiments and the benchmark all take one
`DecodeSettings`; nothing else re-types these ten values or re-checks their ranges. The limits live
here and nowhere else (the UI's sliders read them).
"""

from __future__ import annotations

import math
import operator
from dataclasses import asdict, dataclass, replace

from specui.drafters.registry import DRAFTER_NAMES

MAX_DRAFT_TOKENS = 64  # K: the most draft tokens a round may ask for
MAX_NEW_TOKENS = 1024  # the most new tokens one run of the app may ask for
MAX_TEMPERATURE = 5.0
MAX_SEED = 2**63 - 1  # the UI's seed box


class SettingsError(ValueError):
    """A setting is out of range; the message says which and why."""


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


@dataclass(frozen=True)
class DecodeSettings:
    """How to decode: K, the sampling transform, the budget, the seed and the drafter.

    drafter: a name of `specui.drafters.DRAFTER_NAMES`, None (the engine's default: the draft model
    when there is one) or any object with the `Drafter` methods. seed None draws a fresh one.
    """

    num_draft_tokens: int = 4  # K
    temperature: float = 0.0  # 0 = greedy
    top_k: int = 0  # 0 keeps every token
    top_p: float = 1.0  # 1 keeps every token
    max_new_tokens: int = 64
    seed: int | None = None
    drafter: object = None
    adaptive: bool = False  # K moves between 1 and max(2K, 8) with the observed acceptance
    ignore_eos: bool = False
    speculative: bool = True  # False: plain decoding by the target alone

    def __post_init__(self):
        if not _is_int(self.max_new_tokens) or self.max_new_tokens < 1:
            raise SettingsError(f"max_new_tokens must be an integer >= 1, got {self.max_new_tokens!r}")
        if not _is_int(self.num_draft_tokens) or not 1 <= self.num_draft_tokens <= MAX_DRAFT_TOKENS:
            raise SettingsError(f"num_draft_tokens (K) must be an integer from 1 to {MAX_DRAFT_TOKENS}, "
                                f"got {self.num_draft_tokens!r}")
        t = self.temperature
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t) or t < 0:
            raise SettingsError(f"temperature must be a finite number >= 0 (0 means greedy), got {t!r}")
        if not _is_int(self.top_k) or self.top_k < 0:
            raise SettingsError(f"top_k must be an integer >= 0 (0 disables it), got {self.top_k!r}")
        if isinstance(self.top_p, bool) or not isinstance(self.top_p, (int, float)) or not 0.0 < self.top_p <= 1.0:
            raise SettingsError(f"top_p must be in (0, 1] (1 disables it), got {self.top_p!r}")
        if self.seed is not None:
            try:
                object.__setattr__(self, "seed", operator.index(self.seed))
            except TypeError:
                raise SettingsError(f"seed must be None or an integer, got {self.seed!r}") from None
        if isinstance(self.drafter, str) and self.drafter not in DRAFTER_NAMES:
            raise SettingsError(f"unknown drafter {self.drafter!r}; choose one of {', '.join(DRAFTER_NAMES)}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    def but(self, **changes) -> DecodeSettings:
        """A copy with some fields changed (validated again)."""
        return replace(self, **changes)

    def as_dict(self) -> dict:
        """JSON-able: a drafter object is named by its class."""
        d = asdict(self)
        if d["drafter"] is not None and not isinstance(d["drafter"], str):
            d["drafter"] = type(self.drafter).__name__
        return d
