"""The engine's checks of what it is given: a prompt's token ids, a drafter's proposal, a draft's q.

Each raises ValueError with a message that says what was wrong and what is expected, before the engine
computes anything with it.
"""

from __future__ import annotations

import operator

import torch

from specui.drafters import Draft


def check_prompt(input_ids, vocab_size: int) -> list[int]:
    """One prompt as a list of ints: a sequence of ints (numpy's too), a 1-D tensor or array, or [1, n]; or what
    a tokenizer returns (a mapping with "input_ids": its ids are taken). Text is refused with what to do."""
    if isinstance(input_ids, (str, bytes)):
        raise ValueError("the prompt is text, and the engine takes token ids: tokenize it first, e.g. "
                         "engine.tokenizer(text)['input_ids'], or engine.tokenizer.apply_chat_template(messages, "
                         "add_generation_prompt=True) for a chat model")
    if hasattr(input_ids, "keys") and "input_ids" in input_ids:  # a tokenizer's BatchEncoding, or a dict
        input_ids = input_ids["input_ids"]
    shape = getattr(input_ids, "shape", None)  # a torch tensor or a numpy array
    if shape is not None:
        if len(shape) > 2 or (len(shape) == 2 and shape[0] != 1):
            raise ValueError(f"input_ids has shape {tuple(shape)}: the engine decodes one prompt at a time; "
                             "give a 1-D sequence of token ids or a [1, n] tensor")
        input_ids = input_ids.reshape(-1).tolist()
    prompt = list(input_ids)
    if not prompt:
        raise ValueError("the prompt is empty: give at least one token id")
    ids = []
    for t in prompt:
        i = None if isinstance(t, bool) or type(t).__name__ == "bool_" else _index(t)
        if i is None or not 0 <= i < vocab_size:
            raise ValueError(f"token id {t!r} is not an integer in [0, {vocab_size}) (the target's vocabulary)")
        ids.append(i)
    return ids

def check_draft(draft: Draft, k: int, drafter, *, vocab_size: int, device) -> tuple[torch.Tensor, torch.Tensor | None]:
    """A drafter's proposal as (tokens [n] on the target's input device, q [n, V'] | None) with n <= k;
    a longer one is cut to k.

    Raises ValueError naming the drafter for ids outside the target's vocabulary or a malformed q.
    """
    name = getattr(drafter, "name", type(drafter).__name__)
    tokens = torch.as_tensor(draft.tokens)
    if tokens.dim() != 1 or tokens.dtype.is_floating_point or tokens.dtype.is_complex or tokens.dtype == torch.bool:
        raise ValueError(f"drafter {name!r} proposed {tuple(tokens.shape)} {tokens.dtype} tokens; "
                         "a Draft holds a 1-D integer tensor")
    tokens = tokens[:k].to(device=device, dtype=torch.long)
    if tokens.numel() and not (0 <= int(tokens.min()) and int(tokens.max()) < vocab_size):
        raise ValueError(f"drafter {name!r} proposed token ids {tokens.tolist()}, outside the target's "
                         f"vocabulary [0, {vocab_size})")
    probs = draft.probs
    if probs is not None:
        n, v = tokens.shape[0], probs.shape[-1] if probs.dim() == 2 else None
        if probs.dim() != 2 or probs.shape[0] < n or v > vocab_size:
            raise ValueError(f"drafter {name!r} gave q of shape {tuple(probs.shape)} for {n} tokens; need "
                             f"[n, V] with V <= {vocab_size} (the target's vocabulary)")
        probs = probs[:n]
    return tokens, probs


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
