"""HTML for tokens, prompts, replies, the legend and the race view: pure functions, no gradio.

Every piece of text that comes from a user or a model goes through `escape_text`, so a prompt or a
token such as `<img src=x onerror=alert(1)>` is shown as text and never becomes markup. The output
is one line of HTML (newlines and tabs become character references), so a markdown renderer cannot
split it into blocks, and `white-space: pre-wrap` in a monospace font shows code exactly.

Each emitted token is a `<span class="tok tok-{kind}" value="...">` whose tooltip gives the target
probability p, the draft probability q and the acceptance probability; rejected drafts are
`tok-rejected` spans (hidden unless the chat has the `show-rejected` class). The tooltip is sent short (`tip_value`:
its figures alone) and written out by the page's script (tokens.js) as the token is hovered or focused.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from specui.events import Check, Kind
from specui.text import PARTIAL, SLOWER_WHY, fmt, shows_slower, speedup_said

KIND_LABELS = {
    Kind.ACCEPTED: "accepted draft token",
    Kind.RESAMPLED: "resampled by the target (first rejection)",
    Kind.BONUS: "bonus token (every draft accepted)",
    Kind.PLAIN: "plain decoding (target alone)",
    Kind.REJECTED: "rejected draft token",
}
# a reply's token block as a screen reader names it (the keys are tokens.js's)
TOKENS_LABEL = "Tokens: left and right arrow keys step through them, giving each one's kind, p and q"
TEXT_STYLE = "white-space:pre-wrap;font-family:var(--font-mono, ui-monospace, monospace)"


@dataclass(frozen=True)
class TokenView:
    """One token as the UI shows it."""

    text: str
    kind: Kind  # accepted | resampled | bonus | plain | rejected
    p: float | None = None  # target probability of the token at its position
    q: float | None = None  # draft probability (None: the drafter gave no distribution)
    accept: float | None = None  # min(1, p/q) of the draft at this position (greedy: 1 or 0)
    token_id: int | None = None
    time_s: float = 0.0  # engine time at which its round was decided (for the race replay)
    note: str = ""  # extra words for the tooltip
    special: bool = False  # one of the tokenizer's special tokens (an end of turn): shown small, as a marker


SPECIAL_NOTE = "a special token (the end of the model's turn, or another control token), not text"
PART_SHOWN = "◌"  # what a token that holds part of a character shows: its bytes alone are no text
PART_CLASS = "tok-part"  # its span's class: style.css draws PART_SHOWN before it, seen but no text (never selected,
# copied or read aloud: a reply selected and copied held "◌◌👩◌◌🏽…")
PART_NOTE = ("part of a character (some of its UTF-8 bytes, no text alone): the token that completes the character "
             "shows it whole; the reply's text and its copy hold the character once (at the end of a reply the token "
             "limit cut inside a character, none came: that character is left out)")


def escape_text(text: str) -> str:
    """Escape & < > " ' and turn line breaks and tabs into references, keeping the HTML on one line."""
    escaped = html.escape(text, quote=True)
    return escaped.replace("\r", "&#13;").replace("\n", "&#10;").replace("\t", "&#9;")


def attribute(text: str) -> str:
    """`text` as a double-quoted attribute's value (a tooltip, a token's `tip_value`): & " < > escaped. An apostrophe,
    which cannot end the value, stays one byte, where `html.escape` made it six (`&#x27;`): twice in a tooltip or a
    value that quotes its token's text, and every streamed frame sends the reply's values whole."""
    return text.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;").replace(">", "&gt;")


EMBEDDINGS, ISOLATES = "\u202a\u202b\u202d\u202e", "\u2066\u2067\u2068"  # bidi controls that open a scope


def closed_bidi(text: str) -> str:
    """`text` with every bidi embedding, override (U+202A-E, closed by U+202C) and isolate (U+2066-8, by U+2069) it
    opens closed at its end: an RLO (U+202E) in one token had reversed every token after it on its line, their
    colours and order with them; now it reverses the rest of its own token alone."""
    opened = []
    for ch in text:
        if ch in EMBEDDINGS or ch in ISOLATES:
            opened.append(ch)
        elif ch == "\u202c" and opened and opened[-1] in EMBEDDINGS:
            opened.pop()
        elif ch == "\u2069" and any(o in ISOLATES for o in opened):
            while opened and opened.pop() not in ISOLATES:  # a PDI closes its isolate and what opened within it
                pass
    return text + "".join("\u2069" if o in ISOLATES else "\u202c" for o in reversed(opened))


MARKDOWN_SPECIAL = re.compile(r"([!-/:-@\[-`{-~])")  # every ASCII punctuation character


def markdown_text(text: str) -> str:
    """`text` for a Markdown component to show as written: every ASCII punctuation character backslash-escaped (as
    CommonMark allows any of them), so that `<img src=x>`, `![a](url)`, `[a](url)`, `**`, `$$` or `#` in a models.yaml's
    description stays text instead of becoming an image fetched from elsewhere, a link, a heading or a formula."""
    return MARKDOWN_SPECIAL.sub(r"\\\1", text)


def _num(x: float | None, digits: int = 4) -> str:
    return fmt(x, f".{digits}f")


def tooltip(view: TokenView) -> str:
    """The title text: kind, then p, q and the acceptance probability."""
    label = KIND_LABELS.get(view.kind, view.kind)
    if view.kind == Kind.RESAMPLED:
        accept = f"accept prob of the rejected draft = {_num(view.accept, 3)}"
    else:
        accept = f"accept prob min(1, p/q) = {_num(view.accept, 3)}"
    parts = [label, f"p (target) = {_num(view.p)}", f"q (draft) = {_num(view.q)}", accept]
    if view.token_id is not None:
        parts.append(f"token {view.token_id} {view.text!r}")
    if view.note:
        parts.append(view.note)
    if view.special:
        parts.append(SPECIAL_NOTE)
    elif not view.text:
        parts.append(PART_NOTE)
    return " · ".join(parts)


COPIED = "copied from the context"  # the notes of `round_views`, each a letter in `tip_value` (tokens.js's NOTES)
UNDRAFTED = "nothing was drafted this round: the target's own token"
REJECTED_HERE, DISCARDED = "rejected here", "discarded after the rejection"
NOT_NEEDED = "discarded after the rejection (p never needed)"
NOTE_CODES = {COPIED: "c", UNDRAFTED: "u", REJECTED_HERE: "r", DISCARDED: "d", NOT_NEEDED: "n"}
PRINTABLE_ASCII = re.compile(r"[ -~\n\t]*")  # a text whose repr tokens.js writes from the span's own text


def tip_value(view: TokenView) -> str | None:
    """`tooltip(view)` sent short, as the span's `value` (the chat's sanitiser drops `data-` attributes): its figures
    as the tooltip writes them, space-separated (p, q, the acceptance probability, the token id, a letter per note of
    `NOTE_CODES`) and, for a text other than printable ASCII, its repr. The page's script (tokens.js) writes the
    tooltip from them, the kind's label from the class, the repr from the span's text, the special token's or a
    part's note from its class, as the token is hovered, focused or tapped: a reply's frames were 80% tooltips, every
    one sent again with each frame. None: a note that has no letter (the span keeps its `title`)."""
    codes = [NOTE_CODES.get(part) for part in view.note.split(" · ")] if view.note else []
    if None in codes:
        return None
    fields = [_num(view.p), _num(view.q), _num(view.accept, 3), "" if view.token_id is None else str(view.token_id),
              "".join(codes)]
    return " ".join(fields if PRINTABLE_ASCII.fullmatch(view.text) else [*fields, repr(view.text)])


def part_class(text: str, *, special: bool = False) -> str:
    """" tok-part" (`PART_CLASS`) for a token that holds part of a character, whose text is "" until a later token
    completes the character (`specui.text.TokenText`): style.css shows `PART_SHOWN` for it, where an empty span
    could not be seen, hovered or told apart; its text stays "", so that the reply's text is the model's."""
    return "" if text or special else f" {PART_CLASS}"


def token_span(view: TokenView, *, style: str = "", shown: str | None = None) -> str:
    """One token's span: its kind's class and its tooltip, showing its text (or `shown`: the Teach tab quotes it,
    its tooltip a `title` written out)."""
    style_attr = f' style="{style}"' if style else ""
    special = " tok-special" if view.special else ""
    part = part_class(view.text, special=view.special) if shown is None else ""
    short = tip_value(view) if shown is None else None
    tip = f'value="{attribute(short)}"' if short is not None else f'title="{attribute(tooltip(view))}"'
    return (f'<span class="tok tok-{html.escape(view.kind)}{special}{part}" {tip}{style_attr}>'
            f'{escape_text(closed_bidi(view.text) if shown is None else shown)}</span>')


CARET = "specui-caret"  # the class of a block of tokens still streaming: style.css draws a blinking caret after it
# the class of a compare run's plain column before its run begins (its title alone): style.css puts it in the second
# grid cell, as the plain column will be, though its markup comes before the streaming speculative column
NEXT_COLUMN = "specui-col-next"


def open_tokens(views: Sequence[TokenView], *, cursor: bool = False) -> str:
    """`render_tokens` left open, its closing tag not written: a streamed frame ends with it, so that the next frame,
    a few tokens longer, starts with this one (`render_reply`). `cursor`: the block's class `CARET`, which draws the
    caret after its last token (style.css), in its opening tag, where the tokens that come next leave it be."""
    caret = f" {CARET}" if cursor else ""
    return (f'<div class="specui-text{caret}" tabindex="0" role="group" title="{attribute(TOKENS_LABEL)}"'
            f' style="{TEXT_STYLE}">{"".join(token_span(v) for v in views)}')


def render_tokens(views: Sequence[TokenView], *, cursor: bool = False) -> str:
    """A block of token spans; `cursor` adds a blinking caret while streaming (`open_tokens`).

    The block is one stop of the Tab key, a named group (TOKENS_LABEL): from it the arrow keys step from token to
    token, each showing and announcing its kind, p and q (`specui/ui/tokens.js`); a tab stop per token would put
    hundreds of stops between the prompt and the settings. The name is a title (the chat's sanitiser drops
    aria-label)."""
    return f"{open_tokens(views, cursor=cursor)}</div>"


def render_prompt(prompt: str) -> str:
    """A user's prompt, escaped, whitespace kept."""
    return f'<div class="specui-prompt" style="{TEXT_STYLE}">{escape_text(prompt)}</div>'


def render_error(message: str) -> str:
    """A readable error in the chat (the message is escaped; never a traceback)."""
    return f'<div class="specui-error">⚠ {escape_text(message)}</div>'


def render_note(text: str) -> str:
    return f'<div class="specui-note">{escape_text(text)}</div>' if text else ""


def render_copy(text: str | None) -> str:
    """A "Copy reply" button and, hidden beside it, the reply as plain text, which the page's script
    (`specui/ui/copy.js`) puts on the clipboard: a message's own markup (token spans, rejected drafts) never is."""
    if text is None:
        return ""
    return ('<div class="specui-copy-row"><button type="button" class="specui-copy" title="Copy the reply as plain '
            f'text">Copy reply</button><div class="specui-copy-text">{escape_text(text)}</div></div>')


def render_reply(spec: Sequence[TokenView], *, plain: Sequence[TokenView] | None = None, spec_title: str = "",
                 plain_title: str = "", note: str = "", verdict: str = "", streaming: str = "",
                 copy: str | None = None, lead: str = "") -> str:
    """The assistant's message: the speculative tokens, and beside them the plain run in compare mode.

    streaming: "spec" or "plain", the column still streaming: the message as a streamed frame shows it, left open
    after that column's last token (`open_tokens`, with the caret), no closing tag, note, verdict or copy row after
    it (they come with the final frame; a plain column not begun shows its title, its markup before the speculative
    column's and its place the second: `NEXT_COLUMN`). So each frame starts with the one before (the plain column's
    first frame aside), and gradio's queue sends what was added alone (`gradio.utils.diff`: an "append"), where every
    frame had sent the whole reply again; the page's HTML parser closes the open tags.
    copy: the reply's text, for a "Copy reply" button (`render_copy`). lead: a note known from the first frame (a
    chat's messages left out of the turn), the message's start in every frame, streamed or final, so it never moves.
    """
    end, out = f"{render_note(note)}{render_copy(copy)}", f'<div class="specui-out">{render_note(lead)}'
    if plain is None:
        if streaming:
            return f'{out}{open_tokens(spec, cursor=True)}'
        return f'{out}{render_tokens(spec)}{end}</div>'
    spec_head, plain_head = [f'<div class="specui-col-title">{escape_text(t)}</div>' for t in (spec_title, plain_title)]
    out += '<div class="specui-compare">'
    if streaming == "spec":  # the plain column to come: its title in its place, its markup before the spec column's
        return (f'{out}<div class="specui-col {NEXT_COLUMN}">{plain_head}</div>'
                f'<div class="specui-col">{spec_head}{open_tokens(spec, cursor=True)}')
    start = f'{out}<div class="specui-col">{spec_head}{render_tokens(spec)}</div><div class="specui-col">{plain_head}'
    if streaming:
        return f"{start}{open_tokens(plain, cursor=True)}"
    return f"{start}{render_tokens(plain)}</div></div>{verdict}{end}</div>"


def render_verdict(*, identical: bool | None, speedup: float | None, first_difference: int | None = None,
                   explanation: str = "") -> str:
    """The compare-mode result line: speedup ratio and, in greedy mode, the identical-output check
    (with `explanation`, e.g. a near-tie that reduced precision rounds either way, when they differ)."""
    parts = []
    if speedup is not None:
        why = f' title="{html.escape(SLOWER_WHY)}"' if shows_slower(speedup) else ""
        parts.append(f'<span class="specui-speedup"{why}>speedup {speedup_said(speedup)}</span>')
    if identical is True:
        parts.append('<span class="specui-identical">✓ identical output (greedy: speculative = plain)</span>')
    elif identical is False:
        where = f" at token {first_difference}" if first_difference is not None else ""
        why = f": {html.escape(explanation)}" if explanation else ""
        parts.append(f'<span class="specui-different">✗ outputs differ{where}{why}</span>')
    else:
        parts.append('<span class="specui-sampled">sampling: both runs are exact draws from the target, '
                     'so they may differ</span>')
    return f'<div class="specui-verdict">{" · ".join(parts)}</div>'


def legend_html() -> str:
    """The colour key shown above the chat."""
    samples = [(Kind.ACCEPTED, "accepted draft"), (Kind.RESAMPLED, "resampled"), (Kind.BONUS, "bonus"),
               (Kind.PLAIN, "plain (compare)"), (Kind.REJECTED, "rejected draft (toggle)")]
    items = "".join(f'<span class="tok tok-{k} legend-item" title="{html.escape(KIND_LABELS[k])}">'
                    f'{html.escape(t)}</span>' for k, t in samples)
    hint = ('<span class="legend-hint">hover or tap a token for p, q and its acceptance probability (keyboard: Tab '
            'to a reply, then the arrow keys)</span>')
    return f'<div class="specui-legend"><span class="legend-title">Tokens:</span>{items}{hint}</div>'


def render_race(lanes: Sequence[tuple[str, Sequence[TokenView], float]], *, nonce: int = 0) -> str:
    """Replay lanes at their measured pace: each token fades in at the engine time its round ended.

    lanes: (title, emitted tokens with time_s, total engine seconds). Pure CSS animation; a new
    `nonce` makes the HTML differ so the browser restarts the replay.
    """
    if not lanes:
        return ""
    longest = max(total for _, _, total in lanes) or 1.0
    rows = []
    for title, views, total in lanes:
        spans = "".join(token_span(v, style=f"animation-delay:{v.time_s:.3f}s")
                        for v in views if v.kind != Kind.REJECTED)
        width = 100.0 * total / longest
        rows.append(
            f'<div class="race-lane"><div class="race-label">{escape_text(title)}</div>'
            f'<div class="race-track"><div class="race-fill" '
            f'style="width:{width:.1f}%;animation-duration:{max(total, 0.01):.3f}s"></div></div>'
            f'<div class="specui-text race-text" style="{TEXT_STYLE}">{spans}</div></div>'
        )
    head = '<div class="race-head">Race replay at the measured pace (engine time, prefill included)</div>'
    return f'<div class="specui-race" data-nonce="{int(nonce)}">{head}{"".join(rows)}</div>'


def round_views(round_, text: Callable[[int], str], peek: Callable[[int], str], *, time_s: float,
                special: frozenset = frozenset()) -> list[TokenView]:
    """The views of one `specui.events.Round`: rejected drafts (if any) then the emitted tokens.

    text(id) adds an emitted token to the decoder and returns its text; peek(id) gives a rejected
    draft's text without adding it; `special`: the tokenizer's special ids (their views are marked).
    """
    views = []
    copied = COPIED if round_.copied else ""  # the model + lookup drafter
    # a round that drafted nothing (prompt lookup without a match, a budget's last token): its bonus is the target's
    undrafted = UNDRAFTED if not round_.drafted else ""
    for token in round_.emitted():
        if token.kind == Kind.RESAMPLED:  # the rejected draft and the discarded ones after it, first
            for d in round_.positions():
                if d.check != Check.ACCEPTED:
                    views.append(TokenView(
                        text=peek(d.token_id).removesuffix(PARTIAL),  # part of a character: shown as one
                        kind=Kind.REJECTED, p=d.target_prob, q=d.draft_prob,
                        accept=d.accept_prob, token_id=d.token_id, time_s=time_s, special=d.token_id in special,
                        note=" · ".join(filter(None, [REJECTED_HERE if d.check == Check.REJECTED
                                                      else DISCARDED if d.target_prob is not None
                                                      else NOT_NEEDED, copied]))))
        views.append(TokenView(text=text(token.token_id), kind=token.kind, p=token.target_prob, q=token.draft_prob,
                               accept=token.accept_prob, token_id=token.token_id, time_s=time_s,
                               special=token.token_id in special,
                               note={Kind.ACCEPTED: copied, Kind.BONUS: undrafted}.get(token.kind, "")))
    return views
