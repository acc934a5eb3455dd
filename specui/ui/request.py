"""What one request asks for: `Settings` = the `DecodeSettings` of the run plus the preset and the mode (compare,
arena),
and `Settings.from_ui`, which turns widget values (floats for integers, blanks, labels) into them.

A Seed of -1 (or a blank box) is None here; the app's handlers draw its seed with `seeded`, once for a request's whole
work, below `SEEDS_DRAWN`: every seed the page shows can be read out and typed back (the engine's own draw, for a
library user who leaves it None, is 63 bits, more than the page's Seed box holds).

The ranges are `specui.settings`' limits, checked there; this module only coerces what widgets send.
"""

from __future__ import annotations

import math
import re
import secrets
from dataclasses import dataclass, fields

from specui.drafters.registry import DRAFTER_NAMES, LABELS, MODEL, name_of
from specui.settings import (MAX_CONFIDENCE, MAX_DRAFT_TOKENS, MAX_NEW_TOKENS, MAX_REPETITION_PENALTY, MAX_SEED,
                             MAX_TEMPERATURE, MAX_TOP_K, MAX_TREE_NODES, MAX_TREE_WIDTH, DecodeSettings, SettingsError,
                             reworded)

SEEDS_DRAWN = 10**9  # a seed drawn for -1 is below it: nine digits at most, read out and typed back in a moment
DRAFTER_CHOICES = {label: name for name, label in LABELS.items()}  # what the radio shows -> drafter name
# a refusal's list of drafters: the names (the API's docs, the library) and the labels (the page's radio), both taken
DRAFTERS_SAID = f"a name ({', '.join(LABELS)}) or a label ({', '.join(LABELS.values())})"
# the settings' field names as the page's controls are labelled (a refusal quotes the engine's check)
PAGE_WORDS = {"num_draft_tokens": "K", "max_new_tokens": "Max new tokens",
              "tree_width": "Tree width", "tree_nodes": "Tree nodes", "top_k": "Top-k", "top_p": "Top-p",
              "draft_confidence": "Confidence stop", "repetition_penalty": "Repetition penalty"}


def in_page_words(message: str) -> str:
    """A settings refusal in the page's words: its fields as the controls are labelled (`tree_nodes=64 needs a
    tree: set tree_width to 2 or more` -> `Tree nodes 64 needs a tree: set Tree width to 2 or more`), a drafter
    as the Drafter radio names it ('prompt_lookup' -> 'prompt lookup')."""
    message = reworded(message.replace("num_draft_tokens (K)", "K"), PAGE_WORDS)
    message = re.sub(r"one of ((?:\w+, )*\w+)",  # a list of drafters' names
                     lambda m: "one of " + ", ".join(LABELS.get(n, n) for n in m.group(1).split(", ")), message)
    for name, label in LABELS.items():
        message = message.replace(f"'{name}'", f"'{label}'")
    return message


@dataclass(frozen=True)
class Settings(DecodeSettings):
    """A request: decode settings (with the app's defaults), the preset, and whether to race plain decoding
    (compare) or to decode with plain decoding and then every drafter of the preset (arena; the drafter is
    then ignored)."""

    drafter: object = MODEL
    seed: int | None = 0
    preset: str | None = None
    compare: bool = False
    arena: bool = False
    system: str = ""  # a chat preset's system message ("": the template's own default); base models ignore it

    @property
    def decode(self) -> DecodeSettings:
        """The decode settings alone, as the engine takes them."""
        return DecodeSettings(**{f.name: getattr(self, f.name) for f in fields(DecodeSettings)})

    @classmethod
    def from_ui(cls, **values) -> Settings:
        """Coerce what widgets send (floats for integers, None or "" for blanks, labels) and check ranges."""
        drafter = name_of(values.get("drafter") or MODEL)
        if drafter not in DRAFTER_NAMES:
            raise SettingsError(f"drafter must be {DRAFTERS_SAID} (got {said(drafter)})")
        if values.get("arena"):  # the arena races every drafter: the one selected must not veto its settings
            drafter = MODEL
        top_p = _number(values, "top_p", 0.0, 1.0, 1.0)
        if top_p <= 0:
            raise SettingsError("top-p must be above 0 (1 turns it off)")
        seed = _integer(values, "seed", -1, MAX_SEED, blank=None)
        return cls(preset=values.get("preset") or None, drafter=drafter,
                   num_draft_tokens=_integer(values, "num_draft_tokens", 1, MAX_DRAFT_TOKENS),
                   adaptive=bool(values.get("adaptive")),
                   draft_confidence=_number(values, "draft_confidence", 0.0, MAX_CONFIDENCE, 0.0),
                   temperature=_number(values, "temperature", 0.0, MAX_TEMPERATURE, 0.0), top_p=top_p,
                   top_k=_integer(values, "top_k", 0, MAX_TOP_K, blank=0),
                   repetition_penalty=_penalty(values),
                   max_new_tokens=_integer(values, "max_new_tokens", 1, MAX_NEW_TOKENS),
                   seed=None if seed == -1 else seed, compare=bool(values.get("compare")),
                   tree_width=_integer(values, "tree_width", 1, MAX_TREE_WIDTH, blank=1),
                   tree_nodes=_integer(values, "tree_nodes", 0, MAX_TREE_NODES, blank=0),
                   arena=bool(values.get("arena")), system=_system(values))


def seeded(settings: Settings) -> Settings:
    """`settings` with the seed its run decodes with: its own, or for -1 (None: a blank box too) a fresh one below
    `SEEDS_DRAWN`, drawn once for all of a request's work (compare's plain run and every arena contestant take it too,
    as do a Teach experiment's every point). A greedy run reads none."""
    return settings if settings.seed is not None else settings.but(seed=secrets.randbelow(SEEDS_DRAWN))


def seed_words(greedy: bool, seed: int | None) -> str:
    """A decoded run's seed as a status line says it: the one drawn for -1 too, or that a greedy run read none."""
    return "greedy: the seed plays no part" if greedy else f"seed {seed}"


_REQUIRED = object()
MAX_SYSTEM_CHARS = 4000  # a system prompt is instructions, not a document (the context holds the rest)


def said(value) -> str:
    """A value a refusal quotes: its repr, cut short when long (a client may send thousands of characters)."""
    text = repr(value)
    return text if len(text) <= 48 else f"{text[:40]}… ({len(text):,} characters)"


def _penalty(values: dict) -> float:
    penalty = _number(values, "repetition_penalty", 0.0, MAX_REPETITION_PENALTY, 1.0)
    if penalty <= 0:
        raise SettingsError("repetition penalty must be above 0 (1 turns it off, above 1 discourages repeats)")
    return penalty


def _system(values: dict) -> str:
    v = values.get("system")
    text = "" if v is None else str(v).strip()
    if len(text) > MAX_SYSTEM_CHARS:
        raise SettingsError(f"the system prompt is {len(text)} characters; keep it to {MAX_SYSTEM_CHARS} at most")
    return text


WHOLE = re.compile(r"\s*[+-]?[0-9]+\s*")  # a whole number as text (ASCII digits: "²" passes isdigit, not int())


def _integer(values: dict, name: str, lo: int, hi: int, *, blank=_REQUIRED) -> int | None:
    words = name.replace("_", " ")
    v = values.get(name)
    if v is None or v == "":
        if blank is _REQUIRED:
            raise SettingsError(f"{words} is required")
        return blank
    try:  # an int, or a string of one, is taken exactly: a seed above 2**53 is no float's
        f = v if isinstance(v, int) else int(v) if isinstance(v, str) and WHOLE.fullmatch(v) else float(v)
    except (TypeError, ValueError):  # ValueError: also a string of over 4,300 digits, which int() does not read
        raise SettingsError(f"{words} must be a number (got {said(v)})") from None
    if isinstance(f, float) and not math.isfinite(f) or f != int(f) or not lo <= f <= hi:
        raise SettingsError(f"{words} must be a whole number from {lo} to {hi} (got {said(v)})")
    return int(f)


def _number(values: dict, name: str, lo: float, hi: float, default: float) -> float:
    words = name.replace("_", " ")
    v = values.get(name, default)
    try:
        f = float(default if v is None else v)
    except (TypeError, ValueError, OverflowError):  # OverflowError: an int past a float's range (JSON holds any)
        raise SettingsError(f"{words} must be a number (got {said(v)})") from None
    if not lo <= f <= hi:
        raise SettingsError(f"{words} must be from {lo} to {hi} (got {said(v)})")
    return f

