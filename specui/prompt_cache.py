"""A conversation's target KV cache, kept between generations: a chat's next turn reads only its new tokens.

A chat's next prompt is the last prompt, its answer and a new message, so every token before the new message
already went through the target. Give the same `PromptCache` to each generation of a conversation
(`engine.stream(ids, cache=...)`): the engine trims the kept cache to the longest common prefix of the
tokens it holds and the new prompt, and reads only the rest (as a prompt block). For a drafter that reads
the target's states (EAGLE, Medusa) the cache also keeps those states at every position
(`specui.feature_log`), and a drafter's own cache (an EAGLE head's, a draft model's: `keep()`) is kept too.

Exactness: a reused position holds the keys and values the target computed for it before: in a decode or
verify row (the same bits either way, `specui.lean`) or in a prompt block. A fresh run of the whole
conversation would compute the same tokens in one prompt block, whose products may round differently, so
its logits agree with the reused run's to float rounding, not bit for bit. Plain and speculative decoding
given the same cache read the same bits, so greedy speculative output still equals plain greedy output
token for token; a race sets `limit` so that both runs read the new turn alike (and pay for it alike).

An app serving several chats keeps many conversations' caches in a pool (`specui.cache_pool.PromptCaches`).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Sequence

import torch

from specui.feature_log import FeatureLog
from specui.graphs import GraphKV
from specui.kv import CachedLM, StaticKV

LOCK = type(threading.Lock())


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """The number of leading tokens `a` and `b` share."""
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


class PromptCache:
    """The target's cache of one conversation (its keys and values, and states for heads), between generations.

    limit: reuse at most this many tokens (None: as many as match). One generation holds the cache at a
    time; another given it meanwhile runs without it.
    """

    def __init__(self):
        self.lm: CachedLM | None = None
        self.tokens: list[int] = []  # the last generation's context: its first lm.length tokens are cached
        self.limit: int | None = None
        # (drafter_state, lent), set together in one store: a reader of `nbytes` on another thread (a pool making
        # room) finds a state's bytes counted once as `resume` hands it over and `close` takes one back
        self._kept: tuple[tuple[dict, list[int]] | None, int] = (None, 0)
        self._busy = False
        self._holder: object = None  # the run holding it (`open`'s holder)
        # re-entrant: a run's stream dropped unfinished is closed when the collector finds it, which may be while its
        # own thread holds this lock (the collector runs at any allocation) and its close then takes it again
        self._guard = threading.RLock()
        self.pool: weakref.ref | None = None  # the `PromptCaches` it belongs to, told when a run closes it
        self.owner: str | None = None  # whose conversation it holds (`PromptCaches.pick`)

    @property
    def drafter_state(self) -> tuple[dict, list[int]] | None:
        """A drafter's `keep()` and its run's context, kept for the next turn (None: none)."""
        return self._kept[0]

    @property
    def lent(self) -> int:
        """The bytes of a drafter state handed to the run that holds the cache (`resume`), until it closes."""
        return self._kept[1]

    @property
    def nbytes(self) -> int:
        """The memory the cache holds: the target's keys and values (whole buffers), states for heads and a
        drafter's kept cache, also while a run that holds the cache has it (`resume`: as it was handed over)."""
        state, lent = self._kept
        return held_bytes(self.lm, state) + lent

    @property
    def length(self) -> int:
        """How many tokens' keys and values the cache holds."""
        return 0 if self.lm is None else self.lm.length

    @property
    def busy(self) -> bool:
        """Whether a generation holds the cache."""
        self._settle()
        return self._busy

    def _settle(self) -> None:
        """A hold whose run ended without giving the cache back ends now, the conversation forgotten: its holder a
        lock that the run held in a `with` (the engine's), released in C however the run ended, where two Ctrl-Cs in
        a row can cut short both `close` and the `_drop` after it (a Python function's own start is a signal point).
        The lock is taken only for such a hold: a pool's `pick` asks every cache's `busy` inside the pool's lock, and a
        thread holding a cache's lock may be running the collector, whose closing of another run's stream comes to the
        pool (`used`): a pick that waited there for the cache's lock would deadlock the two threads."""
        if self._ended():
            with self._guard:
                if self._ended():
                    self._drop()

    def _ended(self) -> bool:
        """Whether a run holds the cache with a lock it no longer holds (`_settle`)."""
        return self._busy and isinstance(holder := self._holder, LOCK) and not holder.locked()

    def reusable(self, ids: Sequence[int], model: torch.nn.Module | None = None) -> int:
        """How many leading tokens of the prompt `ids` a generation would not read again (never its last token,
        which opens round 1); 0 while another generation holds the cache, or for another `model`."""
        return 0 if self.busy else self._shared(ids, model)

    def _shared(self, ids: Sequence[int], model: torch.nn.Module | None) -> int:
        """`reusable`, whether or not a generation holds the cache (`open`'s, which holds it already)."""
        if self.lm is None or (model is not None and self.lm.model is not model):
            return 0
        n = common_prefix(self.tokens[: self.lm.length], list(ids)[:-1])
        return n if self.limit is None else min(n, self.limit)

    def clear(self) -> None:
        """Forget the conversation (the memory goes with it)."""
        with self._guard:
            if not self.busy:
                self.lm, self.tokens, self._kept = None, [], (None, 0)

    # -- for the engine ----------------------------------------------------------------------------------

    def open(self, model: torch.nn.Module, prompt: list[int], features: tuple[int, ...], *, log: tuple[int, ...] = (),
             holder: object = None):
        """The target's cache trimmed to the reusable prefix of `prompt`, that prefix's length and its states
        of layers `features` (None without them): (CachedLM, reused, states); None while another generation
        holds the cache. The caller gives it back with `close`. log: the layers to keep states of besides
        `features` (those of the engine's heads: a later turn may draft with another). holder: the run's own
        object: `holds(holder)` says whether that run holds the cache, also when a Ctrl-C cut it off before this
        method's value reached it; a `threading.Lock` that the run holds in a `with` (the engine's) ends the hold as
        it is released, if the run could not give the cache back (`_settle`); without one, a holder of its own (two
        runs that name none are still told apart: a Ctrl-C in one that finds the cache held does not give back the
        other's)."""
        holder = object() if holder is None else holder
        try:  # from the moment the cache is marked held, a Ctrl-C or an error gives it back (`_drop`)
            with self._guard:  # no call between the check and the mark: no collection or interrupt splits them
                self._settle()
                if self._busy:
                    return None
                self._holder, self._busy = holder, True
            return self._open(model, prompt, features, log, self._shared(prompt, model))
        except BaseException:  # Ctrl-C or an error (out of memory) while opening: the conversation is forgotten
            if self.holds(holder):
                self._drop()
            raise

    def holds(self, holder: object) -> bool:
        """Whether the run that opened the cache with `holder` holds it still."""
        return self._busy and self._holder is holder

    def _open(self, model, prompt, features, log, reused):
        lm = self.lm if self.lm is not None and self.lm.model is model else None
        key = tuple(sorted({*features, *log}))
        if lm is None:
            lm = CachedLM(model)
            lm.log = FeatureLog(key)
            reused = 0
        elif features and not lm.log.holds(features):  # a head that reads other layers: read it all again
            lm.log, reused = FeatureLog(key), 0
        elif features:
            reused = min(reused, lm.log.valid)
        lm.trim(reused)
        self.lm, self.tokens = lm, list(prompt)
        return lm, reused, (lm.log.states(reused, features) if features and reused else None)

    def _drop(self) -> None:
        """Forget the conversation and give the cache back: for an opening or closing that failed part way, which
        leaves what the cache holds unknown (the next generation reads its prompt whole: exact)."""
        self.lm, self.tokens, self._kept = None, [], (None, 0)
        with self._guard:
            self._busy, self._holder = False, None

    def resume(self, prompt: list[int], reused: int) -> dict | None:
        """For the engine: the kept drafter state (an EAGLE head's cache or a draft model's), with "pairs": how
        many of its leading positions (a token, or a target state and the token after it) stand for the new
        prompt's, at most the `reused` positions of the target's cache. A state handed over is no longer kept: the
        drafter's start trims and extends its cache in place, and its run's `close` keeps its state again (`keep()`);
        a start cut short (Ctrl-C, an error) leaves none, and the next turn's drafter reads the conversation whole.
        Until the run closes, the cache's `nbytes` counts the state as it was handed over (`lent`): a pool of caches
        (`specui.cache_pool`) making room meanwhile counted the conversation without it, and kept more than
        its budget."""
        if self.drafter_state is None:
            return None
        state, tokens = self.drafter_state
        pairs = min(reused, common_prefix(tokens, prompt) - 1)
        if pairs <= 0:
            return None
        self._kept = (None, held_bytes(state))  # one store: the bytes move from the state kept to those lent
        return {**state, "pairs": pairs}

    def close(self, context: list[int], drafter=None) -> None:
        """The generation that opened the cache ended (or stopped) with `context` (prompt and tokens so far).
        The cache may hold more: tokens accepted after an EOS inside a block, which the run dropped, or a
        forward's rows when a run failed inside a round; positions before len(context) hold context tokens.
        A drafter's state is kept for the next turn when it has one to keep (`keep()`); a plain run leaves
        the last one. Its pool (`specui.cache_pool`) hears before the cache is marked free: a Ctrl-C that cuts the
        telling short, or comes after it and before the mark, forgets the conversation and gives the cache back empty
        (the `except` here; one as this begins: `_settle`, as the run's `with` ends), so a free cache never holds more
        than its pool was told (told after the mark, a pool cut short kept more than its budget until the next pick)."""
        try:  # the cache holds `tokens` (the prompt `open` took it to), then the run's; an `open` cut short by a Ctrl-C
            # and a second as its `except` began left the last turn's tokens: only their prefix shared with `context`
            held = len(context) if context[:len(self.tokens)] == self.tokens else common_prefix(self.tokens, context)
            if self.lm is not None and self.lm.length > held:
                self.lm.trim(held)
            if drafter is not None:
                keep = getattr(drafter, "keep", None)
                state = keep() if callable(keep) else None
                kept = None if state is None else (state, list(context))
            else:
                kept = self.drafter_state
            self.tokens, self._kept = context, (kept, 0)  # what a run was lent is kept again, or gone: one store
            pool = self.pool() if self.pool is not None else None
            if pool is not None:  # it may have grown: the pool makes room, older caches first
                pool.used(self)
        except BaseException:  # a drafter's keep() that raised, Ctrl-C: the cache is given back empty
            self._drop()
            raise
        with self._guard:
            self._busy, self._holder = False, None


def open_target(cache: PromptCache | None, model: torch.nn.Module, prompt: list[int], features: tuple[int, ...],
                log: tuple[int, ...] = (), *, holder: object = None):
    """(CachedLM, reused tokens, their states or None, the cache to close or None): a fresh cache without
    a PromptCache or when it is held. holder: as `PromptCache.open`'s (the caller closes the cache if
    `cache.holds(holder)`, whether or not this returned)."""
    opened = cache.open(model, prompt, features, log=log, holder=holder) if cache is not None else None
    if opened is None:
        return CachedLM(model), 0, None, None
    return (*opened, cache)


def answer_ids(result) -> list[int]:
    """A run's tokens as an assistant message's "token_ids" (`chat_ids`): without a closing EOS, which the chat
    template writes itself."""
    return list(result.token_ids[:-1] if result.stop_reason == "eos" else result.token_ids)


def chat_ids(tokenizer, messages: Sequence[dict], *, ids_of: str | None = None) -> list[int]:
    """The chat template's token ids of `messages` (with the assistant's turn opened), where an assistant
    message whose "ids_of" equals `ids_of` (a preset's name: ids of that tokenizer) and that carries
    "token_ids", the tokens the model wrote (no EOS), holds those ids rather than its text tokenized again.

    Tokenizing an answer's text again need not give the tokens the model wrote (SmolLM2 wrote "\n\n" as one
    token that its tokenizer splits in two): a conversation's cache matches only up to the first difference.
    The ids go in where the template puts the message's text; a template that changes the text falls back
    to tokenizing everything."""
    marks, rendered = [], []
    for i, message in enumerate(messages):
        tokens = message.get("token_ids")
        if message.get("role") == "assistant" and tokens is not None and ids_of is not None \
                and message.get("ids_of") == ids_of:
            mark = f"\x00specui-answer-{i}\x00"
            marks.append((mark, [int(t) for t in tokens]))
            rendered.append({"role": "assistant", "content": mark})
        else:
            rendered.append({"role": message["role"], "content": message["content"]})
    text = tokenizer.apply_chat_template(rendered, tokenize=False, add_generation_prompt=True)

    def encode(piece: str) -> list[int]:
        return list(tokenizer(piece, add_special_tokens=False)["input_ids"]) if piece else []

    ids = []
    for mark, tokens in marks:
        before, found, text = text.partition(mark)
        if not found or text.count(mark):
            plain = [{"role": m["role"], "content": m["content"]} for m in messages]
            return encode(tokenizer.apply_chat_template(plain, tokenize=False, add_generation_prompt=True))
        ids += encode(before) + tokens
    return ids + encode(text)


def turn_ids(tokenizer, preset, messages: Sequence[dict], *, system: str = "") -> list[int]:
    """A turn's prompt ids, `messages` being the conversation so far and the new user message last: a chat preset
    (`preset.chat_template`) reads them in its chat template after the system message (if any), the answers as the
    tokens the model wrote (`chat_ids`); a base model continues the new message's text alone and reads no
    conversation (the app's chat and `python -m specui --chat` alike)."""
    if preset.chat_template:
        first = [{"role": "system", "content": system}] if system else []
        return chat_ids(tokenizer, [*first, *messages], ids_of=preset.name)
    return list(tokenizer(messages[-1]["content"])["input_ids"])


def chat_history(history: Sequence[dict], continued: Callable[[str | None], bool]) -> list[dict]:
    """The conversation a chat preset reads: `history` without the exchanges a base model wrote (`continued(ids_of)`
    of an answer's preset: it continued the user's text rather than answering it, and read no conversation), each
    taken out with the user message before it; the rest in order."""
    kept: list[dict] = []
    for message in history:
        if message.get("role") == "assistant" and continued(message.get("ids_of")):
            if kept and kept[-1].get("role") == "user":
                kept.pop()
            continue
        kept.append(message)
    return kept


def leave_out_oldest(history: Sequence[dict], ids_of: Callable[[Sequence[dict]], list[int]], *, limit: int,
                     new_tokens: int) -> tuple[list[int], int]:
    """A chat turn's prompt ids when the whole conversation does not fit the model's context of `limit` tokens:
    `ids_of(history[n:])` (the template's ids of the kept history and the new message) with its oldest
    exchanges (a user message and the answers after it) left out, as many as leave a quarter of the context
    free besides `new_tokens`, so the next turns read the kept part from the conversation's cache instead of
    each leaving out one more exchange and reading everything again; a budget too large to leave a quarter free
    keeps the newest exchanges that fit at all, not none. Returns (ids, n: the history's messages left out); every
    message when even the newest alone does not fit (the engine then says so)."""
    room = limit - max(1, limit // 4) - new_tokens
    starts = [0, *(i for i, message in enumerate(history) if message.get("role") == "user" and i > 0), len(history)]
    tried = []
    for n in starts:
        ids = ids_of(history[n:])
        if len(ids) <= room:
            return ids, n
        tried.append((ids, n))
    return next(((ids, n) for ids, n in tried if len(ids) + new_tokens <= limit), tried[-1])


def held_bytes(*things) -> int:
    """The bytes of the tensors that `things` hold (CachedLMs, KV caches, a drafter's `keep()`, tuples and dicts of
    them), each storage once; a model's weights are not counted."""
    seen, total, todo = set(), 0, list(things)
    while todo:
        thing = todo.pop()
        if isinstance(thing, torch.Tensor):
            storage = thing.untyped_storage()
            if storage.data_ptr() not in seen:
                seen.add(storage.data_ptr())
                total += storage.nbytes()
        elif isinstance(thing, (list, tuple)):
            todo.extend(thing)
        elif isinstance(thing, dict):
            todo.extend(thing.values())
        elif isinstance(thing, CachedLM):
            todo += [thing.cache, thing.early, thing.log.rows if thing.log is not None else None]
        elif isinstance(thing, (StaticKV, GraphKV)):
            todo.extend(vars(thing).values())
        elif isinstance(getattr(thing, "layers", None), list):  # a transformers DynamicCache
            todo += [(getattr(layer, "keys", None), getattr(layer, "values", None)) for layer in thing.layers]
    return total
