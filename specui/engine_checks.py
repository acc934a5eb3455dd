"""The engine's checks of what it is given: a prompt's token ids and whether it fits the models' context
(`ContextLengthError`), its `eos_token_id`, a run's `into`/`draws`/`cache`, a drafter's proposal, a draft's q.

Each raises ValueError with a message that says what was wrong and what is expected, before the engine
computes anything with it.
"""

from __future__ import annotations

import logging
import operator
import reprlib

import torch

from specui import settings  # the overflow's words: settings.context_overflow
from specui.drafters import Draft
from specui.events import GenerationResult
from specui.kv import context_limit
from specui.prompt_cache import PromptCache
from specui.sampling import Generators

log = logging.getLogger(__name__)


class ContextLengthError(ValueError):
    """The prompt plus the tokens asked for do not fit in a model's context (`limit` tokens, 0 when unknown)."""

    def __init__(self, message: str, limit: int = 0):
        super().__init__(message)
        self.limit = limit


def check_context(prompt_len: int, max_new_tokens: int, *, target, draft=None) -> None:
    """ContextLengthError where the prompt and the tokens asked for overflow the target's or the draft's context."""
    for role, model in (("target", target), ("draft", draft)):
        limit = None if model is None else context_limit(model)
        if message := settings.context_overflow(prompt_len, max_new_tokens, limit, role):
            raise ContextLengthError(message, limit)


def check_prompt(input_ids, vocab_size: int, *, tokenizer: tuple[str, str] = ("tokenizer", "")) -> list[int]:
    """One prompt as a list of ints: a sequence of ints (numpy's too), a 1-D tensor or array, or [1, n]; or what
    a tokenizer returns (a mapping with "input_ids": its ids are taken). Text is refused with what to do.
    tokenizer: how the user reaches the target's tokenizer, and where it comes from (`tokenizer_hint`)."""
    tokenizer, where = tokenizer
    if isinstance(input_ids, (str, bytes)):
        raise ValueError(f"the prompt is text, and the engine takes token ids: tokenize it first, e.g. "
                         f"{tokenizer}(text)['input_ids'], or {tokenizer}.apply_chat_template(messages, "
                         f"add_generation_prompt=True) for a chat model{where}")
    mask = None
    if hasattr(input_ids, "keys") and "input_ids" in input_ids:  # a tokenizer's BatchEncoding, or a dict
        mask = input_ids["attention_mask"] if "attention_mask" in input_ids else None
        input_ids = input_ids["input_ids"]
    _refuse_messages(input_ids, tokenizer, where)
    shape = getattr(input_ids, "shape", None)  # a torch tensor or a numpy array
    if shape is not None:
        if len(shape) == 0 and not isinstance(input_ids.tolist(), (str, bytes)):  # one number, as the int 5 is refused
            raise ValueError(f"input_ids is a single number ({type(input_ids).__name__} of shape ()): give the "
                             "prompt's token ids as a 1-D sequence, e.g. [id] for one token")
        if len(shape) > 2 or (len(shape) == 2 and shape[0] != 1):
            raise ValueError(f"input_ids has shape {tuple(shape)}: the engine decodes one prompt at a time; "
                             "give a 1-D sequence of token ids or a [1, n] tensor")
        input_ids = input_ids.reshape(-1).tolist()
    try:
        prompt = list(input_ids)
    except TypeError:
        raise ValueError(f"input_ids is {reprlib.repr(input_ids)} ({type(input_ids).__name__}): give the prompt's "
                         "token ids (a list of ints, a 1-D tensor, or what the tokenizer returns)") from None
    text = next((t for t in prompt if isinstance(t, (str, bytes))), None)
    if text is not None:  # a list of texts: prompts, or words
        raise ValueError(f"input_ids holds text ({reprlib.repr(text)}), and the engine takes token ids of one prompt: "
                         f"tokenize it first, e.g. {tokenizer}(text)['input_ids']{where}, and give the prompts one at "
                         "a time")
    if len(prompt) == 1 and isinstance(prompt[0], (list, tuple)):  # [[ids]], as a batch of one
        prompt = list(prompt[0])
        _refuse_messages(prompt, tokenizer, where)  # [messages], a batch of one chat
    elif prompt and all(isinstance(t, (list, tuple)) for t in prompt):
        raise ValueError(f"input_ids holds {len(prompt)} prompts: the engine decodes one prompt at a time; give a "
                         "1-D sequence of token ids")
    if not prompt:
        raise ValueError("the prompt is empty: give at least one token id")
    ids = []
    for t in prompt:
        i = None if isinstance(t, bool) or type(t).__name__ == "bool_" else _index(t)
        if i is None or not 0 <= i < vocab_size:
            raise ValueError(f"token id {t!r} is not an integer in [0, {vocab_size}) (the target's vocabulary)")
        ids.append(i)
    _check_unpadded(mask)
    return ids


def _check_unpadded(mask) -> None:
    """The tokenizer's attention_mask given with the ids: all ones, as one prompt's is; one with zeros (padding) is
    refused, where its padding would have been read as the prompt's tokens."""
    try:
        ones = mask is None or bool((torch.as_tensor(mask) == 1).all())
    except (TypeError, ValueError, RuntimeError):
        ones = False
    if not ones:
        raise ValueError(f"attention_mask is {reprlib.repr(mask)}, not all ones: it pads the prompt, and the engine "
                         "would read the padding as prompt tokens; tokenize the one prompt without padding")


def _refuse_messages(input_ids, tokenizer: str, where: str) -> None:
    """A chat message (a mapping: its role and content), or a list that holds one, refused with the chat template's
    call; another mapping with what it lacks. They read as "token id {'role': ...} is not an integer" or as text."""
    found = input_ids if hasattr(input_ids, "keys") else None
    if isinstance(input_ids, (list, tuple)):
        found = next((m for m in input_ids if hasattr(m, "keys")), None)
    if found is None:
        return
    if "role" in found or "content" in found:
        raise ValueError(f"the prompt is chat messages ({reprlib.repr(found)}), and the engine takes token ids: put "
                         f"them through the chat template first, e.g. {tokenizer}.apply_chat_template(messages, "
                         f"add_generation_prompt=True){where}")
    if found is not input_ids:  # [tokenizer(text)]: what it returns, in a list
        raise ValueError(f"input_ids holds a {type(found).__name__} among its token ids ({reprlib.repr(found)}): "
                         "give the prompt's token ids (a list of ints, a 1-D tensor), or what the tokenizer returns as "
                         "it is")
    raise ValueError(f"input_ids is a {type(found).__name__} with no 'input_ids' ({reprlib.repr(found)}): give the "
                     "prompt's token ids (a list of ints, a 1-D tensor, or what the tokenizer returns)")


def tokenizer_hint(engine) -> tuple[str, str]:
    """How a message names the target's tokenizer for this engine, and where it comes from: `engine.tokenizer` where
    it has one (`specui.load_engine`'s), else `tokenizer` and the transformers call that loads it."""
    if getattr(engine, "tokenizer", None) is not None:
        return "engine.tokenizer", ""
    where = getattr(engine.target_model, "name_or_path", "")
    where = repr(where) if where else "the target's folder or Hub id"
    return "tokenizer", f" (tokenizer = transformers.AutoTokenizer.from_pretrained({where}), the target's)"


def eos_ids(given, target, *, vocab_size: int, none_means: str = "the target's generation config's") -> frozenset[int]:
    """The token ids that end a run: `given` (an id or a list of them; None: the target's generation config's, else
    its config's). Given as no token id (the token's text, "</s>"; a float) it is refused by name, where its
    characters read as ids failed with "invalid literal for int()". A given id outside the target's vocabulary
    [0, vocab_size), which no run could ever stop at, is refused by name; one the target's own config says (real
    checkpoints have such quirks) is dropped with a warning, exactly: the target can never emit it. none_means: what
    None would have meant, said in the refusal of a given value (a run's: the engine's)."""
    found, source = given, None
    for where in ("generation_config", "config"):
        if found is None:
            found, source = getattr(getattr(target, where), "eos_token_id", None), where
    ids = [] if found is None else [found] if _index(found) is not None or isinstance(found, (str, bytes)) else found
    try:
        listed = [_index(i) if not isinstance(i, bool) else None for i in ids]
    except TypeError:
        listed = [None]
    if None in listed and given is None:  # the target's own: say where it is, not "not None"
        raise ValueError(f"the target's {source}.eos_token_id is {reprlib.repr(found)}, which is no token id: give the "
                         "engine eos_token_id= (an int or a list of them, e.g. tokenizer.eos_token_id)")
    if None in listed:
        raise ValueError(f"eos_token_id takes a token id or a list of them (ints, e.g. tokenizer.eos_token_id) or None "
                         f"({none_means}), not {reprlib.repr(given)}")
    outside = [i for i in listed if not 0 <= i < vocab_size]
    if outside and given is None:
        return _drop_outside(found, listed, outside, f"{source}.eos_token_id", vocab_size)
    if outside:
        bad, ids = outside[0], listed[0] if _index(found) is not None else listed
        vocabulary = f"vocabulary (token ids 0 to {vocab_size - 1})"
        said = f"{ids}" if isinstance(ids, int) else f"{ids}: {bad}"
        raise ValueError(f"eos_token_id={said} is outside the target's {vocabulary}: give an id of its tokenizer "
                         f"(e.g. tokenizer.eos_token_id) or None ({none_means})")
    return frozenset(listed)


def _drop_outside(found, listed: list[int], outside: list[int], where: str, vocab_size: int) -> frozenset[int]:
    """The target's own eos ids less those outside its vocabulary, said in one warning: such an id is no row of the
    target's output, so no run can sample it, and leaving it out changes no run."""
    kept = [i for i in listed if i not in outside]
    one = len(outside) == 1
    bad = ", ".join(map(str, outside))
    said = f"{listed[0]}, outside" if _index(found) is not None else \
        f"{listed}, and {bad} {'is' if one else 'are'} outside"
    ends = f"a run ends at {', '.join(map(str, kept))}" if kept else \
        "no token ends a run: give the engine eos_token_id= to end at one"
    log.warning("specui: the target's %s is %s its vocabulary of %d tokens (ids 0 to %d): no run can sample %s, so "
                "%s left out (%s)", where, said, vocab_size, vocab_size - 1, "it" if one else "them",
                "it is" if one else "they are", ends)
    return frozenset(kept)


def check_run_arguments(*, into, draws, cache) -> None:
    """A run's advanced arguments, each None or of its type; `into` also fresh (one result holds one run)."""
    for name, value, kind, what in (("into", into, GenerationResult, "a new specui.GenerationResult()"),
                                    ("draws", draws, Generators, "specui.sampling.Generators, e.g. another run's "
                                                                 "copy()"),
                                    ("cache", cache, PromptCache, "a specui.prompt_cache.PromptCache()")):
        if value is not None and not isinstance(value, kind):
            raise ValueError(f"{name}= takes {what} or None, not a {type(value).__name__}")
    if into is not None and (into.rounds or into.token_ids):
        raise ValueError(f"into= already holds a run ({len(into.token_ids)} tokens); pass a new GenerationResult")


def check_draft(draft: Draft, k: int, drafter, *, vocab_size: int, device) -> tuple[torch.Tensor, torch.Tensor | None]:
    """A drafter's proposal as (tokens [n] on the target's input device, q [n, V'] | None) with n <= k;
    a longer one is cut to k.

    Raises ValueError naming the drafter for ids outside the target's vocabulary or a malformed q.
    """
    name = getattr(drafter, "name", type(drafter).__name__)
    if not (hasattr(draft, "tokens") and hasattr(draft, "probs")):
        raise ValueError(f"drafter {name!r}'s propose returned a {type(draft).__name__}; it must return a "
                         "specui.Draft(tokens, probs)")
    tokens = torch.as_tensor(draft.tokens)
    if tokens.dim() == 1 and not tokens.numel():  # nothing drafted (k = 0): torch.tensor([]) is float, and fine
        tokens = tokens.long()
    if tokens.dim() != 1 or tokens.dtype.is_floating_point or tokens.dtype.is_complex or tokens.dtype == torch.bool:
        raise ValueError(f"drafter {name!r} proposed {tuple(tokens.shape)} {tokens.dtype} tokens; "
                         "a Draft holds a 1-D integer tensor")
    tokens = tokens[:k].to(device=device, dtype=torch.long)
    if tokens.numel() and not (0 <= int(tokens.min()) and int(tokens.max()) < vocab_size):
        raise ValueError(f"drafter {name!r} proposed token ids {tokens.tolist()}, outside the target's "
                         f"vocabulary [0, {vocab_size})")
    probs = draft.probs
    if probs is not None and not isinstance(probs, torch.Tensor):
        raise ValueError(f"drafter {name!r} gave q as a {type(probs).__name__}; a Draft's probs is a [n, V] float "
                         "tensor (or None: deterministic drafts)")
    if probs is not None:
        n, v = tokens.shape[0], probs.shape[-1] if probs.dim() == 2 else None
        if probs.dim() != 2 or probs.shape[0] < n or v > vocab_size:
            raise ValueError(f"drafter {name!r} gave q of shape {tuple(probs.shape)} for {n} tokens; need "
                             f"[n, V] with V <= {vocab_size} (the target's vocabulary)")
        probs = probs[:n]
        if not getattr(drafter, "trusted_q", False):
            _check_q(name, tokens, probs)
    return tokens, probs


def _check_q(name: str, tokens: torch.Tensor, probs: torch.Tensor) -> None:
    """A custom drafter's q: each row a distribution (finite, >= 0, summing to 1) that gives its own token a chance.
    The accept/reject rule is exact only for the q each token was drawn from; these are the errors that show (logits
    or scores given as q, a row of another position). specui's drafters build q as such (`trusted_q`): not checked."""
    if not probs.numel():
        return
    q = probs.detach().float()
    sums = q.sum(-1)
    if not bool(torch.isfinite(q).all()) or bool((q < 0).any()) or bool(((sums - 1).abs() > 1e-3).any()):
        raise ValueError(f"drafter {name!r} gave a q whose rows are not distributions (row sums "
                         f"{[round(float(x), 4) for x in sums]}); each row must be the probabilities its token was "
                         "drawn from: finite, >= 0, summing to 1")
    x = tokens.to(q.device)
    inside = x < q.shape[-1]  # ids past q's width have q 0
    chance = q.gather(-1, x.clamp(max=q.shape[-1] - 1)[:, None])[:, 0].where(inside, 0.0)
    if bool((chance <= 0).any()):
        i = int((chance <= 0).nonzero()[0])
        raise ValueError(f"drafter {name!r} proposed token {int(x[i])} at position {i} with q = 0 there: a token "
                         "drawn from q has q > 0 (is q the row of another position?)")


def _index(x) -> int | None:
    try:
        return operator.index(x)
    except TypeError:
        return None


def align(probs: torch.Tensor | None, vocab_size: int, device) -> torch.Tensor | None:
    """Put the draft's q on the target's device and vocabulary: tokens the draft lacks get q = 0."""
    if probs is None:
        return None
    probs = probs.to(device)
    missing = vocab_size - probs.shape[-1]
    return torch.nn.functional.pad(probs, (0, missing)) if missing > 0 else probs


def longest_draft(drafter, k: int) -> int:
    """The most tokens a drafter may propose for K = k: its `longest(k)` when it has one (a copy may be
    longer than K), else k."""
    longest = getattr(drafter, "longest", None)
    return max(k, longest(k)) if longest is not None and k > 0 else k
