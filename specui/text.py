"""Text for people: token ids to display text (`TokenText`), the one number format (`fmt`), and the words the app and
the terminal say a run ended with (`STOP_REASONS`).

Token ids become display text one token at a time, exactly as the tokenizer would decode the sequence.

Byte-level BPE tokens can hold part of a UTF-8 character, and SentencePiece tokens change their
leading space depending on what precedes them. So each token's text is the difference between two
decodes of a short window that ends with it (the approach of text-generation-inference): a token
whose text is still an incomplete character shows as "" and the token that completes it carries the
whole character. Joined, the pieces equal `tokenizer.decode(all_ids)` for the generated part, but for a character
cut at the very end (the token limit fell inside its bytes): `flush` holds it back, as `push` held it, where the
decode ends in U+FFFD; the tokens that hold its bytes stay in the run, and `cut` says so. A U+FFFD the model wrote
as a character of its own (its tokens are the tokenizer's own for "\ufffd") is text like any other: shown at once,
never held back nor cut.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from functools import cached_property

PARTIAL = "\ufffd"  # what a decoder writes for an incomplete UTF-8 sequence
# why a run ended (`GenerationResult.stop_reason`), in the words both the chat and the terminal show under a reply
STOP_REASONS = {"eos": "end of text", "length": "max new tokens reached"}


class TokenText:
    """Incremental decoder: `push(id)` returns the new text the token completes."""

    def __init__(self, tokenizer, prompt_ids: Sequence[int] = (), *, context: int = 4):
        self.tokenizer = tokenizer
        self.ids = list(prompt_ids)[-context:]  # a little prompt so the first token gets its leading space
        self.prefix_offset = 0  # the window decoded as "already shown"
        self.read_offset = len(self.ids)  # tokens before this are shown
        self.cut = False  # `flush` held back an incomplete character at the very end

    def _decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=False, clean_up_tokenization_spaces=False)

    @cached_property
    def _replacement_ids(self) -> tuple[int, ...] | None:
        """The tokens this tokenizer writes U+FFFD with after other text (None if it has no such tokens of its own)."""
        if not hasattr(self.tokenizer, "encode"):  # a decoder alone (a test's): every U+FFFD at the end reads as cut
            return None
        before = self.tokenizer.encode("a", add_special_tokens=False)
        both = self.tokenizer.encode("a" + PARTIAL, add_special_tokens=False)
        ids = tuple(both[len(before) :])
        return ids if both[: len(before)] == before and ids and self._decode(ids) == PARTIAL else None

    def _ends_incomplete(self, text: str) -> bool:
        """Whether `text`, the decode of the ids so far, ends in an incomplete character (more bytes may complete
        it), not in a U+FFFD the model wrote as a character of its own: its ids end with the tokenizer's own for it."""
        if not text.endswith(PARTIAL):
            return False
        own = self._replacement_ids
        return own is None or tuple(self.ids[-len(own) :]) != own

    def push(self, token_id: int) -> str:
        """Add a generated token; return its text ("" while it ends in an incomplete character)."""
        self.ids.append(int(token_id))
        shown = self._decode(self.ids[self.prefix_offset : self.read_offset])
        full = self._decode(self.ids[self.prefix_offset :])
        if len(full) > len(shown) and not self._ends_incomplete(full):
            self.prefix_offset, self.read_offset = self.read_offset, len(self.ids)
            return full[len(shown) :]
        return ""

    def flush(self) -> str:
        """Text still pending at the end of a generation. An incomplete character at its very end (the token limit fell
        inside its bytes, and the decode ends in U+FFFD) is held back as `push` held it, not shown as U+FFFD: `cut`
        is then True. A U+FFFD the model wrote as a character of its own (`push` showed it) is kept; written in other
        tokens than the tokenizer's own for it, it reads as a cut one."""
        shown = self._decode(self.ids[self.prefix_offset : self.read_offset])
        full = self._decode(self.ids[self.prefix_offset :])
        self.cut = len(full) > len(shown) and self._ends_incomplete(full)
        self.prefix_offset = self.read_offset = len(self.ids)
        rest = full[len(shown) :]
        return rest.removesuffix(PARTIAL) if self.cut else rest

    def peek(self, token_id: int) -> str:
        """The text `token_id` would have if it came next (for rejected drafts), without adding it."""
        shown = self._decode(self.ids[self.prefix_offset :])
        full = self._decode(self.ids[self.prefix_offset :] + [int(token_id)])
        return full[len(shown) :] if full.startswith(shown) else self._decode([int(token_id)])


def fmt(x: float | None, spec: str = ".3f", *, none: str = "–") -> str:
    """The one number format of specui: `x` with a format spec (".2f", ".1%", ".2e"...), `none` for None.

    A spec ending in "x" or "×" is a ratio: fmt(2.049, ".2f×") -> "2.05×".
    """
    if x is None:
        return none
    suffix = ""
    if spec and spec[-1] in "x×":
        spec, suffix = spec[:-1], spec[-1]
    return f"{x:{spec}}{suffix}"


# a speedup that shows below 1: its word, and why that happens (the app's tooltips; the terminal has none)
SLOWER = "slower this run"
SLOWER_WHY = ("other programs busy on these cores, a short reply (too few rounds to repay drafting) or a long prompt "
              "(the draft reads it too) can make speculative decoding the slower. Whether the two outputs are "
              "identical does not depend on the timing")


def shows_slower(ratio: float | None) -> bool:
    """Whether a speedup shows below 1 as its two decimals give it (0.996 shows "1.00×": not slower)."""
    return ratio is not None and round(ratio, 2) < 1


def speedup_said(ratio: float | None, spec: str = ".2f×") -> str:
    """A speedup as `fmt` shows it, with "(slower this run)" where it shows below 1 (`shows_slower`)."""
    said = fmt(ratio, spec)
    return f"{said} ({SLOWER})" if shows_slower(ratio) else said


def fmt_prob(x: float | None) -> str:
    """A probability for the step view: four decimals, or scientific notation below 0.001."""
    if x is None:
        return "–"
    return fmt(x, ".4f") if x == 0 or abs(x) >= 1e-3 else fmt(x, ".2e")


def holds_control(text: str, allowed: str = "") -> bool:
    """Whether `text` holds a control character (Unicode's Cc: an escape, a Ctrl-C, a line break) but those in
    `allowed`: a terminal obeys one where the text is printed or pasted, and a shell reads it."""
    return any(c not in allowed and unicodedata.category(c) == "Cc" for c in text)


def not_unicode(text: str | None, what: str) -> str | None:
    """Why `text` is no Unicode text a tokenizer reads, in one sentence naming it as `what` (None: it is): a lone
    surrogate, as an API client's JSON may hold ("\\ud800") and as bytes that are not UTF-8 reach argv and stdin."""
    try:
        (text or "").encode("utf-8")
    except UnicodeEncodeError as e:
        return (f"{what} is not valid Unicode text: character {e.start + 1} is U+{ord(text[e.start]):04X}, a lone "
                "surrogate (half of a pair, or a byte that is not UTF-8)")
    return None


def left_out_note(count: int, context: int) -> str:
    """What the app's chat (leading the reply) and the terminal's --chat say when a conversation's oldest `count`
    messages were left out of a turn, which with them is longer than the model's `context` tokens ("" for none)."""
    if not count:
        return ""
    some, them = ("message", "it") if count == 1 else (f"{count} messages", "them")
    return (f"The conversation's first {some} left out: with {them}, it is longer than the model's context "
            f"({context:,} tokens).")


READ_NOTE_TOKENS = 256  # a prompt whose reading takes at least these many tokens (seconds on a CPU) is said to be read


def reading_note(tokens: int) -> str | None:
    """What the app and the terminal say while a long prompt is read, before its first token comes: a pasted file's
    thousands of tokens take tens of seconds on a CPU. `tokens`: those the run reads (not those a kept conversation
    cache holds); None below READ_NOTE_TOKENS."""
    return f"Reading the prompt: {tokens:,} tokens…" if tokens >= READ_NOTE_TOKENS else None
