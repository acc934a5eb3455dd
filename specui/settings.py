"""The settings of one decoding run, validated once: `DecodeSettings`, and the limits it enforces.

The engine, the chat and Teach tabs, the lesson's experiments and the benchmark all take one
`DecodeSettings`; nothing else re-types these fourteen values (its fields) or re-checks their ranges. The limits live
here and nowhere else (the UI's sliders read them).
"""

from __future__ import annotations

import math
import numbers
import operator
import re
import reprlib
from dataclasses import asdict, dataclass, fields, replace

from specui.drafters.registry import (DRAFTER_NAMES, EAGLE, EARLY_EXIT, EARLY_EXIT_LOOKUP, MEDUSA, MODEL, MODEL_LOOKUP,
                                      name_of)

MAX_DRAFT_TOKENS = 64  # K: the most draft tokens a round may ask for
MAX_NEW_TOKENS = 1024  # the most new tokens one run of the app may ask for
MAX_TEMPERATURE = 5.0
MAX_REPETITION_PENALTY = 10.0  # transformers takes any positive penalty; past a few, every seen token is gone
MIN_TEMPERATURE = 1e-5  # below it, logits / temperature overflow float32 and sampling is greedy anyway
MAX_SEED = 2**63 - 1  # the UI's seed box
MAX_TOP_K = 1_000_000  # the most top_k the app's box, its API and the terminal take (the library takes any)
SEED_LIMIT = 2**64  # torch generators take seeds in [0, 2**64)
DRAFTER_METHODS = ("start", "propose", "observe")  # what a drafter object must have (`specui.drafters.Drafter`)
MAX_TREE_WIDTH = 8  # children per expanded node of a token tree
MAX_TREE_NODES = 256  # the most tree nodes one verify forward may check
MAX_CONFIDENCE = 0.95  # the most draft_confidence the app's slider, its API and the terminal take (a round drafts at
# least one token whatever it is; the library takes any below 1)
TREE_DRAFTERS = (MODEL, EAGLE, MEDUSA)  # the named drafters that draft trees (they give distributions)
NO_TREES = "no distributions to rank children by"  # why the other named drafters cannot, unless `WHY_NO_TREES` says
WHY_NO_TREES = {  # drafter -> why it drafts no trees, where that is not `NO_TREES`
    MODEL_LOOKUP: "its copied rounds give no distributions to rank children by; the draft model alone, 'model', does",
    EARLY_EXIT: "its drafts run in the target's own cache of its first layers, which holds one path, not a tree",
    EARLY_EXIT_LOOKUP: "its drafts run in the target's own cache of its first layers, which holds one path, not a tree",
}
TREE_METHODS = ("propose_tree", "observe_tree")  # what a drafter object needs for trees (`specui.drafters.tree`)


def why_no_trees(drafter: str) -> str:
    """Why the drafter (its name, or the label a drafter object carries: "early exit") cannot draft token trees, in
    words that end a sentence's clause."""
    return WHY_NO_TREES.get(name_of(drafter), NO_TREES)


class SettingsError(ValueError):
    """A setting is out of range; the message says which and why."""


def reworded(message: str, words: dict[str, str]) -> str:
    """A SettingsError's message with its fields named as a caller's user knows them (`words`: field -> its name
    there, e.g. the page's control or the command line's flag): `tree_nodes=64 needs a tree: set tree_width to 2`
    -> `Tree nodes 64 needs a tree: set Tree width to 2`."""
    for name, said in words.items():
        message = re.sub(rf"(?<![\w-]){re.escape(name)}(=|\b)", lambda m, said=said: said + (" " if m.group(1) else ""),
                         message)
    return message


def _as_int(x):
    """x as a Python int when it is an integer (numpy's included) and not a bool; else None."""
    if isinstance(x, bool) or type(x).__name__ == "bool_":
        return None
    try:
        return operator.index(x)
    except TypeError:
        return None


def _as_float(x):
    """x as a Python float when it is a real number (numpy's included) and not a bool; else None."""
    if isinstance(x, bool) or type(x).__name__ == "bool_" or not isinstance(x, numbers.Real):
        return None
    return float(x)


def context_overflow(prompt_len: int, max_new_tokens: int, limit: int | None, role: str = "target",
                     shorten: str = "shorten the prompt") -> str | None:
    """Why a prompt of `prompt_len` tokens and `max_new_tokens` overflow a model's context of `limit` tokens, in one
    line (None where they fit, or the limit is unknown): the engine's words (`specui.engine_checks.check_context`),
    and the benchmark's before torch loads (`specui.bench.preflight`, whose built-in prompts a user makes shorter
    with a flag: `shorten`), from here alone."""
    if limit is None or prompt_len + max_new_tokens <= limit:
        return None
    return (f"the prompt ({prompt_len} tokens) plus max_new_tokens ({max_new_tokens}) is {prompt_len + max_new_tokens}"
            f" tokens, more than the {role} model's context of {limit}; {shorten} or lower max_new_tokens")


def static_size(*, width: int, depth: int) -> int:
    """Nodes of a full static token tree: width + width^2 + ... + width^depth."""
    return sum(width ** d for d in range(1, depth + 1))


@dataclass(frozen=True)
class DecodeSettings:
    """How to decode: K, the sampling transform, the budget, the seed and the drafter. Frozen: `but(**changes)` gives a
    copy with some changed, checked again; a value out of range raises SettingsError, naming the field.

    num_draft_tokens    K, the tokens a round drafts (1..64)
    temperature         0: greedy (`greedy` is True: the target's own output, token for token); else sampling, at
                        least 1e-5
    top_k, top_p        0 and 1 keep every token
    repetition_penalty  1 leaves the target's logits alone; above 1 discourages repeats (`specui.sampling.penalize`)
    max_new_tokens      the most new tokens the run writes
    seed                None draws a fresh one (the result's `seed` says which)
    drafter             a name of `specui.drafters.DRAFTER_NAMES` or the label the app shows for it (`LABELS`: "prompt
                        lookup", in any case; kept as the name), None (the engine's default: the preset's drafter for
                        an engine from `load_engine`, else the draft model when there is one, else prompt lookup) or
                        any object with the `Drafter` methods
    adaptive            K moves between 1 and max(2K, 8) with the observed acceptance
    ignore_eos          write max_new_tokens whatever the model says (as the benchmark does)
    speculative         False: plain decoding by the target alone
    tree_width          children per expanded tree node; 1: one chain of K drafts (no tree)
    tree_nodes          trees: 0 the static shape (every node to depth K), N >= 1 the dynamic one keeping N
    draft_confidence    a chain stops drafting once the draft's confidence falls below this (0: K always;
                        `specui.drafters.base.Confidence`); a dynamic tree keeps no node whose path is less likely (a
                        static one its shape)
    """

    num_draft_tokens: int = 4
    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    repetition_penalty: float = 1.0
    max_new_tokens: int = 64
    seed: int | None = None
    drafter: object = None
    adaptive: bool = False
    ignore_eos: bool = False
    speculative: bool = True
    tree_width: int = 1
    tree_nodes: int = 0
    draft_confidence: float = 0.0

    def __new__(cls, *args, **keywords):
        if cls is DecodeSettings:  # a subclass (the app's request.Settings: preset, compare...) has fields of its own
            refuse_unknown(keywords)  # a misspelt name in one line naming the one meant, not Python's TypeError
        return super().__new__(cls)

    def __post_init__(self):
        # numbers are normalised to Python ints and floats (numpy's are accepted), bools refused
        def put(name, value):
            object.__setattr__(self, name, value)

        n = _as_int(self.max_new_tokens)
        if n is None or n < 1:
            raise SettingsError(f"max_new_tokens must be an integer >= 1, got {self.max_new_tokens!r}")
        put("max_new_tokens", n)
        k = _as_int(self.num_draft_tokens)
        if k is None or not 1 <= k <= MAX_DRAFT_TOKENS:
            raise SettingsError(f"num_draft_tokens (K) must be an integer from 1 to {MAX_DRAFT_TOKENS}, "
                                f"got {self.num_draft_tokens!r}")
        put("num_draft_tokens", k)
        t = _as_float(self.temperature)
        if t is None or not math.isfinite(t) or t < 0:
            raise SettingsError(f"temperature must be a finite number >= 0 (0 means greedy), got {self.temperature!r}")
        if 0 < t < MIN_TEMPERATURE:
            raise SettingsError(f"temperature must be 0 (greedy) or at least {MIN_TEMPERATURE:g}, got {t!r}: "
                                "below that, logits divided by it overflow float32")
        put("temperature", t)
        top_k = _as_int(self.top_k)
        if top_k is None or top_k < 0:
            raise SettingsError(f"top_k must be an integer >= 0 (0 disables it), got {self.top_k!r}")
        put("top_k", top_k)
        top_p = _as_float(self.top_p)
        if top_p is None or not 0.0 < top_p <= 1.0:
            raise SettingsError(f"top_p must be in (0, 1] (1 disables it), got {self.top_p!r}")
        put("top_p", top_p)
        penalty = _as_float(self.repetition_penalty)
        if penalty is None or not 0.0 < penalty <= MAX_REPETITION_PENALTY:
            raise SettingsError(f"repetition_penalty must be a number in (0, {MAX_REPETITION_PENALTY:g}] (1 disables "
                                f"it, above 1 discourages repeats), got {self.repetition_penalty!r}")
        put("repetition_penalty", penalty)
        if self.seed is not None:
            seed = _as_int(self.seed)
            if seed is None or not 0 <= seed < SEED_LIMIT:
                raise SettingsError(f"seed must be None or an integer from 0 to 2**64 - 1, got {self.seed!r}")
            put("seed", seed)
        confidence = _as_float(self.draft_confidence)
        if confidence is None or not 0.0 <= confidence < 1.0:
            raise SettingsError(f"draft_confidence must be a number from 0 (always K drafts) up to 1 (not included), "
                                f"got {self.draft_confidence!r}")
        put("draft_confidence", confidence)
        for name in ("adaptive", "ignore_eos", "speculative"):
            if not isinstance(getattr(self, name), bool):
                raise SettingsError(f"{name} must be True or False, got {getattr(self, name)!r}")
        d = self.drafter
        if isinstance(d, str):  # a name, or the label the app and its API show ("prompt lookup")
            if name_of(d) not in DRAFTER_NAMES:
                raise SettingsError(f"unknown drafter {d!r}; choose one of {', '.join(DRAFTER_NAMES)}")
            put("drafter", name_of(d))
        self._check_tree(put)
        d = self.drafter
        if isinstance(d, type):
            raise SettingsError(f"drafter is the class {d.__name__}; give an instance of it, e.g. drafter={d.__name__}("
                                "...)")
        if d is not None and not isinstance(d, str):
            missing = [m for m in DRAFTER_METHODS if not callable(getattr(d, m, None))]
            if missing:
                raise SettingsError(f"drafter must be None, one of {', '.join(DRAFTER_NAMES)}, or an object with the "
                                    f"Drafter methods {', '.join(DRAFTER_METHODS)}; {d!r} lacks {', '.join(missing)}")
            _check_calls(d)

    def _check_tree(self, put) -> None:
        width, nodes = _as_int(self.tree_width), _as_int(self.tree_nodes)
        if width is None or not 1 <= width <= MAX_TREE_WIDTH:
            raise SettingsError(f"tree_width must be an integer from 1 (no tree) to {MAX_TREE_WIDTH}, "
                                f"got {self.tree_width!r}")
        if nodes is None or not 0 <= nodes <= MAX_TREE_NODES:
            raise SettingsError(f"tree_nodes must be an integer from 0 (the static tree) to {MAX_TREE_NODES}, "
                                f"got {self.tree_nodes!r}")
        put("tree_width", width)
        put("tree_nodes", nodes)
        if width == 1:
            if nodes:
                raise SettingsError(f"tree_nodes={nodes} needs a tree: set tree_width to 2 or more")
            return
        if self.adaptive:
            raise SettingsError("adaptive K and token trees do not go together: turn one off")
        if not nodes and static_size(width=width, depth=self.num_draft_tokens) > MAX_TREE_NODES:
            size = static_size(width=width, depth=self.num_draft_tokens)
            said = f"{size:,}" if size < 10**9 else f"about {width}^{self.num_draft_tokens}"
            raise SettingsError(f"a static tree of width {width} and depth K={self.num_draft_tokens} has {said} "
                                f"nodes, more than {MAX_TREE_NODES}; lower them or set tree_nodes (the dynamic tree "
                                "keeps the best N)")
        d = self.drafter
        if isinstance(d, str) and d not in TREE_DRAFTERS:
            raise SettingsError(f"drafter {d!r} cannot draft trees ({why_no_trees(d)}); trees need one of "
                                f"{', '.join(TREE_DRAFTERS)}, or tree_width=1")
        if d is not None and not isinstance(d, str) and not all(callable(getattr(d, m, None)) for m in TREE_METHODS):
            named = getattr(d, "name", None) or type(d).__name__  # as the engine names a drafter, not its repr
            raise SettingsError(f"tree_width={width} needs a drafter with the tree methods {', '.join(TREE_METHODS)}; "
                                f"drafter {named!r} lacks them (use tree_width=1)")

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


# transformers' generate keywords a user brings, and the setting (or argument) that does what they did there
FOREIGN_NAMES = {"max_length": "max_new_tokens (the new tokens alone, the prompt not counted)",
                 "do_sample": "temperature (0: greedy; above 0: sampled)", "num_assistant_tokens": "num_draft_tokens",
                 "stop_strings": "eos_token_id= (token ids that end the run: the engine takes ids, not text)"}


def refuse_unknown(keywords: dict) -> None:
    """Names that are no setting refused in one line: the settings, and the one meant (a typo's closest name, or
    transformers' word for it)."""
    import difflib

    names = [f.name for f in fields(DecodeSettings)]
    unknown = [k for k in keywords if k not in names]
    if unknown:
        close = {k: difflib.get_close_matches(k, names, n=1) for k in unknown if k not in FOREIGN_NAMES}
        meant = "".join(f"; for {k!r} use {FOREIGN_NAMES[k]}" for k in unknown if k in FOREIGN_NAMES)
        meant += "".join(f"; did you mean {close[k][0]}?" for k in close if close[k])
        raise SettingsError(f"no setting named {', '.join(map(repr, unknown))}; the settings are {', '.join(names)}"
                            + meant)


def settings_from(settings, keywords: dict) -> DecodeSettings:
    """A run's settings: `settings` (a DecodeSettings, or None for the defaults) with `keywords` changed. A name that
    is no setting, or settings of another type, is refused in one line that says what is meant."""
    refuse_unknown(keywords)
    if settings is None:
        return DecodeSettings(**keywords)
    if not isinstance(settings, DecodeSettings):
        raise SettingsError(f"settings (the argument after the prompt) must be a DecodeSettings, got "
                            f"{reprlib.repr(settings)} ({type(settings).__name__}); give them as keywords, e.g. "
                            "engine.generate(ids, max_new_tokens=64)")
    return settings.but(**keywords)


DRAFTER_CALLS = {"start": "start(prompt, *, sampling, seed)", "propose": "propose(context, k)",
                 "observe": "observe(num_accepted)"}  # how the engine calls a drafter's methods
ENGINE_EXTRAS = {"features": "target_features", "target": "shares_target"}  # keywords the engine adds for a drafter
# that has the attribute (the target's states, the target itself); resume comes on a conversation's later turns alone


def _check_calls(drafter) -> None:
    """A drafter object's methods take the arguments the engine calls them with (`DRAFTER_CALLS`), said before the
    run, where a mismatch raised a TypeError from inside the engine's round. Methods whose signature Python cannot
    read (builtins, C extensions) are taken on trust."""
    import inspect

    calls = {"start": (([],), {"sampling": None, "seed": 0}), "propose": (([], 1), {}), "observe": ((0,), {})}
    for method, (args, keywords) in calls.items():
        try:
            signature = inspect.signature(getattr(drafter, method))
        except (TypeError, ValueError):
            continue
        extras = {k: None for k, attribute in ENGINE_EXTRAS.items()  # given by the engine where the drafter asks
                  if getattr(drafter, attribute, None) and k in signature.parameters}
        try:
            signature.bind(*args, **keywords, **extras)
        except TypeError:
            named = getattr(drafter, "name", None) or type(drafter).__name__
            raise SettingsError(f"drafter {named!r}'s {method}{signature} cannot be called as "
                                f"{DRAFTER_CALLS[method]}; a drafter's methods are "
                                f"{', '.join(DRAFTER_CALLS.values())} (help(specui.Drafter))") from None
