"""The Teach tab's HTML and words: a round as a table (`render_step`), the measured numbers, an
experiment's points, and the help texts. Pure functions of `specui.lesson` records, no gradio.

Every model or user string is escaped before it becomes HTML. Styles are classes of style.css.
"""

from __future__ import annotations

from specui import lesson, metrics
from specui.drafters.registry import PROMPT_LOOKUP
from specui.events import Check, Kind
from specui.lesson_steps import DraftCheck, Step
from specui.text import fmt, fmt_prob
from specui.ui.render import TokenView, escape_text, token_span

TEACH_K_MAX = 8  # the Teach tab's K slider: enough for a lesson, small enough to read a round


def slider_best(alpha: float | None, c: float | None, best_k: int | None, best_speedup: float | None
                ) -> tuple[int | None, float | None]:
    """The best K this tab's K slider can set, with its theory speedup: the theory's own (`best_k`, searched over K
    1..16) where the slider reaches it, else the best of K 1..TEACH_K_MAX at `alpha` and `c`."""
    if best_k is None or best_k <= TEACH_K_MAX or alpha is None or c is None:
        return best_k, best_speedup
    here = metrics.best_k(alpha, c, k_max=TEACH_K_MAX)
    return here, metrics.theoretical_speedup(alpha, here, c)


def best_k_said(alpha: float | None, c: float | None, best_k: int | None, best_speedup: float | None) -> str:
    """A run's best K as this tab can set it: the theory's (it searches K 1..16) with its speedup where the K slider
    reaches it; else the best the slider reaches (`slider_best`), with the theory's beside it, to try in the Chat tab
    (K to 64)."""
    if best_k is None:
        return "–"
    here, speedup = slider_best(alpha, c, best_k, best_speedup)
    if here == best_k:
        return f"{best_k} ({fmt(best_speedup, '.2f×')})"
    return (f"{here} ({fmt(speedup, '.2f×')}; the theory's best, {best_k} at "
            f"{fmt(best_speedup, '.2f×')}, is past this tab's K {TEACH_K_MAX}: try it in the Chat tab)")


CONTEXT_CHARS = 1200  # the context shown is cut to its last characters
DEFAULT_PROMPT = "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n"
SWEEP_KS = range(1, 9)
TEMPERATURES = (0.0, 0.3, 0.6, 1.0, 1.5)
INTRO = """## Teaching mode: one round at a time
Decode a prompt, then press **Next round** (or **Play**) to walk through it. Every number is the engine's own,
for this seed: nothing is recomputed for display."""
STEP_HELP = """**What happens in one round**

1. The **draft** proposes K tokens, sampling each from its own distribution **q**.
2. The **target** scores all K in *one* forward pass: **p** for each.
3. A draft x is kept when a uniform draw **u < p(x)/q(x)**, which happens with probability **min(1, p/q)**.
   A draft the target likes at least as much as the draft did is always kept.
4. The **first rejection ends the round**. The target then draws a replacement from the **residual**
   norm(max(0, p − q)): the probability the draft under-proposed. This step makes the text an exact sample
   from the target. Later drafts are thrown away without a check.
5. If all K drafts pass, the target adds a **bonus** token drawn from its own p one position further.

**Why the text is exact.** At one position the target alone writes token x with probability p(x). Here x is
written either as a kept draft, with probability q(x) · min(1, p(x)/q(x)) = min(p(x), q(x)), or after a rejection.
A draft is rejected with probability r = 1 − Σ min(p, q), summed over every token (α, below, is Σ min(p, q) on
average); the residual max(0, p − q) = p − min(p, q) also sums to r, so norm(max(0, p − q)) then gives x with
probability (p(x) − min(p(x), q(x))) / r. The two ways add up to p(x), whatever q is: a poor draft is rejected more
often, which costs speed, never exactness.

One round costs one target forward and gives 1 to K+1 tokens. In **greedy** mode (temperature 0) a draft is
kept when it equals the target's most likely token, and a rejected one is replaced by that token.
Prompt lookup drafts by copying text: its q is 1 for the copied token. The draft model + lookup and the early
exit + lookup copy where the text repeats (such rounds say so) and ask the draft model or the early exit elsewhere."""
THEORY_HELP = """**Theory beside measurement** (Leviathan et al. 2023)

* **α**: the chance the target accepts a draft token. Fitted here so that the rounds' expected tokens, each round
  at the K it was asked, equal the measured ones (the same α the chat tab and the benchmark use).
* **Tokens per round** = (1 − α^(K+1)) / (1 − α): between 1 (α = 0) and K+1 (α = 1).
* **c**: the cost of one draft forward relative to one target forward, measured from this run's timings.
* **Speedup** = (1 − α^(K+1)) / ((1 − α)(Kc + 1)): a longer draft pays off only if α is high and c small.
* The red diamonds are this run; the green star is the best K for its α and c. On the left α is fitted to the
  measured tokens per round, each round at the K it was asked, so the diamond sits on its K's curve
  by construction where every round asked K. With the token budget nearly spent the last rounds ask fewer: they
  count at their own K (not as rejections), and the diamond, their short rounds in its average, sits below the
  curve of full rounds; so it does where an end of text inside an accepted block cut the last round's tokens
  (α counts what that round's check accepted).
  The **acceptance rate** (accepted / drafted) is usually lower than α: the drafts after a rejection count as
  drafted though never judged. Rounds whose drafter proposed fewer than K (a confidence stop, prompt lookup without
  a match) pull α down instead, so such a run can show a rate above it.
  On the right, a diamond below its curve is real cost the formula leaves out: a (K+1)-token verify that costs
  more than one plain forward ("verify cost" below), sampling, cache trims, Python. A diamond above it paid for
  less than the formula counts: rounds that drafted fewer than K (a confidence stop) ran fewer draft forwards than
  its Kc, or the plain run was timed while the machine was busier (Decode again with the same seed: the timings
  move, the tokens do not)."""
SWEEP_HELP = """**K sweep.** The same prompt decoded with K = 1…8, each timed against plain decoding run just before
and just after it (the target alone, same seed; the faster of the two), so a busy machine slows both sides
alike. Small K wastes the draft's good guesses; large K wastes draft forwards on tokens that get
thrown away. The dotted line is the theory at the sweep's α and c. Temperature 0 gives the cleanest sweep:
every K then writes exactly the same text, so only the speed differs."""
TEMP_HELP = """**Temperature.** Higher temperature flattens both p and q; they overlap differently and acceptance
moves. The blue line is the mean of min(1, p/q) over judged drafts: since x is drawn from q, it estimates
α = Σ min(p, q) directly. At temperature 0 (greedy) there is no p/q to take: a draft is kept when it is the
target's most likely token, so the blue square there is how often the draft's token is the target's argmax."""
DRAFTERS_HELP = """**Weaker drafters.** The draft model, the same draft with noise added to its weights, and prompt
lookup (copying earlier text, no model), each timed against plain decoding run just before and just after it
(the faster of the two). A worse guesser is accepted less often and the speedup collapses,
but the output stays an exact sample from the target: speculative decoding trades speed, never quality.
Prompt lookup proposes only where the text repeats itself; with nothing to copy it drafts nothing (α shows –)."""

VERIFY_HELP = """**What verification costs.** Theorem 3.8 assumes that checking K+1 tokens in one target forward
costs as much as one token: the weights are read once either way. This times the target's forward of
n = 1…16 new tokens on this machine (after the prompt's tokens, median of 3) and divides by one token. Where the
curve stays near 1, speculation pays in full; where it climbs (small models on a CPU do real work per row),
each extra drafted token costs verify time too, and the best K is smaller than the theorem says. On a CPU the
dotted *floor* is what the rows' multiply-adds alone cost at the fastest float32 rate measured on this machine:
one token's forward waits on other work (reading its weights), so a few more rows can ride along for free, but
past the floor's bend every row costs its arithmetic, and no exact kernel verifies for less. Where the measured
curve climbs well above the floor, the kernels do work the floor does not count (rebuilding 4-bit weights)."""

BUDGET_HELP = """**Where the time goes.** Theorem 3.8 counts model forwards only: one target forward per round and
K draft forwards of cost c. This decodes the prompt with the target alone and speculatively (your settings, EOS
ignored), times each model's one-token forward alone, and splits both runs per generated token: the forwards
the theorem counts (solid) and what it does not (hatched): the verify's extra rows, sampling and bookkeeping,
forwards slower than alone, prefill. The **efficiency** is the measured speedup ÷ the theorem's: the table takes
those parts away one at a time, until only what the theorem counts is left and the efficiency is 1."""


_num = fmt_prob


def render_step(run: lesson.TeachingRun | None, index: int) -> str:
    """One round as HTML: the context, the drafts table, the outcome and the tokens it added."""
    if run is None or not run.steps:
        return ('<div class="teach-step teach-empty">Press <b>Decode</b> or <b>Next round ▶</b> to decode the '
                'prompt above and step into round 1.</div>')
    index = max(0, min(index, len(run.steps) - 1))
    step = run.steps[index]
    prompt_text = run.steps[0].context
    generated = step.context[len(prompt_text):]
    shown_prompt = prompt_text
    if len(prompt_text) + len(generated) > CONTEXT_CHARS:
        keep = max(0, CONTEXT_CHARS - len(generated))
        shown_prompt = "…" + prompt_text[len(prompt_text) - keep:] if keep else "…"
        generated = generated[-CONTEXT_CHARS:]
    mode = "greedy" if step.greedy else f"sampling, temperature {fmt(run.decode.temperature, 'g')}"
    if run.decode.repetition_penalty != 1:  # p is the penalised target's: what the check compares q with
        mode += f", repetition penalty {fmt(run.decode.repetition_penalty, 'g')}"
    copied = " · draft copied from the context (q one-hot)" if step.copied else ""
    head = (f'<div class="teach-head">Round <span class="teach-round">'
            f'{index + 1}</span> of {len(run.steps)} · K = {asked(run, step)} · {escape_text(mode)}{copied}'
            f'{stopped(run, step)}</div>')
    context = (f'<div class="teach-label">Context (prompt in grey, then the '
               f'text so far)</div><div class="teach-context specui-text">'
               f'<span class="teach-prompt-text">{escape_text(shown_prompt)}</span>{escape_text(generated)}</div>')
    return (f'<div class="teach-step" data-round="{index + 1}" data-rounds="{len(run.steps)}">{head}{context}'
            f'{drafts_table(step)}{outcome(step)}{added(step)}</div>')


def asked(run: lesson.TeachingRun, step: Step) -> str:
    """The K chosen, and the drafts this round asked for where the token budget allowed fewer (adaptive K: the
    round's own K)."""
    k = run.decode.num_draft_tokens
    if run.decode.adaptive or step.num_draft_tokens >= k:
        return str(step.num_draft_tokens)
    left = step.num_draft_tokens + 1
    return f"{k}, {left - 1} asked ({left} token{'s' if left > 1 else ''} left to generate, the round's own included)"


def stopped(run: lesson.TeachingRun, step: Step) -> str:
    """The head's note on a round that drafted fewer than K because the draft's confidence fell below the stop."""
    stop, drafted = run.decode.draft_confidence, len(step.drafts)
    if not stop or step.copied or run.decode.drafter == PROMPT_LOOKUP or not 0 < drafted < step.num_draft_tokens:
        return ""
    return (f' · <span class="teach-stopped">drafted {drafted} of {step.num_draft_tokens}: the product of the '
            f"draft's top probabilities fell below the confidence stop {fmt(stop, 'g')}</span>")


def drafts_table(step: Step) -> str:
    if not step.drafts:
        why = ("only one token was left to generate" if step.num_draft_tokens == 0
               else "prompt lookup found no earlier match")
        return (f'<div class="teach-nodraft">No drafts this round ({why}), so the target '
                'decoded one token itself.</div>')
    u_head = "u" if not step.greedy else "u (greedy: none)"
    rule = "u &lt; p/q?" if not step.greedy else "draft = target's top token?"
    accept = "min(1, p/q)" if not step.greedy else "kept (1) or not (0)"  # greedy: the argmax rule's 1 or 0
    heads = ["#", "draft token", "q(x) draft", "p(x) target", accept, u_head, rule]
    head = "".join(f'<th class="num">{h}</th>' for h in heads)
    # the column's head asks the rule, and the outcome below says the rejection's numbers: a verdict's "(u < p/q)" more
    # ran the table 74 px past a 1024 x 768 projector's step view at 150%, the verdicts cut off at their right
    verdicts = {Check.ACCEPTED: "✓ accepted", Check.REJECTED: "✗ rejected", Check.DISCARDED: "– not checked"}
    rows, unused = [], ' <span class="teach-unused">(unused)</span>'
    for d in step.drafts:
        verdict = verdicts[d.verdict]
        data = (f'data-verdict="{d.verdict}" data-token="{d.token_id}" data-q="{d.q!r}" data-p="{_repr(d.p)}" '
                f'data-accept="{_repr(d.accept_prob)}" data-u="{_repr(d.u)}"')
        rows.append(
            f'<tr class="teach-draft" {data}><td class="num">{d.position}</td>'
            f'<td class="text">{escape_text(repr(d.text))}</td><td class="num">{_num(d.q)}</td>'
            f'<td class="num">{_num(d.p)}</td><td class="num">{_num(judged(d))}</td>'
            f'<td class="num">{_num(d.u)}{unused if d.verdict == Check.DISCARDED and d.u is not None else ""}</td>'
            f'<td class="num verdict-{d.verdict}">{verdict}</td></tr>')
    note = ('<div class="teach-key">Greedy: a draft is kept when it is the target\'s most likely token; p and q are '
            'the softmax at temperature 1 (prompt lookup\'s q is 1), shown for reference: no draw uses them.</div>'
            if step.greedy else
            '<div class="teach-key">The round draws a u for every draft at once; a draft after the first rejection '
            'is never checked, so its u is never read (shown "unused").</div>'
            if any(d.verdict == Check.DISCARDED and d.u is not None for d in step.drafts) else "")
    return (f'<table class="teach-table teach-drafts">'
            f'<thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>{note}')


def judged(d: DraftCheck) -> float | None:
    """The acceptance probability shown: none for a draft after the rejection, which was never judged (greedy
    rounds carry a 0 there)."""
    return None if d.verdict == Check.DISCARDED else d.accept_prob


def _repr(x: float | None) -> str:
    """A number for a data attribute, exactly (repr round-trips floats); empty for none (never judged or read)."""
    return "" if x is None else repr(x)


def outcome(step: Step, *, chart: bool = True) -> str:
    """What the round decided, in words (`chart`: the residual's chart is shown below)."""
    n, k = step.num_accepted, len(step.drafts)
    final = step.final
    parts = []
    if k:
        parts.append(f"Accepted {n} of {k} drafts.")
    rejected = step.rejected
    if rejected is not None:
        if step.greedy:
            parts.append(f"Draft {rejected.position} {escape_text(repr(rejected.text))} is not the target's top token: "
                         "the round stops there.")
        else:
            parts.append(f"Draft {rejected.position} {escape_text(repr(rejected.text))} was rejected: "
                         f"u = {_num(rejected.u)} ≥ p/q = {_num(rejected.accept_prob)}. The round stops there.")
    if final is not None:
        token = escape_text(repr(final.text))
        if final.kind == Kind.RESAMPLED and step.greedy:
            parts.append(f"The target's top token {token} (p = {_num(final.p)}) replaces it.")
        elif final.kind == Kind.RESAMPLED:
            where = " (chart below)" if chart else ""
            parts.append(f"The target drew {token} from the residual norm(max(0, p − q)){where}; "
                         f"its p = {_num(final.p)}.")
        elif k and step.greedy:  # greedy draws nothing: the bonus is the target's argmax
            parts.append(f"Every draft passed, so the target adds a bonus token {token}, its top token at "
                         f"position {k + 1} (p = {_num(final.p)}).")
        elif k:
            parts.append(f"Every draft passed, so the target adds a bonus token {token} drawn from its own p at "
                         f"position {k + 1} (p = {_num(final.p)}).")
        elif step.greedy:
            parts.append(f"The target's top token is {token} (p = {_num(final.p)}).")
        else:
            parts.append(f"The target drew {token} from p (p = {_num(final.p)}).")
    else:
        parts.append("An end-of-text token among the accepted drafts ended the generation.")
    return f'<div class="teach-outcome">{" ".join(parts)}</div>'


def added(step: Step, *, verb: str = "adds") -> str:
    """The round's tokens, each quoted as in the table (a line break or a space alone would not show), coloured by
    origin and told apart by their underline too."""
    spans = " ".join(token_span(TokenView(text=e.text, kind=e.kind, p=e.p, q=e.q, token_id=e.token_id),
                                shown=repr(e.text)) for e in step.emitted)
    word = "token" if len(step.emitted) == 1 else "tokens"
    return (f'<div class="teach-added">This round {escape_text(verb)} {len(step.emitted)} {word}: '
            f'<span class="specui-text">'
            f'{spans}</span> <span class="teach-key">(green accepted, red underlined resampled, '
            f'blue dotted underline bonus)</span></div>')



def render_measured(run: lesson.TeachingRun | None) -> str:
    """The measured numbers under the theory charts."""
    if run is None:
        return '<div class="teach-measured">No run yet.</div>'
    m = run.measured

    def item(name, value, hint):
        return (f'<span class="stat" title="{escape_text(hint)}"><span class="stat-name">'
                f'{escape_text(name)}</span> <b>{escape_text(value)}</b></span>')

    items = [item("α (fitted)", fmt(m.alpha), "the α whose expected tokens per round equal the measured ones, "
                                              "each round at the K it was asked; "
                                              "the theory curves, the chat tab and the benchmark use it"),
             item("acceptance rate (accepted / drafted)", fmt(m.acceptance_rate), "the usual acceptance rate"),
             item("tokens per round", fmt(m.tokens_per_round, ".2f"), "bonus included"),
             item("theory tokens per round (α is fitted to match)", fmt(m.theory_tokens_per_round, ".2f"),
                  "(1 − α^(K+1)) / (1 − α) at the fitted α: the measured tokens per round, by construction, but for "
                  "rounds the token budget let ask fewer than K or an end of text cut short (a full round gives "
                  "these)"),
             item("c", fmt(m.cost_ratio), "seconds per drafted token / seconds per plain target forward"),
             item("verify cost", fmt(m.verify_cost, ".2f×"),
                  "seconds of one (K+1)-token verify forward / one plain target forward (the theorem assumes 1)"),
             item("measured speedup", fmt(m.speedup, ".2f×"), "tokens/s / plain tokens/s, same prompt and seed: one "
                  "run of each, timed once, so a busy machine moves it from run to run ('Where the time goes' keeps "
                  "the median of three of each)"),
             item("theory speedup", fmt(m.theory_speedup, ".2f×"), "Theorem 3.8 at the measured α, K, c"),
             item("best K", best_k_said(m.alpha, m.cost_ratio, m.best_k, m.best_k_speedup),
                  f"the K that maximises Theorem 3.8 at the measured α and c, of those this tab's K slider takes (1 to "
                  f"{TEACH_K_MAX}); where the theory's (K 1 to 16) lies past them, it is said beside")]
    return f'<div class="teach-measured specui-stats">{"".join(items)}</div>'


def seed_note(seed: str) -> str:
    """The line under an experiment's table: the seed its runs drew with, as `request.seed_words` says it (-1: the
    one drawn; a greedy run reads none), so that a run with -1 can be run again; "" for none given."""
    if not seed:
        return ""
    again = ": type it in the Seed box to run this again" if seed.startswith("seed ") else ""
    # the page's text size, not a chart key's faint 12 px (.teach-key): a class reads it off a projector to type it
    return f'<p class="teach-seed">{escape_text(seed[:1].upper() + seed[1:] + again)}.</p>'


def render_points(points, *, seed: str = "") -> str:
    """An experiment's points as a table, and the seed its runs drew with (`seed_note`). Points none of which was
    timed against plain decoding (the temperature sweep's) have no speedup column, and a line says why."""
    if not points:
        return ""
    timed = any(p.speedup is not None for p in points)  # a column of "–" alone read as a failed measurement
    heads = ["run", "α", "acceptance rate", "tokens/round", "tokens/s"] + (["speedup"] if timed else [])
    rows = "".join(
        f'<tr class="teach-point"><td class="text">{escape_text(p.label)}</td>'
        + "".join(f'<td class="num">{v}</td>' for v in (
            fmt(p.alpha), fmt(p.acceptance_rate), fmt(p.tokens_per_round, ".2f"),
            fmt(p.tokens_per_s, ".1f"), *([fmt(p.speedup, ".2f×")] if timed else []))) + "</tr>" for p in points)
    head = "".join(f'<th class="num">{h}</th>' for h in heads)
    untimed = ("" if timed else '<p class="teach-key">No speedup column: these runs measure acceptance and are not '
                                "timed against plain decoding.</p>")
    return (f'<table class="teach-table teach-points"><thead><tr>{head}</tr>'
            f'</thead><tbody>{rows}</tbody></table>{untimed}{seed_note(seed)}')


def render_verify_cost(curve: dict) -> str:
    """The verify-cost curve as a table: n, the forward's time, ÷ one token (and its arithmetic floor)."""
    floor = curve.get("floor_ratios") or [None] * len(curve["tokens"])
    rows = "".join(f'<tr class="teach-point"><td class="num">{n}</td><td class="num">{fmt(1e3 * sec, ".2f")} ms</td>'
                   f'<td class="num">{fmt(r, ".2f×")}</td>'
                   + (f'<td class="num">{fmt(f, ".2f×")}</td>' if f is not None else "") + "</tr>"
                   for n, sec, r, f in zip(curve["tokens"], curve["seconds"], curve["ratios"], floor))
    heads = ("n new tokens", "forward", "÷ one token") + (("floor",) if curve.get("floor_ratios") else ())
    head = "".join(f'<th class="num">{h}</th>' for h in heads)
    return f'<table class="teach-table teach-points"><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>'


def render_budget(budget: dict, *, seed: str = "") -> str:
    """The efficiency (measured / Thm 3.8) as the parts the theorem does not count are taken away in turn, and the
    seed its runs drew with (`seed_note`)."""
    rows = "".join(f'<tr class="teach-point"><td class="num">{fmt(step["efficiency"], ".2f")}</td>'
                   f'<td>{escape_text(step["without"])}</td></tr>' for step in budget["efficiency_steps"])
    head = '<th class="num">efficiency (measured ÷ Thm 3.8)</th><th>taking away</th>'
    note = (f'<p class="teach-key">{budget["tokens"]} tokens; one-token forwards alone: target '
            f'{fmt(budget["target_forward_ms"], ".2f")} ms, draft {fmt(budget["draft_forward_ms"], ".2f")} ms; '
            f'plain {fmt(budget["plain_total_ms_per_token"], ".2f")} ms and speculative '
            f'{fmt(budget["speculative_total_ms_per_token"], ".2f")} ms a token</p>')
    return (f'<table class="teach-table teach-points"><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>{note}'
            f'{seed_note(seed)}')
