"""What `python -m specui` shows: a reply streamed round by round, each token coloured by where it came from, and
the run's stats line and record. No model loading or argument parsing here (`specui.terminal`).

The colours are the app's kinds (`specui.events.Kind`): an accepted draft green, the target's token at a rejection
red and underlined, the bonus token blue, plain decoding grey. On a terminal, control characters a model writes
(an escape sequence, a carriage return) are shown as escapes (`\\x1b`), never obeyed: the terminal shows text.
"""

from __future__ import annotations

import os
import unicodedata
from dataclasses import dataclass, field

from specui import runstats
from specui.drafters.registry import LABELS
from specui.events import GenerationResult, Kind
from specui.lesson import json_safe
from specui.text import STOP_REASONS, TokenText, fmt, speedup_said

RESET = "\x1b[0m"
BLANK_REJECTION = "resampled-blank"  # the target's token at a rejection that is only whitespace: marked where it is
LINE_BREAK = "↵"  # a rejection's line break, shown (before the break) where colours are: a break shows no colour
COLOURS = {Kind.ACCEPTED: "\x1b[32m", Kind.RESAMPLED: "\x1b[31;4m", Kind.BONUS: "\x1b[34m", Kind.PLAIN: "\x1b[90m",
           BLANK_REJECTION: "\x1b[31;4m"}
KIND_WORDS = {Kind.ACCEPTED: "accepted draft", Kind.RESAMPLED: "resampled at a rejection", Kind.BONUS: "bonus",
              Kind.PLAIN: "plain decoding"}


def wants_colour(choice: str, stream) -> bool:
    """--color: "always", "never", or "auto": on a terminal unless NO_COLOR is set (no-color.org: a flag given on the
    command line wins over the variable)."""
    if choice != "auto":
        return choice == "always"
    return bool(stream.isatty()) and not os.environ.get("NO_COLOR")


BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def shown(text: str) -> str:
    """`text` with its control characters but line breaks and tabs written as escapes (ESC as `\\x1b`), and its bidi
    embeddings, overrides and isolates too (U+202E as `\\u202e`): a model's right-to-left override made a terminal that
    follows them draw the rest of the line reversed, text unlike what was written (Trojan Source's trick). The marks
    (U+200E, U+200F) that right-to-left text uses stay."""
    return "".join(repr(c)[1:-1] if (c not in "\n\t" and unicodedata.category(c) == "Cc") or c in BIDI_CONTROLS
                   else c for c in text)


def blank_marked(text: str, kind: str) -> tuple[str, str]:
    """A token's (text, kind) to show where colours are: the target's token at a rejection that is only whitespace
    (a space, a line break) as `BLANK_REJECTION`, underlined spaces and each line break shown as `LINE_BREAK` before
    it, so that the rejection shows where it happened; any other token as it is. Only what is shown: the reply's
    text and record keep the token's own text."""
    if kind != Kind.RESAMPLED or not text or text.strip(" \t\n"):
        return text, kind
    return text.replace("\n", LINE_BREAK + "\n"), BLANK_REJECTION


def painted(text: str, kind: str, *, colour: bool, safe: bool) -> str:
    """A token's text for the terminal: escaped when `safe`, and with `colour` in its kind's colour, closed before
    each line break (a pager or the next line never inherits it). Spaces and tabs at either end of a line stay out of
    the colour: a colour does not show on them, but the underline of a rejection's token did, a stub beside the word
    (after the reply's last word, or before a word wrapped to the next line); a rejection's token that is only
    whitespace (`blank_marked`) is underlined whole, the mark of where it happened."""
    text = shown(text) if safe else text
    code = COLOURS.get(kind) if colour else None
    if not code:
        return text

    def line_painted(line: str) -> str:
        if kind == BLANK_REJECTION:
            return code + line + RESET if line else line
        word = line.strip(" \t")
        if not word:
            return line
        start = line.index(word)
        return line[:start] + code + word + RESET + line[start + len(word):]

    return "\n".join(line_painted(line) for line in text.split("\n"))


def legend() -> str:
    """One line naming each colour, in its colour."""
    return "  ".join(painted(words, kind, colour=True, safe=False) for kind, words in KIND_WORDS.items())


AMBIGUOUS_WIDE = "SPECUI_AMBIGUOUS_WIDE"  # set: the terminal draws East Asian Ambiguous characters 2 columns wide


def columns(c: str, ambiguous: int = 1) -> int:
    """The columns a character takes on a terminal: 2 for a wide one (CJK, most emoji), 0 for a combining mark, and
    `ambiguous` for one Unicode calls East Asian Ambiguous (…, °, ×, Greek, Cyrillic, box drawing): 1 on most
    terminals, 2 on one set to draw them wide, as a CJK one may be (`ambiguous_columns`)."""
    if unicodedata.combining(c) or unicodedata.category(c) in ("Mn", "Me", "Cf"):
        return 0
    width = unicodedata.east_asian_width(c)
    return 2 if width in ("W", "F") else ambiguous if width == "A" else 1


def ambiguous_columns() -> int:
    """The columns an East Asian Ambiguous character takes here: 2 where SPECUI_AMBIGUOUS_WIDE is on (1, yes or any
    value but 0, false, no, off and empty, which are off as unset is), for a terminal set to draw them wide (no
    terminal says so, and guessed from the locale, a CJK one set narrow, as most are by default, would wrap short),
    else 1."""
    value = os.environ.get(AMBIGUOUS_WIDE, "").strip().lower()
    return 1 if value in ("", "0", "false", "no", "off") else 2


class Wrap:
    """A streamed reply wrapped at word boundaries to a terminal `width` columns wide (where the terminal would
    break a word at its edge). A word is held until it ends, then starts a new line if it would cross the edge
    (the space before it stays at the old line's end); a word longer than a line is broken at the edge, shown as it
    comes once it is that long (a reply without spaces, as Chinese is written, streams). `push`
    takes a token's shown text and kind, and returns the (text, kind) pieces to write now, the line breaks it adds
    of no kind, so each piece is painted in its own colour and none runs over a break.

    With `marks` (where colours are), the text wraps a column short of the edge and that last column is kept for
    the `LINE_BREAK` of a rejection's line break (`blank_marked`), placed after the line's last word: the mark joined
    the word before it, so a word that ended a line at the edge was taken to the next line with it, and a full line's
    mark went past the edge, on a line of its own.

    A space or tab that would cross the edge becomes the line's break once the next character comes: a line break
    (or a rejection's mark, then its line break) ends the line itself, where both made a blank line that the text
    does not have, and put the mark alone on it."""

    def __init__(self, width: int, *, marks: bool = False, ambiguous: int = 1):
        self.edge, self.ambiguous = max(width, 1), ambiguous  # ambiguous: `columns`' (a CJK-set terminal's 2)
        self.width, self.column, self.word = max(self.edge - marks, 1), 0, []  # word: [(character, kind)]
        self.breaking = False  # the word in hand is longer than a line: placed as it comes, broken at the edge
        self.wrapped = False  # a space at the edge was left out: the line breaks before anything but a line break

    def push(self, text: str, kind) -> list[tuple[str, str | None]]:
        out: list[tuple[str, str | None]] = []
        for c in text:
            mark = c == LINE_BREAK and kind == BLANK_REJECTION  # a mark (a blank rejection has no text of its own)
            if self.wrapped and c != "\n" and not mark:
                out.append(("\n", None))
                self.column = 0
            self.wrapped = False
            if mark:
                self._place(out)
                self.breaking = False
                if self.column >= self.edge:  # only where the edge is 1 column: no room for text and the mark
                    out.append(("\n", None))
                    self.column = 0
                out.append((c, kind))
                self.column += 1
                continue
            if c in " \t\n":
                self._place(out)
                self.breaking = False
                if c == "\n":
                    out.append(("\n", kind))
                    self.column = 0
                    continue
                step = 8 - self.column % 8 if c == "\t" else 1
                if self.column + step > self.width:  # a space at the edge: the new line is the break
                    self.wrapped = True
                    continue
                out.append((c, kind))
                self.column += step
            else:
                self.word.append((c, kind))
                if self.breaking or sum(columns(held, self.ambiguous) for held, _ in self.word) > self.width:
                    self._place(out)
                    self.breaking = True
        return merged(out)

    def flush(self) -> list[tuple[str, str | None]]:
        """The word held (the reply ended, or was stopped)."""
        out: list[tuple[str, str | None]] = []
        self._place(out)
        self.breaking = self.wrapped = False
        return merged(out)

    def _place(self, out: list) -> None:
        if not self.word:  # nothing held (the column may be the mark's, past the text's width)
            return
        length = sum(columns(c, self.ambiguous) for c, _ in self.word)
        if self.column and self.column + length > self.width and not self.breaking:
            out.append(("\n", None))
            self.column = 0
        for c, kind in self.word:  # a word longer than a line broken at the edge
            if self.column + columns(c, self.ambiguous) > self.width:
                out.append(("\n", None))
                self.column = 0
            out.append((c, kind))
            self.column += columns(c, self.ambiguous)
        self.word = []


def merged(pieces: list[tuple[str, str | None]]) -> list[tuple[str, str | None]]:
    """Neighbouring pieces of one kind joined (one colour code for a run of characters)."""
    out: list[tuple[str, str | None]] = []
    for text, kind in pieces:
        if out and out[-1][1] == kind and text != "\n" and out[-1][0][-1:] != "\n":
            out[-1] = (out[-1][0] + text, kind)
        else:
            out.append((text, kind))
    return out


@dataclass
class Reply:
    """One run as it streams: the result, each emitted token's text, and the reply's text."""

    result: GenerationResult = field(default_factory=GenerationResult)
    pieces: list[str] = field(default_factory=list)  # per emitted token ("" for a special token: an end of turn)

    @property
    def text(self) -> str:
        return "".join(self.pieces)


def stream_reply(rounds, reply: Reply, *, tokenizer, prompt_ids, out, colour: bool, safe: bool,
                 width: int | None = None) -> Reply:
    """Write each round's tokens to `out` as the engine decides them (`rounds`: `engine.stream(...)` filling
    `reply.result`), wrapped at word boundaries to `width` columns if given (`Wrap`: only what is shown, never
    `reply`'s text). Special tokens (the end of a turn) are left out of the text, as `decode(...,
    skip_special_tokens=True)` leaves them. A character whose bytes span tokens (an emoji, Chinese, in a byte-level
    tokenizer) shows once, with the token that completes it, in that token's colour, or a rejection's if one of its
    tokens was (the tokens before show nothing, and a rejection among them was not seen). Ctrl-C stops it with the
    reply so far written and its line ended."""
    special = frozenset(getattr(tokenizer, "all_special_ids", ()) or ())
    decoder = TokenText(tokenizer, prompt_ids)
    wrap = Wrap(width, marks=colour, ambiguous=ambiguous_columns()) if width else None

    def write(text: str, kind) -> None:
        if colour:
            text, kind = blank_marked(text, kind)
        if wrap is None:
            out.write(painted(text, kind, colour=colour, safe=safe))
            return
        for piece, its_kind in wrap.push(shown(text) if safe else text, kind):
            out.write(painted(piece, its_kind, colour=colour, safe=False))

    held: list = []  # the kinds of the tokens that hold part of the character to come (no text of their own)
    try:
        for round_ in rounds:
            for token in round_.emitted():
                piece = "" if token.token_id in special else decoder.push(token.token_id)
                reply.pieces.append(piece)
                if not piece and token.token_id not in special:
                    held.append(token.kind)
                    continue
                # a character that ends a rejection's bytes shows as one: only the token that completes it is seen
                write(piece, Kind.RESAMPLED if Kind.RESAMPLED in held else token.kind)
                held = []
            out.flush()
        rest = decoder.flush()
        if rest:  # an incomplete character at the very end
            reply.pieces[-1] += rest
            write(rest, reply.result.kinds[-1])
    finally:  # the reply's line ends however the run did (Ctrl-C, a failure)
        for piece, kind in wrap.flush() if wrap else ():
            out.write(painted(piece, kind, colour=colour, safe=False))
        out.write((RESET if colour else "") + "\n")
        out.flush()
    return reply


def stats_line(reply: Reply, *, drafter: str, k: int, confidence: float, sampled: bool, chat: bool = False,
               adaptive: bool = False, static_tree: bool = False, penalty: float = 1.0) -> str:
    """tokens · tokens/s · acceptance · tokens per target forward · the drafter and K (adaptive K: where it started; a
    token-tree run: its largest tree; a static tree keeps its shape whatever `confidence` is) · a repetition penalty
    (the target it stays exact to) · the stop reason (and a sampled run's seed). A token-tree run's rate is
    "acceptance along the path", as the app names it: the nodes the target judged along each round's kept path, not a
    share of every drafted node."""
    stats = runstats.run_stats(reply.result, k=None if adaptive else k)
    rate = "acceptance along the path" if stats.trees else "acceptance"
    parts = [f"{stats.tokens} tokens", f"{fmt(stats.tokens_per_s, '.1f')} tokens/s",
             f"{rate} {fmt(stats.acceptance_rate, '.2f')}",
             f"{fmt(stats.mean_accepted_length, '.2f')} tokens per target forward",
             f"drafter {LABELS.get(drafter, drafter)}, " + (f"K adaptive from {k}" if adaptive else f"K {k}")
             + (f", token trees of up to {stats.tree_nodes} nodes" if stats.trees else "")
             + (f" (fewer while the draft is less sure than {confidence:g})" if confidence and not static_tree else "")]
    if penalty != 1:  # --compare's plain run takes it too: "identical" is to the penalised target's own output
        parts.append(f"repetition penalty {penalty:g}")
    if chat:
        parts.append(f"{reply.result.reused_tokens} prompt tokens kept from the conversation")
    if reply.result.seed is not None and sampled:  # what --seed takes to draw this reply again
        parts.append(f"seed {reply.result.seed}")
    parts.append(STOP_REASONS.get(reply.result.stop_reason, reply.result.stop_reason or "stopped"))
    return " · ".join(parts)


def compare_line(spec: Reply, plain: Reply, *, greedy: bool) -> str:
    """Plain decoding's speed, the speedup and, greedy, whether the two outputs are identical."""
    spec_stats, plain_stats = runstats.run_stats(spec.result), runstats.run_stats(plain.result)
    parts = [f"plain decoding: {plain_stats.tokens} tokens", f"{fmt(plain_stats.tokens_per_s, '.1f')} tokens/s",
             f"speedup {speedup_said(runstats.speedup(spec_stats, plain_stats), '.2fx')}"]
    if greedy:
        at = runstats.first_difference(spec.result.token_ids, plain.result.token_ids)
        parts.append("identical: yes, token for token" if at is None else f"identical: NO, from token {at + 1}")
    else:
        parts.append("sampled: each reply is a draw from the target's distribution (identity is checked when greedy)")
    return " · ".join(parts)


def record(spec: Reply, plain: Reply | None, *, preset: str, settings, prompt: str, system: str, command: str) -> dict:
    """The run as JSON-able data, in the keys of the app's API answer and download: the preset and settings, the reply
    and its tokens (kind, p, q, acceptance probability), the numbers and, with --compare, plain decoding's."""
    spec_stats = runstats.run_stats(spec.result, plain=plain.result if plain else None,  # adaptive: the run's own K
                                    k=None if settings.adaptive else settings.num_draft_tokens)  # as the app's stats
    plain_stats = runstats.run_stats(plain.result) if plain else None
    tokens = [{"id": e.token_id, "text": text, "kind": str(e.kind), "p": e.target_prob, "q": e.draft_prob,
               "accept": e.accept_prob}
              for e, text in zip((e for r in spec.result.rounds for e in r.emitted()), spec.pieces)]
    identical = None
    if plain is not None and settings.greedy:
        identical = spec.result.token_ids == plain.result.token_ids
    return json_safe({
        "preset": preset, "settings": settings.as_dict(), "system": system, "prompt": prompt,
        "text": spec.text, "tokens": tokens, "stats": spec_stats.as_dict(), "stop_reason": spec.result.stop_reason,
        "seed": spec.result.seed, "plain_text": plain.text if plain else None,
        "plain_stats": plain_stats.as_dict() if plain_stats else None,
        "speedup": runstats.speedup(spec_stats, plain_stats) if plain_stats else None, "identical": identical,
        "command": command})
