"""The Teach tab's step view and theory texts without a server: what a round's table, head and outcome say in
greedy mode, where the token budget cut a round short and where a round drafted nothing, and the residual chart's
marks. Built from hand-written `Round` records, so each case is exact."""

from __future__ import annotations

import re

from specui import lesson, metrics
from specui.events import GenerationResult, Round
from specui.settings import DecodeSettings
from specui.ui import render, teach_charts, teach_view
from tests.helpers import char_tokenizer


def _round(index, *, drafted, accepted, kinds, token_ids, target_probs, draft_probs, accept_probs, uniforms=(),
           residual_top=(), k=None):
    n = len(token_ids)
    return Round(index=index, token_ids=token_ids, kinds=kinds, drafted=drafted, num_accepted=accepted,
                 target_probs=target_probs, draft_probs=draft_probs, accept_probs=accept_probs, uniforms=list(uniforms),
                 token_target_probs=[0.5] * n, token_draft_probs=[None] * n, residual_top=list(residual_top),
                 num_draft_tokens=len(drafted) if k is None else k, draft_s=0.0, verify_s=0.0, elapsed_s=0.0)


def _run(rounds, settings: DecodeSettings) -> lesson.TeachingRun:
    result = GenerationResult()
    for r in rounds:
        result.add(r)
    steps = lesson.build_steps(result, tokenizer=char_tokenizer(), prompt_ids=[33, 34], greedy=settings.greedy)
    return lesson.TeachingRun(prompt="AB", prompt_ids=[33, 34], decode=settings, spec=result, plain=None, steps=steps,
                              measured=lesson.measure(result, k=lesson.chosen_k(settings)))


def _cells(html: str) -> list[list[str]]:
    rows = re.findall(r'<tr class="teach-draft".*?</tr>', html)
    return [re.findall(r"<td[^>]*>(.*?)</td>", row) for row in rows]


# K 8, 5 new tokens: the first round may ask for 4 drafts (5 tokens left, one the round's own); greedy, draft 2 is not
# the target's argmax (the engine reports 1 and 0, and 0 for the draft after it, never judged); the last round has one
# token left to generate and drafts nothing
GREEDY = [_round(0, drafted=[40, 41, 42, 43], accepted=1, kinds=["accepted", "resampled"], token_ids=[40, 50],
                 target_probs=[0.25, 0.1, 0.3, 0.2], draft_probs=[0.5, 0.4, 0.6, 0.7],
                 accept_probs=[1.0, 0.0, 0.0, 0.0]),
          _round(1, drafted=[44, 45], accepted=2, kinds=["accepted", "accepted", "bonus"], token_ids=[44, 45, 46],
                 target_probs=[0.6, 0.7], draft_probs=[0.5, 0.5], accept_probs=[1.0, 1.0], k=2),
          _round(2, drafted=[], accepted=0, kinds=["bonus"], token_ids=[47], target_probs=[], draft_probs=[],
                 accept_probs=[], k=0)]


def test_a_greedy_tables_verdict_column_is_not_called_min_1_p_over_q():
    """Greedy rounds carry 1 or 0 (the argmax rule), not min(1, p/q) of the p and q beside them (0.25 / 0.5 would be
    0.5): the column says what it holds, a draft after the rejection shows none, and a note says what p and q are."""
    run = _run(GREEDY, DecodeSettings(temperature=0, num_draft_tokens=8, max_new_tokens=6))
    html = teach_view.render_step(run, 0)
    head = re.search(r"<thead>.*?</thead>", html).group(0)
    assert "min(1, p/q)" not in head and "kept (1) or not (0)" in head
    assert [row[4] for row in _cells(html)] == ["1.0000", "0.0000", "–", "–"]
    assert "temperature 1" in html and "most likely token" in html
    sampled = _run([_round(0, drafted=[40, 41], accepted=0, kinds=["resampled"], token_ids=[50],
                           target_probs=[0.1, None], draft_probs=[0.5, 0.4], accept_probs=[0.2], uniforms=[0.7, 0.3])],
                   DecodeSettings(temperature=0.8, num_draft_tokens=2))
    html = teach_view.render_step(sampled, 0)
    assert "min(1, p/q)" in re.search(r"<thead>.*?</thead>", html).group(0) and "temperature 1" not in html
    assert [row[4] for row in _cells(html)] == ["0.2000", "–"]


def test_the_round_head_gives_the_k_chosen_and_why_a_round_asked_for_fewer():
    """K 8 with 5 tokens to go: the round asked for 4 drafts; its head reads K = 8 and says why, not "K = 4"."""
    run = _run(GREEDY, DecodeSettings(temperature=0, num_draft_tokens=8, max_new_tokens=6))
    heads = [re.search(r'<div class="teach-head">(.*?)</div>', teach_view.render_step(run, i)).group(1)
             for i in range(3)]
    assert "K = 8, 4 asked (5 tokens left to generate, the round's own included)" in heads[0]
    assert "K = 8, 0 asked (1 token left to generate" in heads[2]
    adaptive = _run(GREEDY, DecodeSettings(temperature=0, num_draft_tokens=8, max_new_tokens=6, adaptive=True))
    assert "K = 4 ·" in teach_view.render_step(adaptive, 0)  # adaptive K: the round's own


def test_a_greedy_round_that_drafted_nothing_takes_the_targets_top_token_without_a_draw():
    run = _run(GREEDY, DecodeSettings(temperature=0, num_draft_tokens=8, max_new_tokens=6))
    outcome = re.search(r'<div class="teach-outcome">(.*?)</div>', teach_view.render_step(run, 2)).group(1)
    assert "top token" in outcome and "drew" not in outcome
    sampled = _run(GREEDY[2:], DecodeSettings(temperature=0.8, num_draft_tokens=8, max_new_tokens=1))
    assert "drew" in teach_view.render_step(sampled, 0)


def test_the_theory_help_does_not_promise_a_diamond_off_its_curve():
    """alpha is fitted to the measured tokens per round, each round at the K it was asked, so the left chart's
    diamond is on its K's curve by construction where every round asked K (below it where the token budget cut
    rounds short: K 8 and 6 tokens): the help, the numbers and the chart say so instead of reading it as a finding."""
    run = _run(GREEDY, DecodeSettings(temperature=0, num_draft_tokens=8, max_new_tokens=6))
    m = run.measured
    asked = [r for r in run.spec.rounds if r.num_draft_tokens]  # the rounds that could accept a draft
    assert m.alpha is None or abs(sum(metrics.expected_tokens_per_round(m.alpha, r.num_draft_tokens) for r in asked)
                                  - sum(r.num_accepted + 1 for r in asked)) < 1e-9
    assert "off its\n  curve" not in teach_view.THEORY_HELP and "by construction" in teach_view.THEORY_HELP
    assert "acceptance rate" in teach_view.THEORY_HELP.lower()
    assert "α is fitted to match" in teach_view.render_measured(run)
    title = teach_charts.theory_tokens_figure(m).layout.title.text
    assert "fitted" in title and "theory at K" not in title


def test_the_residual_chart_marks_the_drawn_token_by_more_than_colour_and_says_it_shows_the_top_tokens():
    rnd = _round(0, drafted=[40], accepted=0, kinds=["resampled"], token_ids=[50], target_probs=[0.1],
                 draft_probs=[0.5], accept_probs=[0.2], uniforms=[0.7], residual_top=[(51, 0.3), (50, 0.2), (52, 0.1)])
    step = _run([rnd], DecodeSettings(temperature=0.8, num_draft_tokens=1)).steps[0]
    fig = teach_charts.residual_figure(step)
    (bars,) = fig.data
    assert list(bars.text) == ["", "drawn", ""] and list(bars.marker.pattern.shape) == ["", "x", ""]
    assert "top 3 tokens, 0.60 of its mass" in fig.layout.title.text
    # each bar reads "'x' (51)": the axis says what the number is, and that the heights are the residual's, not p
    assert list(bars.x)[0].endswith("(51)") and "id" in fig.layout.xaxis.title.text
    assert "residual" in fig.layout.yaxis.title.text


def test_the_residual_charts_token_texts_stay_text_in_plotly():
    """plotly reads a label or a title as HTML of its own (<b>, <br>, <a href>): a model's token '<b>' set the
    residual's labels in bold, '<br>' broke its title. They are escaped, as the token tree's are."""
    from dataclasses import replace

    from specui.lesson_steps import Candidate

    rnd = _round(0, drafted=[40], accepted=0, kinds=["resampled"], token_ids=[50], target_probs=[0.1],
                 draft_probs=[0.5], accept_probs=[0.2], uniforms=[0.7], residual_top=[(51, 0.3), (50, 0.2)])
    step = _run([rnd], DecodeSettings(temperature=0.8, num_draft_tokens=1)).steps[0]
    step = replace(step, residual=[Candidate(51, "<b>x</b>", 0.3), Candidate(50, "<br>", 0.2)],
                   final=replace(step.final, text="<a href='https://e.x'>y</a>"))
    fig = teach_charts.residual_figure(step)
    (bars,) = fig.data
    assert list(bars.x) == ["'&lt;b&gt;x&lt;/b&gt;' (51)", "'&lt;br&gt;' (50)"]
    title = re.sub(r"</span><br><span[^>]*>", " ", fig.layout.title.text)  # its subtitle's lines (wrapped) as one
    assert "drawn: \"&lt;a href='https://e.x'&gt;y&lt;/a&gt;\"" in title and "<a" not in title


def test_the_tokens_a_round_adds_are_quoted_so_a_space_or_a_line_break_shows():
    """A round that adds a space (id 1) and '<' (id 29): each is quoted as in the drafts table, in its kind's span
    with the token's own tooltip, and '<' stays text."""
    rnd = _round(0, drafted=[1], accepted=1, kinds=["accepted", "bonus"], token_ids=[1, 29], target_probs=[0.9],
                 draft_probs=[0.8], accept_probs=[1.0], uniforms=[0.5])
    step = _run([rnd], DecodeSettings(temperature=0.8, num_draft_tokens=1)).steps[0]
    html = teach_view.added(step)
    spans = re.findall(r'<span class="tok tok-(\w+)" title="([^"]*)">(.*?)</span>', html)
    space, lt = (e.text for e in step.emitted)
    assert space.strip() == "" and lt.strip() == "<"
    assert [(kind, text) for kind, _, text in spans] == [("accepted", teach_view.escape_text(repr(space))),
                                                         ("bonus", teach_view.escape_text(repr(lt)))]
    assert f"token 1 {render.attribute(repr(space))}" in spans[0][1]  # a tooltip: attribute-escaped (render.py)
    assert "<" not in re.sub(r"</?(span|div)\b", "", html)


def test_the_k_curves_differ_by_more_than_shade_and_subtitles_are_legible():
    """On a washed-out projector the K curves' pale blues ran together and each chart's second line (plotly's <sub>,
    about 10 px) was too small: each K has its own dash and a label at its curve's end, the second line 12 px."""
    m = _run(GREEDY, DecodeSettings(temperature=0, num_draft_tokens=4, max_new_tokens=6)).measured
    for fig in (teach_charts.theory_tokens_figure(m), teach_charts.theory_speedup_figure(m)):
        curves = [t for t in fig.data if t.mode == "lines+text"]
        assert len(curves) >= 4
        assert len({t.line.dash for t in curves}) == len(curves)  # the run's own solid, every other its own dash
        assert [t.text[-1] for t in curves] == [f"K={k}" for k in sorted({1, 2, 4, 8, m.k})]
        assert all(not any(t.text[:-1]) and t.cliponaxis is False for t in curves)  # one label, in the margin
        assert "<sub>" not in fig.layout.title.text
    assert "<br><span style=\"font-size:12px\">measured" in teach_charts.theory_tokens_figure(m).layout.title.text


def test_a_u_drawn_for_a_draft_never_checked_is_marked_unused():
    """The verify draws K uniforms at once, so a draft after the rejection has a u that nothing read: it is marked
    and the note says why (students asked what it was for); checked drafts' u stay plain numbers."""
    rnd = _round(0, drafted=[40, 41, 42], accepted=0, kinds=["resampled"], token_ids=[50], target_probs=[0.1, 0.3, 0.2],
                 draft_probs=[0.5, 0.4, 0.3], accept_probs=[0.2], uniforms=[0.7, 0.1, 0.3],
                 residual_top=[(50, 0.5)])
    table = teach_view.drafts_table(_run([rnd], DecodeSettings(temperature=0.8, num_draft_tokens=3)).steps[0])
    rows = re.findall(r'<tr class="teach-draft".*?</tr>', table)
    assert [("(unused)" in row) for row in rows] == [False, True, True]
    assert "never read" in table
    greedy = _round(0, drafted=[40, 41], accepted=1, kinds=["accepted", "resampled"], token_ids=[40, 50],
                    target_probs=[0.6, 0.2], draft_probs=[0.5, 0.4], accept_probs=[1.0, 0.0])
    assert "unused" not in teach_view.drafts_table(_run([greedy], DecodeSettings(temperature=0)).steps[0])


def test_the_temperature_chart_says_what_its_point_at_temperature_0_is():
    """At temperature 0 the rule is the argmax's: the mean "acceptance probability" there is how often the draft's
    token is the target's argmax, not a mean of min(1, p/q), and the chart says so (a tiny real pair's sweep)."""
    from specui.engine import SpeculativeEngine
    from tests.helpers import make_model, noisy_copy

    target = make_model("llama", layers=2, seed=0)
    engine = SpeculativeEngine(target, noisy_copy(target, noise=0.3, seed=1))
    points = list(lesson.temperature_sweep(engine, [5, 6, 7, 8], temperatures=(0.0, 0.6, 1.0), max_new_tokens=16,
                                           num_draft_tokens=3, seed=2))
    traces = {t.name: t for t in teach_charts.temperature_figure(points).data}
    agreement = traces[teach_charts.GREEDY_AGREEMENT]
    assert "argmax" in agreement.name and list(agreement.x) == [0.0]
    assert agreement.y[0] == round(points[0].mean_accept_prob, 4) and "argmax" in agreement.hovertemplate
    assert list(traces["mean min(1, p/q)"].x) == [0.6, 1.0]  # min(1, p/q) only where it was sampled
    assert "argmax" in teach_view.TEMP_HELP


def test_the_step_help_says_why_the_text_is_exact_in_the_terms_of_its_table():
    """A student alone reads why the output follows p from the page: a token comes as a kept draft (min(p, q)) or from
    the residual after a rejection ((p − min(p, q)) / r, times r); the help said only "this step makes the text an
    exact sample" and never why. The sum it states is checked on a hand-written p and q."""
    said = " ".join(teach_view.STEP_HELP.split())
    assert "Why the text is exact" in said
    for term in ("q(x) · min(1, p(x)/q(x)) = min(p(x), q(x))", "r = 1 − Σ min(p, q)",
                 "max(0, p − q) = p − min(p, q)", "(p(x) − min(p(x), q(x))) / r", "add up to p(x)"):
        assert term in said, term
    p, q = [0.5, 0.3, 0.2, 0.0], [0.1, 0.6, 0.0, 0.3]
    r = 1 - sum(map(min, p, q))
    for px, qx in zip(p, q):
        kept = qx * min(1, px / qx) if qx else 0.0
        assert abs(kept + r * (px - min(px, qx)) / r - px) < 1e-12


def test_a_greedy_rounds_bonus_is_the_targets_top_token_not_a_draw():
    """Greedy draws nothing: after a full block the bonus is the target's argmax; the outcome said it was "drawn from
    its own p", as a sampled round's is."""
    run = _run(GREEDY, DecodeSettings(temperature=0, num_draft_tokens=8, max_new_tokens=6))
    outcome = re.search(r'<div class="teach-outcome">(.*?)</div>', teach_view.render_step(run, 1)).group(1)
    assert "Every draft passed" in outcome and "its top token at position 3" in outcome and "drawn" not in outcome
    sampled = _run(GREEDY[1:2], DecodeSettings(temperature=0.8, num_draft_tokens=2, max_new_tokens=3))
    assert "drawn from its own p at position 3" in teach_view.render_step(sampled, 0)


def test_the_theory_help_says_what_a_diamond_above_the_speedup_curve_means():
    """A greedy run with a confidence stop of 0.5 on the bundled pair drafted 1 of 7 most rounds and measured 2.60×
    against the theory's 1.25× at K 7: the help said only what a diamond below the curve means."""
    said = " ".join(teach_view.THEORY_HELP.split())
    assert "A diamond above it" in said and "confidence stop" in said.split("A diamond above it")[1]
    assert "fewer draft forwards than its Kc" in said and "timed while the machine was busier" in said


def test_the_helps_name_the_draft_x_their_formula_reads_and_when_decoding_again_keeps_the_tokens():
    """Step 3 said "Token i is kept when u < p(x)/q(x)": an i the formula never reads. The theory help said "Decode
    again: the tokens do not [move]", false with seed -1 (a fresh seed each time). The K sweep's and the drafters'
    helps say their plain runs are timed beside each arm (`lesson.timed_beside`)."""
    step = " ".join(teach_view.STEP_HELP.split())
    assert "Token i" not in step and "A draft x is kept when a uniform draw **u < p(x)/q(x)**" in step
    assert "Decode again with the same seed: the timings move, the tokens do not" in " ".join(
        teach_view.THEORY_HELP.split())
    for help_ in (teach_view.SWEEP_HELP, teach_view.DRAFTERS_HELP):
        assert "plain decoding run just before and just after it" in " ".join(help_.split())
