"""The stats line under the chat: HTML from `specui.runstats.RunStats` (the numbers live there), and the
arena's table (rows of text from a `specui.arena.Arena`; a drafter the arena skipped gets a row that says so)."""

from __future__ import annotations

import html

from specui.arena import k_said, label
from specui.runstats import RunStats, speedup
from specui.text import SLOWER_WHY, fmt, shows_slower, speedup_said

CPU_TREE_NODES = (7, 11)  # the tree budgets that pay on a CPU (docs/performance.md): more nodes, slower rounds

HINTS = {
    "acceptance rate": "accepted draft tokens / drafted tokens, every draft counted: those after a rejection (never "
                       "judged) and those a confidence stop let through. Not the fitted α of the theoretical speedup, "
                       "the per-token acceptance of the paper's model that gives the measured tokens per round",
    "acceptance along the path": "token trees: accepted nodes / the nodes the target judged along each round's path "
                                 "(its accepted nodes, and the child rejected where the walk stopped): how often the "
                                 "walk went one level deeper. Not a share of every drafted node: a round keeps one "
                                 "path of its tree, and the rest of the nodes are its cost",
    "mean accepted length": "tokens emitted per target forward, bonus included (plain decoding = 1.0)",
    "speculative": "tokens / engine seconds (prefill + draft + verify; time spent drawing the page is left out)",
    "plain": "the target alone, same prompt, settings and seed, timed after the speculative run",
    "speedup": "speculative tokens/s / plain tokens/s (turn Compare on to measure it)",
    "theoretical speedup": "(1 - α^(K+1)) / ((1 - α)(K c + 1)), Leviathan et al. 2023, Theorem 3.8; K as chosen "
                           "(adaptive K: the one most rounds asked for); α, the paper's per-token acceptance (each "
                           "draft accepted independently with probability α), fitted so that (1 - α^(K+1)) / (1 - α) "
                           "is the measured tokens per round, each round at the K it was asked (a last round the token "
                           "budget let ask fewer is not read as rejections): not the acceptance rate, which counts "
                           "every drafted token, those after a rejection included; c = seconds per drafted token / "
                           "seconds of one target forward, the plain run's (Compare on), else this run's verify "
                           "forwards of K+1 tokens (costlier than one token's on a CPU: c then reads low, the theory "
                           "high); none for token trees (the theorem counts a chain of K drafts)",
    "tree": f"the most nodes a round's token tree held: each is a row of the target's verify forward. Tree nodes 0 is "
            f"the static tree, width + width² + … to depth K (126 at width 2 and K 6); on a CPU a dynamic tree of "
            f"{CPU_TREE_NODES[0]} to {CPU_TREE_NODES[1]} nodes pays best (a verify of up to {CPU_TREE_NODES[1] + 1} "
            f"tokens reads each weight once)",
    "seed": "the seed this sampled run took (the one drawn when Seed is -1): typed in Seed, ↻ under the reply runs "
            "its message again to the same tokens (sent again as a new message, it follows this reply: another "
            "context, other tokens)",
    "speedup below 1×": f"speculative tokens/s / plain tokens/s, below 1× this run: {SLOWER_WHY}",
    "tokens": "new tokens, target forwards and engine seconds; the prompt's time is its new tokens' alone when a "
              "chat's earlier turns were kept in the target's cache (kept: not read again)",
}


def stats_html(spec: RunStats | None, plain: RunStats | None = None, *, status: str = "", seed: int | None = None
               ) -> str:
    """The stats line under the chat (numbers only; `status` is escaped), with a sampled run's `seed` (None: a greedy
    run, which reads none). Each name has a tooltip."""
    items, tips = [], {}  # tips: the `HINTS` key of a figure's tooltip where it is not the figure's name
    if spec is not None:
        rate = fmt(spec.acceptance_rate, ".1%")
        items += [("acceptance along the path" if spec.trees else "acceptance rate", rate),
                  ("mean accepted length", f"{fmt(spec.mean_accepted_length, '.2f')} tokens/round"),
                  ("speculative", f"{fmt(spec.tokens_per_s, '.1f')} tokens/s")]
        ratio = speedup(spec, plain)
        if plain is not None:
            items.append(("plain", f"{fmt(plain.tokens_per_s, '.1f')} tokens/s"))
        items.append(("speedup", speedup_said(ratio)))
        if shows_slower(ratio):  # the why in its tooltip
            tips["speedup"] = "speedup below 1×"
        theory = spec.theory
        if theory is not None:
            items.append(("theoretical speedup", f"{fmt(theory.speedup, '.2f×')} (fitted α={fmt(theory.alpha, '.2f')}, "
                                                 f"K={theory.k}, c={fmt(theory.c, '.2f')})"))
        else:
            items.append(("theoretical speedup", "– (token trees)" if spec.trees else "–"))
        if spec.trees:
            items.append(("tree", tree_note(spec.tree_nodes)))
        kept = f", {spec.reused_tokens} kept" if spec.reused_tokens else ""
        prompt = f"prompt {fmt(spec.prefill_s, '.2f')} s{kept}"
        items.append(("tokens", f"{spec.tokens} in {spec.rounds} rounds, {fmt(spec.seconds, '.2f')} s ({prompt})"))
        if seed is not None:
            items.append(("seed", str(seed)))
    body = "".join(f'<span class="stat" title="{html.escape(HINTS.get(tips.get(k, k), k))}"><span class="stat-name">'
                   f'{html.escape(k)}</span> <span class="stat-value">{html.escape(v)}</span></span>' for k, v in items)
    head = f'<span class="stat-status">{html.escape(status)}</span>' if status else ""
    if not body and not head:
        head = '<span class="stat-status">Send a prompt to see acceptance, tokens/s and speedup.</span>'
    return f'<div class="specui-stats">{head}{body}</div>'


def tree_note(nodes: int) -> str:
    """The stats line's word on a token-tree run's size: the most nodes a round drafted, and, past the budgets that pay
    on a CPU, what does (a static tree of width 2 holds 126 nodes at K 6: several times slower than a chain there)."""
    said = f"up to {nodes} nodes a round"
    lo, hi = CPU_TREE_NODES
    return said if nodes <= hi else f"{said}: on a CPU, Tree nodes {lo} to {hi} pay best"


ARENA_HEADERS = ["drafter", "K", "acceptance rate", "mean accepted length", "c (draft cost)", "tokens/s", "speedup",
                 "identical to plain"]


def arena_rows(arena) -> list[list[str]]:
    """The arena's table: one row per contestant (plain first), every number formatted by `fmt`; K is the K it raced
    at as chosen (its own K from the preset, or the K slider's; adaptive K: the one most rounds asked for), as the
    stats line's theoretical speedup gives it, even where the token budget cut every round short; "≤ K" where a
    confidence stop let its rounds draft fewer (`arena.k_said`, as the benchmark's table writes "<=K"); a token tree's
    rate reads "along the path", the nodes judged along each round's path, as the stats line names it."""
    rows = []
    for s in arena.standings if arena is not None else ():
        same = "reference" if s.name == "plain" else {True: "yes", False: "NO"}.get(s.identical, "–")
        rate = fmt(s.stats.acceptance_rate, ".3f") + (" along the path" if s.stats.trees else "")  # as the stats line
        rows.append([s.label, k_said(s.k, s.confidence, s.name), rate, fmt(s.stats.mean_accepted_length, ".2f"),
                     fmt(s.stats.cost_ratio, ".3f"), fmt(s.stats.tokens_per_s, ".1f"), fmt(s.speedup, ".2f×"), same])
    for name in arena.skipped if arena is not None else ():  # never run as chains: no numbers, the reason instead
        rows.append([f"{label(name)} (skipped)", *["–"] * (len(ARENA_HEADERS) - 2),
                     "skipped: cannot draft token trees"])
    return rows
