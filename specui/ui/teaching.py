"""Teaching mode: the "Teach" tab, built inside a caller's `gr.Blocks` by `teaching_tab(showcase)`.

A teacher decodes one prompt, then steps through it a round at a time (#step-next, or auto-play with
a speed control): the context, the K drafts with q(x), p(x), min(1, p/q), the uniform draw u and the
verdict, the residual distribution at a rejection, the bonus token after full acceptance. Beside it
the theory (eq. 1 and Theorem 3.8 over alpha for several K) with this run's measured point and the
best K, a JSON export of the run, and three experiments: a K sweep, a temperature sweep and weaker
drafters. Every number shown comes from the engine's `Round` records (`specui.teach`).

Element ids: #teach-prompt #teach-preset #teach-drafter #teach-k #teach-temperature #teach-max-new-tokens
#teach-seed #step-start #step-prev #step-next #step-play #step-speed #step-status #step-view
#step-residual #teach-theory-tokens #teach-theory-speedup #teach-measured #teach-export #sweep-run
#sweep-chart #sweep-table #temp-run #temp-chart #temp-table #drafters-run #drafters-noise
#drafters-chart #drafters-table. Every model or user string is escaped before it becomes HTML.
"""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
import time
from pathlib import Path

import gradio as gr

from specui import teach
from specui.ui import teach_charts
from specui.ui.render import TokenView, escape_text, token_span
from specui.ui.session import DRAFTER_CHOICES, Settings, SettingsError

log = logging.getLogger("specui.ui")
CONTEXT_CHARS = 1200  # the context shown is cut to its last characters
DEFAULT_PROMPT = "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n"
SWEEP_KS = range(1, 9)
TEMPERATURES = (0.0, 0.3, 0.6, 1.0, 1.5)
CELL = "padding:3px 8px;border-bottom:1px solid rgba(128,128,128,0.25);text-align:right;font-variant-numeric:tabular-nums"
TEXT_CELL = "padding:3px 8px;border-bottom:1px solid rgba(128,128,128,0.25);font-family:var(--font-mono, monospace);white-space:pre"
VERDICT_STYLE = {"accepted": "color:#15803d;font-weight:600", "rejected": "color:#b91c1c;font-weight:600",
                 "discarded": "opacity:0.55"}

INTRO = """## Teaching mode: one round at a time
Decode a prompt, then press **Next round** (or **Play**) to walk through it. Every number is the engine's own,
for this seed: nothing is recomputed for display."""
STEP_HELP = """**What happens in one round**

1. The **draft** proposes K tokens, sampling each from its own distribution **q**.
2. The **target** scores all K in *one* forward pass: **p** for each.
3. Token i is kept when a uniform draw **u < p(x)/q(x)**, which happens with probability **min(1, p/q)**.
   A draft the target likes at least as much as the draft did is always kept.
4. The **first rejection ends the round**. The target then draws a replacement from the **residual**
   norm(max(0, p − q)): the probability the draft under-proposed. This step makes the text an exact sample
   from the target. Later drafts are thrown away without a check.
5. If all K drafts pass, the target adds a **bonus** token drawn from its own p one position further.

One round costs one target forward and gives 1 to K+1 tokens. In **greedy** mode (temperature 0) a draft is
kept when it equals the target's most likely token, and a rejected one is replaced by that token.
Prompt lookup drafts by copying text: its q is 1 for the copied token."""
THEORY_HELP = """**Theory beside measurement** (Leviathan et al. 2023)

* **α**: the chance the target accepts a draft token. Measured here as accepted drafts / drafts the target
  judged (drafts after a rejection are never judged).
* **Tokens per round** = (1 − α^(K+1)) / (1 − α): between 1 (α = 0) and K+1 (α = 1).
* **c**: the cost of one draft forward relative to one target forward, measured from this run's timings.
* **Speedup** = (1 − α^(K+1)) / ((1 − α)(Kc + 1)): a longer draft pays off only if α is high and c small.
* The red diamonds are this run; the green star is the best K for its α and c. On the left, a diamond off its
  curve means acceptances were not independent coin flips (easy stretches, hard stretches). On the right,
  a diamond below its curve is real cost the formula leaves out: a (K+1)-token verify that costs more than one
  plain forward ("verify cost" below), sampling, cache trims, Python."""
SWEEP_HELP = """**K sweep.** The same prompt decoded with K = 1…8, each timed against plain decoding (the target
alone, same seed). Small K wastes the draft's good guesses; large K wastes draft forwards on tokens that get
thrown away. The dotted line is the theory at the sweep's α and c. Temperature 0 gives the cleanest sweep:
every K then writes exactly the same text, so only the speed differs."""
TEMP_HELP = """**Temperature.** Higher temperature flattens both p and q; they overlap differently and acceptance
moves. The blue line is the mean of min(1, p/q) over judged drafts: since x is drawn from q, it estimates
α = Σ min(p, q) directly."""
DRAFTERS_HELP = """**Weaker drafters.** The draft model, the same draft with noise added to its weights, and prompt
lookup (copying earlier text, no model). A worse guesser is accepted less often and the speedup collapses,
but the output stays an exact sample from the target: speculative decoding trades speed, never quality.
Prompt lookup proposes only where the text repeats itself; with nothing to copy it drafts nothing (α shows –)."""


def _num(x: float | None) -> str:
    if x is None:
        return "–"
    return f"{x:.4f}" if x == 0 or abs(x) >= 1e-3 else f"{x:.2e}"


def render_step(run: teach.TeachingRun | None, index: int) -> str:
    """One round as HTML: the context, the drafts table, the outcome and the tokens it added."""
    if run is None or not run.steps:
        return '<div class="teach-step teach-empty">Press <b>Decode</b> to run a prompt, then <b>Next round</b>.</div>'
    index = max(0, min(index, len(run.steps) - 1))
    step = run.steps[index]
    prompt_text = run.steps[0].context
    generated = step.context[len(prompt_text):]
    shown_prompt = prompt_text
    if len(prompt_text) + len(generated) > CONTEXT_CHARS:
        keep = max(0, CONTEXT_CHARS - len(generated))
        shown_prompt = "…" + prompt_text[len(prompt_text) - keep:] if keep else "…"
        generated = generated[-CONTEXT_CHARS:]
    mode = "greedy" if step.greedy else f"sampling, temperature {run.settings.get('temperature', 0):g}"
    head = (f'<div class="teach-head" style="font-weight:600;margin-bottom:6px">Round <span class="teach-round">'
            f'{index + 1}</span> of {len(run.steps)} · K = {step.num_draft_tokens} · {escape_text(mode)}</div>')
    context = (f'<div class="teach-label" style="font-size:12px;opacity:0.75">Context (prompt in grey, then the '
               f'text so far)</div><div class="teach-context specui-text" style="white-space:pre-wrap;'
               f'font-family:var(--font-mono, monospace);font-size:13px;border:1px solid rgba(128,128,128,0.3);'
               f'border-radius:6px;padding:6px;max-height:180px;overflow:auto">'
               f'<span style="opacity:0.55">{escape_text(shown_prompt)}</span>{escape_text(generated)}</div>')
    return (f'<div class="teach-step" data-round="{index + 1}" data-rounds="{len(run.steps)}">{head}{context}'
            f'{_drafts_table(step)}{_outcome(step)}{_added(step)}</div>')


def _drafts_table(step: teach.Step) -> str:
    if not step.drafts:
        why = ("only one token was left to generate" if step.num_draft_tokens == 0
               else "prompt lookup found no earlier match")
        return (f'<div class="teach-nodraft" style="margin:8px 0">No drafts this round ({why}), so the target '
                'decoded one token itself.</div>')
    u_head = "u" if not step.greedy else "u (greedy: none)"
    rule = "u &lt; p/q?" if not step.greedy else "draft = target's top token?"
    heads = ["#", "draft token", "q(x) draft", "p(x) target", "min(1, p/q)", u_head, rule]
    head = "".join(f'<th style="{CELL}">{h}</th>' for h in heads)
    because = ("matches", "differs") if step.greedy else ("u &lt; p/q", "u ≥ p/q")
    verdicts = {"accepted": f"✓ accepted ({because[0]})", "rejected": f"✗ rejected ({because[1]})",
                "discarded": "– not checked"}
    rows = []
    for d in step.drafts:
        verdict = verdicts[d.verdict]
        data = (f'data-verdict="{d.verdict}" data-token="{d.token_id}" data-q="{d.q!r}" data-p="{d.p!r}" '
                f'data-accept="{d.accept_prob!r}" data-u="{"" if d.u is None else repr(d.u)}"')
        rows.append(
            f'<tr class="teach-draft" {data}><td style="{CELL}">{d.position}</td>'
            f'<td style="{TEXT_CELL}">{escape_text(repr(d.text))}</td><td style="{CELL}">{_num(d.q)}</td>'
            f'<td style="{CELL}">{_num(d.p)}</td><td style="{CELL}">{_num(d.accept_prob)}</td>'
            f'<td style="{CELL}">{_num(d.u)}</td><td style="{CELL};{VERDICT_STYLE[d.verdict]}">{verdict}</td></tr>')
    return (f'<table class="teach-drafts" style="border-collapse:collapse;margin:8px 0;font-size:13px">'
            f'<thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>')


def _outcome(step: teach.Step) -> str:
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
        if final.kind == "resampled" and step.greedy:
            parts.append(f"The target's top token {token} (p = {_num(final.p)}) replaces it.")
        elif final.kind == "resampled":
            parts.append(f"The target drew {token} from the residual norm(max(0, p − q)) (chart below); "
                         f"its p = {_num(final.p)}.")
        elif k:
            parts.append(f"Every draft passed, so the target adds a bonus token {token} drawn from its own p at "
                         f"position {k + 1} (p = {_num(final.p)}).")
        else:
            parts.append(f"The target drew {token} from p (p = {_num(final.p)}).")
    else:
        parts.append("An end-of-text token among the accepted drafts ended the generation.")
    return f'<div class="teach-outcome" style="margin:6px 0">{" ".join(parts)}</div>'


def _added(step: teach.Step) -> str:
    spans = "".join(token_span(TokenView(text=e.text, kind=e.kind, p=e.p, q=e.q, token_id=e.token_id))
                    for e in step.emitted)
    word = "token" if len(step.emitted) == 1 else "tokens"
    return (f'<div class="teach-added" style="margin-top:4px">This round adds {len(step.emitted)} {word}: '
            f'<span class="specui-text" style="white-space:pre-wrap;font-family:var(--font-mono, monospace)">'
            f'{spans}</span> <span style="font-size:12px;opacity:0.7">(green accepted, red resampled, '
            f'blue bonus)</span></div>')


def render_measured(run: teach.TeachingRun | None) -> str:
    """The measured numbers under the theory charts."""
    if run is None:
        return '<div class="teach-measured">No run yet.</div>'
    m = run.measured

    def item(name, value, hint):
        return (f'<span class="stat" title="{escape_text(hint)}"><span class="stat-name" style="opacity:0.7">'
                f'{escape_text(name)}</span> <b>{escape_text(value)}</b></span>')

    def fmt(x, pattern="{:.3f}"):
        return "–" if x is None else pattern.format(x)

    items = [item("α (accepted / judged)", fmt(m.alpha), "the alpha the theory curves use"),
             item("acceptance rate (accepted / drafted)", fmt(m.acceptance_rate), "the usual acceptance rate"),
             item("tokens per round", fmt(m.tokens_per_round, "{:.2f}"), "bonus included"),
             item("theory tokens per round", fmt(m.theory_tokens_per_round, "{:.2f}"), "(1 − α^(K+1)) / (1 − α)"),
             item("c", fmt(m.cost_ratio), "seconds per drafted token / seconds per plain target forward"),
             item("verify cost", fmt(m.verify_cost, "{:.2f}"),
                  "seconds of one (K+1)-token verify forward / one plain target forward (the theorem assumes 1)"),
             item("measured speedup", fmt(m.speedup, "{:.2f}×"), "tokens/s / plain tokens/s, same prompt and seed"),
             item("theory speedup", fmt(m.theory_speedup, "{:.2f}×"), "Theorem 3.8 at the measured α, K, c"),
             item("best K", "–" if m.best_k is None else f"{m.best_k} ({m.best_k_speedup:.2f}×)",
                  "the K that maximises Theorem 3.8 at the measured α and c")]
    return f'<div class="teach-measured specui-stats" style="display:flex;flex-wrap:wrap;gap:6px 18px">{"".join(items)}</div>'


def render_points(points) -> str:
    """An experiment's points as a table."""
    if not points:
        return ""
    heads = ["run", "α", "acceptance rate", "tokens/round", "tokens/s", "speedup"]
    rows = "".join(
        f'<tr class="teach-point"><td style="{TEXT_CELL}">{escape_text(p.label)}</td>'
        + "".join(f'<td style="{CELL}">{v}</td>' for v in (
            _fmt(p.alpha), _fmt(p.acceptance_rate), _fmt(p.tokens_per_round, "{:.2f}"),
            _fmt(p.tokens_per_s, "{:.1f}"), _fmt(p.speedup, "{:.2f}×"))) + "</tr>" for p in points)
    head = "".join(f'<th style="{CELL}">{h}</th>' for h in heads)
    return (f'<table class="teach-points" style="border-collapse:collapse;font-size:13px"><thead><tr>{head}</tr>'
            f'</thead><tbody>{rows}</tbody></table>')


def _fmt(x, pattern="{:.3f}") -> str:
    return "–" if x is None else pattern.format(x)


EXPORTS_KEPT = 16  # export files kept on disk per process (gradio serves its own copy of each)
_exports: tempfile.TemporaryDirectory | None = None  # removed when the process exits


def write_export(run: teach.TeachingRun) -> str:
    """Write the run's JSON export to a fresh file in this process's export folder; returns its path.

    Only the newest EXPORTS_KEPT exports stay on disk, and the folder goes when the process ends.
    """
    global _exports
    if _exports is None:
        _exports = tempfile.TemporaryDirectory(prefix="specui-teach-")
    folder = Path(_exports.name) / f"{time.monotonic_ns()}"  # a folder per export keeps the file's plain name
    folder.mkdir()
    path = folder / f"specui-run-seed{run.spec.seed}.json"
    path.write_text(json.dumps(teach.export_run(run), indent=1, allow_nan=False), encoding="utf-8")
    for old in sorted(Path(_exports.name).iterdir(), key=lambda p: int(p.name))[:-EXPORTS_KEPT]:
        shutil.rmtree(old, ignore_errors=True)
    return str(path)


def _experiment_row(name: str, figure, help_text: str, label: str, *, extra=None):
    """One experiment: its chart and table on the left; the explanation, any extra control and the run
    button on the right. Element ids: #NAME-chart, #NAME-table, #NAME-run."""
    with gr.Row(equal_height=False):
        with gr.Column(scale=3):
            chart = gr.Plot(figure, elem_id=f"{name}-chart", show_label=False)
            table = gr.HTML("", elem_id=f"{name}-table")
        with gr.Column(scale=1, min_width=260):
            gr.Markdown(help_text)
            control = extra() if extra is not None else None
            button = gr.Button(label, elem_id=f"{name}-run")
    return chart, table, button, control


def teaching_tab(showcase, *, concurrency_id: str = "engine", tab: bool = True) -> None:
    """Build the teaching tab inside the current `gr.Blocks`. `showcase` is the app's `Showcase` (its
    config, pair cache and per-pair locks); `concurrency_id` is the app's engine queue, so teaching runs
    wait their turn with every other generation."""
    config = showcase.config
    default = config.get(None)
    weak_cache: dict = {}  # (preset, noise) -> the noisy draft, one kept

    container = gr.Tab("Teach", id="teach", elem_id="teach-tab") if tab else gr.Column(elem_id="teach-tab")
    with container:
        gr.Markdown(INTRO)
        with gr.Row(equal_height=False):
            with gr.Column(scale=3, min_width=360):
                prompt = gr.Textbox(DEFAULT_PROMPT, label="Prompt", lines=4, max_lines=10, elem_id="teach-prompt")
                with gr.Row():
                    start = gr.Button("Decode", variant="primary", elem_id="step-start")
                    prev = gr.Button("◀ Previous", elem_id="step-prev")
                    nxt = gr.Button("Next round ▶", elem_id="step-next")
                    play = gr.Button("▶ Play", elem_id="step-play")
                speed = gr.Slider(0.2, 5.0, value=1.5, step=0.1, label="Auto-play: seconds per round",
                                  elem_id="step-speed")
            with gr.Column(scale=2, min_width=280):
                preset = gr.Dropdown(config.names, value=default.name, label="Preset", elem_id="teach-preset")
                drafter = gr.Radio(list(DRAFTER_CHOICES), value="draft model" if default.drafter == "model"
                                   else "prompt lookup", label="Drafter", elem_id="teach-drafter")
                k = gr.Slider(1, 8, value=min(8, default.num_draft_tokens), step=1, label="K (draft tokens per round)",
                              elem_id="teach-k")
                temperature = gr.Slider(0.0, 2.0, value=0.8, step=0.05, label="Temperature (0 = greedy)",
                                        elem_id="teach-temperature")
                max_new = gr.Slider(8, 128, value=32, step=8, label="New tokens", elem_id="teach-max-new-tokens")
                seed = gr.Number(1, label="Seed", precision=0, elem_id="teach-seed")
        status = gr.Markdown("", elem_id="step-status")
        with gr.Row(equal_height=False):
            with gr.Column(scale=3, min_width=420):
                view = gr.HTML(render_step(None, 0), elem_id="step-view")
                residual = gr.Plot(teach_charts.residual_figure(), elem_id="step-residual", show_label=False)
            with gr.Column(scale=2, min_width=280):
                gr.Markdown(STEP_HELP)
        with gr.Row(equal_height=False):
            with gr.Column(scale=3):
                with gr.Row():
                    theory_tokens = gr.Plot(teach_charts.theory_tokens_figure(), elem_id="teach-theory-tokens",
                                            show_label=False)
                    theory_speedup = gr.Plot(teach_charts.theory_speedup_figure(), elem_id="teach-theory-speedup",
                                             show_label=False)
                measured = gr.HTML(render_measured(None), elem_id="teach-measured")
                export = gr.File(label="Export this run (JSON: tokens, kinds, rounds, p and q, timings)",
                                 interactive=False, elem_id="teach-export")
            with gr.Column(scale=1, min_width=260):
                gr.Markdown(THEORY_HELP)

        gr.Markdown("## Experiments")
        sweep_chart, sweep_table, sweep_run, _ = _experiment_row(
            "sweep", teach_charts.k_sweep_figure(), SWEEP_HELP, "Run the K sweep (K = 1…8)")
        temp_chart, temp_table, temp_run, _ = _experiment_row(
            "temp", teach_charts.temperature_figure(), TEMP_HELP, "Run the temperature sweep")
        drafters_chart, drafters_table, drafters_run, noise = _experiment_row(
            "drafters", teach_charts.drafter_figure(), DRAFTERS_HELP, "Compare drafters",
            extra=lambda: gr.Slider(0.0, 5.0, value=2.0, step=0.1, label="Noise on the weaker draft's weights",
                                    elem_id="drafters-noise"))

        run_state = gr.State(None)
        index_state = gr.State(0)
        playing = gr.State(False)
        timer = gr.Timer(1.5, active=False)

        def prepare(text, preset_name, drafter_label, k_value, temp, new_tokens, seed_value):
            """Check the settings and load the pair: (settings, preset, pair, engine, ids) or raise gr.Error."""
            try:
                settings = Settings.from_ui(preset=preset_name, drafter=drafter_label, num_draft_tokens=k_value,
                                            temperature=temp, max_new_tokens=new_tokens, seed=seed_value)
                chosen = config.get(settings.preset)
            except (SettingsError, ValueError) as e:
                raise gr.Error(str(e)) from None
            if not text or not text.strip():
                raise gr.Error("Type a prompt first.")
            try:
                pair = showcase.cache.get(chosen)
            except Exception as e:  # noqa: BLE001 - LoadError or anything a loader throws: a message, not a traceback
                log.warning("teaching: %s", e)
                raise gr.Error(str(e)) from None
            if settings.drafter == "model" and pair.draft is None:
                raise gr.Error(f"Preset '{chosen.name}' has no draft model: choose prompt lookup.")
            from specui.engine import SpeculativeEngine

            try:
                ids = showcase.encode(pair, text, ())
            except Exception as e:  # noqa: BLE001 - e.g. a tokenizer without a chat template
                raise gr.Error(f"The prompt could not be encoded: {type(e).__name__}: {e}") from None
            seed = 0 if settings.seed in (None, -1) else settings.seed
            return settings, chosen, pair, SpeculativeEngine(pair.target, pair.draft), ids, seed

        def show(run, index):
            step = run.steps[index] if run is not None and run.steps else None
            return render_step(run, index), teach_charts.residual_figure(step)

        def decode(text, preset_name, drafter_label, k_value, temp, new_tokens, seed_value):
            settings, chosen, pair, engine, ids, seed = prepare(text, preset_name, drafter_label, k_value, temp,
                                                                new_tokens, seed_value)
            try:
                showcase.warm_up(engine, pair, ids)
                run = teach.teaching_run(
                    engine, pair.tokenizer, ids, prompt=text, drafter=settings.drafter,
                    num_draft_tokens=settings.num_draft_tokens, temperature=settings.temperature,
                    max_new_tokens=settings.max_new_tokens, seed=seed, lock=showcase.lock(chosen.name),
                    settings={"preset": chosen.name})
            except ValueError as e:  # e.g. a prompt longer than the context
                raise gr.Error(str(e)) from None
            note = (f"Decoded {len(run.spec.token_ids)} tokens in {len(run.steps)} rounds (seed {seed}), and the "
                    "same prompt with the target alone for the measured speedup. Step through the rounds below.")
            return (run, 0, *show(run, 0), teach_charts.theory_tokens_figure(run.measured),
                    teach_charts.theory_speedup_figure(run.measured), render_measured(run), write_export(run), note,
                    False, gr.Timer(active=False), gr.update(value="▶ Play"))

        def move(run, index, delta):
            if run is None or not run.steps:
                return index, gr.skip(), gr.skip()
            index = max(0, min(len(run.steps) - 1, index + delta))
            return index, *show(run, index)

        def toggle(run, is_playing, seconds):
            on = not is_playing and run is not None
            return on, gr.Timer(value=float(seconds), active=on), gr.update(value="⏸ Pause" if on else "▶ Play")

        def tick(run, index):
            if run is None or index >= len(run.steps) - 1:
                return index, gr.skip(), gr.skip(), False, gr.Timer(active=False), gr.update(value="▶ Play")
            return index + 1, *show(run, index + 1), gr.skip(), gr.skip(), gr.skip()  # a late tick never resumes

        settings_inputs = [prompt, preset, drafter, k, temperature, max_new, seed]
        queued = {"concurrency_id": concurrency_id, "concurrency_limit": 1, "api_visibility": "private"}
        start.click(decode, settings_inputs,
                    [run_state, index_state, view, residual, theory_tokens, theory_speedup, measured, export, status,
                     playing, timer, play], **queued)
        nav = {"api_visibility": "private", "show_progress": "hidden"}
        nxt.click(lambda run, i: move(run, i, 1), [run_state, index_state], [index_state, view, residual], **nav)
        prev.click(lambda run, i: move(run, i, -1), [run_state, index_state], [index_state, view, residual], **nav)
        play.click(toggle, [run_state, playing, speed], [playing, timer, play], **nav)
        timer.tick(tick, [run_state, index_state], [index_state, view, residual, playing, timer, play], **nav)
        speed.change(lambda s: gr.Timer(value=float(s)), [speed], [timer], **nav)

        def sweep(text, preset_name, drafter_label, k_value, temp, new_tokens, seed_value):
            settings, chosen, _pair, engine, ids, seed = prepare(text, preset_name, drafter_label, k_value, temp,
                                                                new_tokens, seed_value)
            points = []
            for point in teach.k_sweep(engine, ids, ks=SWEEP_KS, drafter=settings.drafter,
                                       temperature=settings.temperature, max_new_tokens=settings.max_new_tokens,
                                       seed=seed, lock=showcase.lock(chosen.name)):
                points.append(point)
                yield teach_charts.k_sweep_figure(points), render_points(points)

        def temps(text, preset_name, drafter_label, k_value, temp, new_tokens, seed_value):
            settings, chosen, _pair, engine, ids, seed = prepare(text, preset_name, drafter_label, k_value, temp,
                                                                new_tokens, seed_value)
            points = []
            for point in teach.temperature_sweep(engine, ids, temperatures=TEMPERATURES,
                                                 num_draft_tokens=settings.num_draft_tokens, drafter=settings.drafter,
                                                 max_new_tokens=settings.max_new_tokens, seed=seed,
                                                 lock=showcase.lock(chosen.name)):
                points.append(point)
                yield teach_charts.temperature_figure(points), render_points(points)

        def drafters(text, preset_name, drafter_label, k_value, temp, new_tokens, seed_value, noise_value):
            settings, chosen, pair, engine, ids, seed = prepare(text, preset_name, "prompt lookup", k_value, temp,
                                                                new_tokens, seed_value)
            choices = []
            if pair.draft is not None:
                from specui.engine import SpeculativeEngine

                key = (chosen.name, round(float(noise_value), 3))
                if key not in weak_cache:
                    weak_cache.clear()
                    weak_cache[key] = teach.weakened_draft(pair.draft, noise=float(noise_value), seed=seed)
                choices += [teach.DrafterChoice("draft model", engine, "model"),
                            teach.DrafterChoice(f"draft + noise {float(noise_value):g}",
                                                SpeculativeEngine(pair.target, weak_cache[key]), "model")]
            choices.append(teach.DrafterChoice("prompt lookup", engine, "prompt_lookup"))
            points = []
            for point in teach.drafter_comparison(choices, ids, num_draft_tokens=settings.num_draft_tokens,
                                                  temperature=settings.temperature,
                                                  max_new_tokens=settings.max_new_tokens, seed=seed,
                                                  lock=showcase.lock(chosen.name)):
                points.append(point)
                yield teach_charts.drafter_figure(points), render_points(points)

        sweep_run.click(sweep, settings_inputs, [sweep_chart, sweep_table], **queued)
        temp_run.click(temps, settings_inputs, [temp_chart, temp_table], **queued)
        drafters_run.click(drafters, [*settings_inputs, noise], [drafters_chart, drafters_table], **queued)
