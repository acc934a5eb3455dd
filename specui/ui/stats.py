"""The stats line under the chat: HTML from `specui.runstats.RunStats` (the numbers live there), and the
arena's table (rows of text from a `specui.arena.Arena`; a drafter the arena skipped gets a row that says so)."""

from __future__ import annotations

import html

from specui.arena import label
from specui.runstats import RunStats, speedup
from specui.text import fmt

HINTS = {
    "acceptance rate": "accepted draft tokens / drafted tokens",
    "mean accepted length": "tokens emitted per target forward, bonus included (plain decoding = 1.0)",
    "speculative": "tokens / engine seconds (prefill + draft + verify; time spent drawing the page is left out)",
    "plain": "the target alone, same prompt, settings and seed, timed after the speculative run",
    "speedup": "speculative tokens/s / plain tokens/s (turn Compare on to measure it)",
    "theoretical speedup": "(1 - α^(K+1)) / ((1 - α)(K c + 1)), Leviathan et al. 2023, Theorem 3.8; K as chosen "
                           "(adaptive K: the one most rounds asked for), α from the "
                           "measured tokens per round, c = draft cost / target cost measured in this run; none for "
                           "token trees (the theorem counts a chain of K drafts)",
    "tokens": "new tokens, target forwards and engine seconds; the prompt's time is its new tokens' alone when a "
              "chat's earlier turns were kept in the target's cache (kept: not read again)",
}


def stats_html(spec: RunStats | None, plain: RunStats | None = None, *, status: str = "") -> str:
    """The stats line under the chat (numbers only; `status` is escaped). Each name has a tooltip."""
    items = []
    if spec is not None:
        rate = fmt(spec.acceptance_rate, ".1%")
        items += [("acceptance rate", rate),
                  ("mean accepted length", f"{fmt(spec.mean_accepted_length, '.2f')} tokens/round"),
                  ("speculative", f"{fmt(spec.tokens_per_s, '.1f')} tokens/s")]
        ratio = speedup(spec, plain)
        if plain is not None:
            items.append(("plain", f"{fmt(plain.tokens_per_s, '.1f')} tokens/s"))
        items.append(("speedup", fmt(ratio, ".2f×")))
        theory = spec.theory
        if theory is not None:
            items.append(("theoretical speedup", f"{fmt(theory.speedup, '.2f×')} (fitted α={fmt(theory.alpha, '.2f')}, "
                                                 f"K={theory.k}, c={fmt(theory.c, '.2f')})"))
        else:
            items.append(("theoretical speedup", "– (token trees)" if spec.trees else "–"))
        kept = f", {spec.reused_tokens} kept" if spec.reused_tokens else ""
        prompt = f"prompt {fmt(spec.prefill_s, '.2f')} s{kept}"
        items.append(("tokens", f"{spec.tokens} in {spec.rounds} rounds, {fmt(spec.seconds, '.2f')} s ({prompt})"))
    body = "".join(f'<span class="stat" title="{html.escape(HINTS.get(k, k))}"><span class="stat-name">{html.escape(k)}'
                   f'</span> <span class="stat-value">{html.escape(v)}</span></span>' for k, v in items)
    head = f'<span class="stat-status">{html.escape(status)}</span>' if status else ""
    if not body and not head:
        head = '<span class="stat-status">Send a prompt to see acceptance, tokens/s and speedup.</span>'
    return f'<div class="specui-stats">{head}{body}</div>'


ARENA_HEADERS = ["drafter", "K", "acceptance rate", "mean accepted length", "c (draft cost)", "tokens/s", "speedup",
                 "identical to plain"]


def arena_rows(arena) -> list[list[str]]:
    """The arena's table: one row per contestant (plain first), every number formatted by `fmt`; K is the K it raced
    at as chosen (its own K from the preset, or the K slider's; adaptive K: the one most rounds asked for), as the
    stats line's theoretical speedup gives it, even where the token budget cut every round short."""
    rows = []
    for s in arena.standings if arena is not None else ():
        same = "reference" if s.name == "plain" else {True: "yes", False: "NO"}.get(s.identical, "–")
        rows.append([s.label, str(s.k) if s.k else "–",
                     fmt(s.stats.acceptance_rate, ".3f"), fmt(s.stats.mean_accepted_length, ".2f"),
                     fmt(s.stats.cost_ratio, ".3f"), fmt(s.stats.tokens_per_s, ".1f"), fmt(s.speedup, ".2f×"), same])
    for name in arena.skipped if arena is not None else ():  # never run as chains: no numbers, the reason instead
        rows.append([f"{label(name)} (skipped)", *["–"] * (len(ARENA_HEADERS) - 2),
                     "skipped: cannot draft token trees"])
    return rows
