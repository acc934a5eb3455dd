"""Teaching mode without a server: step records equal the engine's rounds for a seed, the JSON export
round-trips, the experiments measure what they say, the chart builders return real plotly figures
with the measured point, and every model string is escaped in the step view's HTML."""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace

import plotly.graph_objects as go
import pytest

from specui import SpeculativeEngine, lesson as teach, lesson_steps, metrics
from tests.helpers import char_tokenizer, make_model, noisy_copy

PROMPT = "def add(a, b):\n    return a + b\n\ndef add(a, b):\n"
INJECTION = "<img src=x onerror=alert(1)>"


@pytest.fixture(scope="module")
def setup():
    target = make_model("llama", layers=2, seed=0)
    draft = noisy_copy(target, noise=0.1, seed=1)  # close to the target: rounds accept, reject and add bonuses
    tokenizer = char_tokenizer()
    ids = tokenizer(PROMPT)["input_ids"]
    return SimpleNamespace(target=target, draft=draft, tokenizer=tokenizer, ids=ids,
                           engine=SpeculativeEngine(target, draft))


def _run(s, **kw):
    settings = {"num_draft_tokens": 4, "temperature": 0.8, "max_new_tokens": 24, "seed": 3} | kw
    return teach.teaching_run(s.engine, s.tokenizer, s.ids, prompt=PROMPT, **settings), settings


@pytest.mark.parametrize("temperature", [0.0, 0.8])
def test_steps_equal_the_engines_rounds_for_the_same_seed(setup, temperature):
    run, settings = _run(setup, temperature=temperature)
    fresh = setup.engine.generate(setup.ids, speculative=True, **settings)  # an independent run, same seed
    assert len(run.steps) == len(fresh.rounds) == len(run.spec.rounds)
    for step, rnd in zip(run.steps, fresh.rounds):
        assert step.index == rnd.index and step.num_accepted == rnd.num_accepted
        assert step.num_draft_tokens == rnd.num_draft_tokens and step.greedy == (temperature == 0)
        assert [d.token_id for d in step.drafts] == rnd.drafted
        assert [d.q for d in step.drafts] == rnd.draft_probs
        assert [d.p for d in step.drafts] == rnd.target_probs
        judged = len(rnd.accept_probs)  # sampled: the drafts up to the first rejection
        assert [d.accept_prob for d in step.drafts] == rnd.accept_probs + [None] * (rnd.num_drafted - judged)
        assert [d.u for d in step.drafts] == (rnd.uniforms if temperature else [None] * rnd.num_drafted)
        verdicts = [d.verdict for d in step.drafts]
        n = rnd.num_accepted
        assert verdicts == ["accepted"] * n + (["rejected"] if n < rnd.num_drafted else []) + \
            ["discarded"] * max(0, rnd.num_drafted - n - 1)
        for d in step.drafts:  # the verdict is the engine's rule: u < p/q
            if d.u is not None and d.verdict != "discarded":
                assert (d.verdict == "accepted") == (d.u * d.q < d.p)
        assert [(c.token_id, c.prob) for c in step.residual] == [tuple(t) for t in rnd.residual_top]
        assert [e.token_id for e in step.emitted] == rnd.token_ids
        assert [e.kind for e in step.emitted] == rnd.kinds
        assert [e.p for e in step.emitted] == rnd.token_target_probs
        assert [e.q for e in step.emitted] == rnd.token_draft_probs
        assert step.final == step.emitted[-1]
    kinds = {k for r in fresh.rounds for k in r.kinds}
    assert {"accepted", "resampled"} <= kinds  # both paths shown
    if temperature:
        assert any(s.residual for s in run.steps), "a sampled rejection shows its residual"
        assert all(math.isclose(sum(c.prob for c in s.residual), 1.0, abs_tol=1e-4) or len(s.residual) == 10
                   for s in run.steps if s.residual)


def test_every_path_appears_over_a_few_seeds(setup):
    seen = set()
    for seed in range(4):
        run, _ = _run(setup, seed=seed)
        for s in run.steps:
            seen |= {d.verdict for d in s.drafts} | {e.kind for e in s.emitted}
    assert {"accepted", "rejected", "discarded", "resampled", "bonus"} <= seen


def test_context_and_text_follow_the_tokens(setup):
    run, _ = _run(setup)
    prompt_text = setup.tokenizer.decode(setup.ids)
    assert run.steps[0].context == prompt_text
    for before, after in zip(run.steps, run.steps[1:]):
        assert after.context == before.context + "".join(e.text for e in before.emitted)
    assert run.text == setup.tokenizer.decode(setup.ids + run.spec.token_ids)[len(prompt_text):]


def test_measured_numbers_use_the_metrics_formulas(setup):
    run, _ = _run(setup)
    m = run.measured
    assert run.plain is not None and run.plain.token_ids  # the same prompt with the target alone
    assert m.k == 4 and m.acceptance_rate == metrics.acceptance_rate(run.spec.rounds)
    assert m.tokens_per_round == metrics.mean_accepted_length(run.spec.rounds)
    assert m.alpha == metrics.fitted_alpha(run.spec.rounds, 4)
    asked = [r for r in run.spec.rounds if r.num_draft_tokens]  # alpha is fitted to them, each at the K it asked
    assert sum(metrics.expected_tokens_per_round(m.alpha, r.num_draft_tokens) for r in asked) == \
        pytest.approx(sum(r.num_accepted + 1 for r in asked))
    assert m.theory_tokens_per_round == metrics.expected_tokens_per_round(m.alpha, 4)
    assert m.theory_speedup == metrics.theoretical_speedup(m.alpha, 4, m.cost_ratio)
    assert m.best_k == metrics.best_k(m.alpha, m.cost_ratio)
    assert m.speedup == pytest.approx(m.tokens_per_s / m.plain_tokens_per_s)


def test_the_theory_is_at_the_k_chosen_where_the_token_budget_cut_every_round_short(setup):
    """K 8 and 8 new tokens: the first round may draft 7 at most (one token is the round's own) and later rounds
    fewer, so the run's own K (`metrics.run_k`) is under 8; the Teach tab's theory, its fitted alpha and the K
    sweep's points are at K = 8, the K chosen, as the chat tab's stats line (`Run.stats`); adaptive K: the run's."""
    run, _ = _run(setup, num_draft_tokens=8, max_new_tokens=8, temperature=0.0)
    rounds, m = run.spec.rounds, run.measured
    assert max(r.num_draft_tokens for r in rounds) < 8 and metrics.run_k(rounds) < 8
    assert m.k == 8 and m.alpha == metrics.fitted_alpha(rounds, 8)
    expected = metrics.theory(rounds, c=m.cost_ratio, k=8)
    assert (m.theory_speedup, m.theory_tokens_per_round) == (expected.speedup, expected.tokens_per_round)
    assert teach.measure(run.spec, run.plain, k=None).k == metrics.run_k(rounds)  # adaptive K: the run's own
    assert teach.chosen_k(teach.DEFAULTS.but(num_draft_tokens=8, adaptive=True)) is None
    (point,) = teach.k_sweep(setup.engine, setup.ids, ks=[8], warm=False, max_new_tokens=8, temperature=0.0)
    assert point.alpha == metrics.fitted_alpha(point_rounds := setup.engine.generate(
        setup.ids, num_draft_tokens=8, max_new_tokens=8, temperature=0.0, seed=0).rounds, 8)
    assert point.theory_speedup == metrics.theoretical_speedup(point.alpha, 8, point.cost_ratio)
    assert metrics.run_k(point_rounds) < 8


def test_mean_accept_prob_averages_the_judged_drafts():
    rounds = [SimpleNamespace(num_accepted=2, num_drafted=4, accept_probs=[1.0, 0.9, 0.2, 0.5]),
              SimpleNamespace(num_accepted=4, num_drafted=4, accept_probs=[1.0, 1.0, 0.8, 0.7]),
              SimpleNamespace(num_accepted=0, num_drafted=0, accept_probs=[])]
    assert metrics.acceptance_rate(rounds) == 6 / 8
    assert teach.mean_accept_prob(rounds) == pytest.approx((1.0 + 0.9 + 0.2 + 1.0 + 1.0 + 0.8 + 0.7) / 7)
    assert teach.mean_accept_prob([]) is None


def test_export_is_json_and_round_trips(setup):
    run, _ = _run(setup)
    data = teach.export_run(run)
    text = json.dumps(data, allow_nan=False)
    back = json.loads(text)
    assert back == data
    assert back["format"] == teach.EXPORT_FORMAT and back["prompt"] == PROMPT and back["prompt_ids"] == setup.ids
    assert [t["token_id"] for t in back["tokens"]] == run.spec.token_ids
    assert [t["kind"] for t in back["tokens"]] == run.spec.kinds
    rounds = back["speculative"]["rounds"]
    assert len(rounds) == len(run.spec.rounds) == len(back["steps"])
    for saved, rnd in zip(rounds, run.spec.rounds):
        assert saved["target_probs"] == rnd.target_probs and saved["draft_probs"] == rnd.draft_probs
        assert saved["uniforms"] == rnd.uniforms and saved["drafted"] == rnd.drafted
        assert saved["draft_s"] == rnd.draft_s and saved["verify_s"] == rnd.verify_s
    assert back["plain"]["token_ids"] == run.plain.token_ids
    assert back["speculative"]["prefill_s"] == run.spec.prefill_s
    assert back["measured"]["alpha"] == run.measured.alpha
    assert back["settings"]["seed"] == 3 and back["settings"]["temperature"] == 0.8


def test_export_files_are_valid_json_and_only_the_newest_stay(setup, monkeypatch):
    from specui.ui import exports as module

    monkeypatch.setattr(module, "EXPORTS_KEPT", 3)
    run, _ = _run(setup)
    exports = module.Exports()
    paths = [exports.write(teach.export_run(run), "specui-run-seed3.json") for _ in range(5)]
    assert json.loads(Path(paths[-1]).read_text())["tokens"] == teach.export_run(run)["tokens"]
    assert Path(paths[-1]).name == "specui-run-seed3.json"
    assert [Path(p).exists() for p in paths] == [False, False, True, True, True]


def test_export_turns_non_finite_numbers_into_null():
    assert teach.json_safe({"a": [float("nan"), 1.0, float("inf")], "b": (2,)}) == {"a": [None, 1.0, None], "b": [2]}


def test_k_sweep_measures_each_k_against_plain(setup):
    points = list(teach.k_sweep(setup.engine, setup.ids, ks=[1, 3], max_new_tokens=10, seed=1, warm=False))
    assert [p.k for p in points] == [1, 3] and [p.label for p in points] == ["K=1", "K=3"]
    for p in points:
        assert p.speedup is not None and p.speedup > 0 and p.plain_tokens_per_s > 0
        assert p.tokens == 10 and p.alpha is not None
    # each K against the plain runs timed beside it, not one baseline: tests/unit/test_lesson_baseline.py


def test_temperature_sweep_and_weaker_drafters(setup):
    temps = list(teach.temperature_sweep(setup.engine, setup.ids, temperatures=[0.0, 1.0], max_new_tokens=10))
    assert [p.temperature for p in temps] == [0.0, 1.0] and all(p.alpha is not None for p in temps)
    before = [t.clone() for t in setup.draft.parameters()]
    weak = teach.weakened_draft(setup.draft, noise=3.0, seed=0)
    assert all((a == b).all() for a, b in zip(before, setup.draft.parameters())), "the original is untouched"
    assert any((a != b).any() for a, b in zip(setup.draft.parameters(), weak.parameters()))
    choices = [teach.DrafterChoice("draft model", setup.engine, "model"),
               teach.DrafterChoice("noisy draft", SpeculativeEngine(setup.target, weak), "model"),
               teach.DrafterChoice("prompt lookup", setup.engine, "prompt_lookup")]
    points = list(teach.drafter_comparison(choices, setup.ids, max_new_tokens=24, temperature=0.0, seed=0,
                                           warm=False))
    assert [p.label for p in points] == ["draft model", "noisy draft", "prompt lookup"]
    assert points[1].alpha < points[0].alpha  # the weaker draft's acceptance collapses
    assert all(p.speedup is not None for p in points)


def test_charts_are_plotly_figures_with_the_measured_point(setup):
    from specui.ui import teach_charts

    run, _ = _run(setup)
    m = run.measured
    fig = teach_charts.theory_tokens_figure(m)
    assert isinstance(fig, go.Figure)
    point = next(t for t in fig.data if t.name == "measured")
    assert point.x[0] == pytest.approx(m.alpha, abs=1e-4) and point.y[0] == pytest.approx(m.tokens_per_round, abs=1e-4)
    curves = {t.name for t in fig.data if t.mode.startswith("lines")}  # lines+text: each labelled at its end
    assert {"K=1", "K=2", "K=4 (this run)", "K=8"} <= curves
    k4 = next(t for t in fig.data if t.name == "K=4 (this run)")
    assert k4.y[50] == pytest.approx(metrics.expected_tokens_per_round(0.5, 4), abs=1e-4)

    fig = teach_charts.theory_speedup_figure(m)
    point = next(t for t in fig.data if t.name == "measured speedup")
    assert point.x[0] == pytest.approx(m.alpha, abs=1e-4) and point.y[0] == pytest.approx(m.speedup, abs=1e-4)
    best = next(t for t in fig.data if t.name == f"best K = {m.best_k}")
    assert best.y[0] == pytest.approx(metrics.theoretical_speedup(m.alpha, m.best_k, m.cost_ratio), abs=1e-4)
    k4 = next(t for t in fig.data if t.name.startswith("K=4"))
    assert k4.y[80] == pytest.approx(metrics.theoretical_speedup(0.8, 4, m.cost_ratio), abs=1e-4)
    assert f"best K={m.best_k}" in fig.layout.title.text

    empty = teach_charts.theory_speedup_figure()  # before any run: curves at a placeholder c
    assert len(empty.data) == 4 and "placeholder" in empty.layout.title.text

    step = next(s for s in run.steps if s.residual)
    fig = teach_charts.residual_figure(step)
    bar = fig.data[0]
    assert list(bar.y) == [round(c.prob, 5) for c in step.residual]
    drawn = [i for i, c in enumerate(step.residual) if c.token_id == step.final.token_id]
    assert all((bar.marker.color[i] == teach_charts.POINT_COLOUR) == (i in drawn) for i in range(len(bar.y)))
    none = teach_charts.residual_figure(next(s for s in run.steps if not s.residual))  # why, not empty axes
    assert "None this round" in none.layout.annotations[0].text and none.layout.xaxis.visible is False
    before = teach_charts.residual_figure()  # before a run: says what will show, no axes from -1 to 6
    assert not before.data and "at a rejection" in before.layout.annotations[0].text
    assert before.layout.xaxis.visible is False and before.layout.yaxis.visible is False
    assert not fig.layout.annotations and fig.layout.xaxis.visible is not False

    points = list(teach.k_sweep(setup.engine, setup.ids, ks=[1, 2], max_new_tokens=8, warm=False))
    fig = teach_charts.k_sweep_figure(points)
    measured = next(t for t in fig.data if t.name == "measured")
    assert list(measured.x) == [1, 2] and list(measured.y) == [round(p.speedup, 4) for p in points]
    assert any(t.name.startswith("theory") for t in fig.data)
    assert isinstance(teach_charts.temperature_figure(points), go.Figure)
    assert isinstance(teach_charts.drafter_figure(points), go.Figure)
    for builder in (teach_charts.k_sweep_figure, teach_charts.temperature_figure, teach_charts.drafter_figure,
                    teach_charts.residual_figure, teach_charts.theory_tokens_figure):
        assert isinstance(builder(), go.Figure)  # empty states draw too


def _step_with(text: str) -> lesson_steps.Step:
    check = lesson_steps.DraftCheck(position=1, token_id=5, text=text, q=0.5, p=0.1, accept_prob=0.2, u=0.7,
                                    verdict="rejected")
    final = lesson_steps.Emitted(token_id=6, text=text, kind="resampled", p=0.3, q=0.05)
    return lesson_steps.Step(index=0, context=text, num_draft_tokens=1, greedy=False, drafts=[check], num_accepted=0,
                             residual=[lesson_steps.Candidate(6, text, 1.0)], emitted=[final], final=final,
                             draft_s=0.0, verify_s=0.0)


def test_the_step_view_escapes_model_text_and_shows_the_engines_numbers(setup):
    from specui.ui import teach_view as teaching

    run, _ = _run(setup)
    run.steps = [_step_with(INJECTION)] + run.steps
    html = teaching.render_step(run, 0)
    assert "<img" not in html and "&lt;img" in html
    assert 'data-verdict="rejected"' in html and "u = 0.7000 ≥ p/q = 0.2000" in html
    html = teaching.render_points([teach.Point(label=INJECTION, k=1, temperature=0.0, drafter="x", tokens=1, rounds=1,
                                               acceptance_rate=None, alpha=None, mean_accept_prob=None,
                                               tokens_per_round=None, tokens_per_s=0.0, plain_tokens_per_s=None,
                                               speedup=None, cost_ratio=None, theory_speedup=None)])
    assert "<img" not in html
    real = run.steps[3]
    html = teaching.render_step(run, 3)
    assert 'data-round="4"' in html
    for d in real.drafts:
        assert f'data-q="{d.q!r}" data-p="{d.p!r}" data-accept="{d.accept_prob!r}"' in html


def test_the_tab_builds_inside_a_callers_blocks(tmp_path):
    import gradio as gr

    from specui.loading import PairCache
    from specui.presets import load_config
    from specui.ui.session import Showcase
    from specui.ui.teaching import teaching_tab

    (tmp_path / "models.yaml").write_text("default: tiny\npresets:\n  tiny:\n    target: ./nowhere\n"
                                          "    drafter: prompt_lookup\n")
    showcase = Showcase(load_config(tmp_path / "models.yaml"), PairCache())
    with gr.Blocks() as demo:
        teaching_tab(showcase)
    ids = {c.get("props", {}).get("elem_id") for c in demo.config["components"]}
    assert {"step-next", "step-view", "step-start", "step-play", "step-speed", "teach-theory-tokens",
            "teach-theory-speedup", "teach-export", "sweep-run", "temp-run", "drafters-run"} <= ids


def test_a_round_cut_at_end_of_text_has_no_final_token():
    from specui.events import GenerationResult, Round
    from specui.settings import DecodeSettings
    from specui.ui import teach_view as teaching

    tokenizer = char_tokenizer()
    cut = Round(index=0, token_ids=[40, 41], kinds=["accepted", "accepted"], drafted=[40, 41, 42, 43], num_accepted=3,
                target_probs=[0.9, 0.8, 0.7, 0.1], draft_probs=[0.9, 0.9, 0.6, 0.5], accept_probs=[1.0, 0.8 / 0.9, 1.0, 0.2],
                uniforms=[0.1, 0.2, 0.3, 0.9], token_target_probs=[0.9, 0.8], token_draft_probs=[0.9, 0.9],
                residual_top=[], num_draft_tokens=4, draft_s=0.0, verify_s=0.0, elapsed_s=0.0)
    result = GenerationResult()
    result.add(cut)
    steps = lesson_steps.build_steps(result, tokenizer=tokenizer, prompt_ids=[33, 34], greedy=False)
    assert [d.verdict for d in steps[0].drafts] == ["accepted", "accepted", "accepted", "rejected"]
    assert steps[0].final is None and [e.token_id for e in steps[0].emitted] == [40, 41]
    run = teach.TeachingRun(prompt="AB", prompt_ids=[33, 34], decode=DecodeSettings(temperature=0.8), spec=result, plain=None,
                            steps=steps, measured=teach.measure(result))
    assert "end-of-text" in teaching.render_step(run, 0)
    assert json.loads(json.dumps(teach.export_run(run), allow_nan=False))["plain"] is None


def test_a_copied_rounds_step_says_so():
    """The model + lookup drafter's copied rounds: each such step is marked, and the step view says so."""
    from specui.ui import teach_view as teaching

    target = make_model("llama", layers=2, seed=0)
    engine = SpeculativeEngine(target, noisy_copy(target, noise=0.1, seed=1))
    tokenizer = char_tokenizer()
    ids = tokenizer(PROMPT)["input_ids"]  # "def add(a, b):" recurs: the first round copies
    run = teach.teaching_run(engine, tokenizer, ids, prompt=PROMPT, num_draft_tokens=2, temperature=0.0,
                             max_new_tokens=24, seed=0, drafter="model_lookup")
    assert [s.copied for s in run.steps] == [r.copied for r in run.spec.rounds] and run.steps[0].copied
    assert "draft copied from the context" in teaching.render_step(run, 0)
    plain_steps = [i for i, s in enumerate(run.steps) if not s.copied and s.drafts]
    assert all("copied" not in teaching.render_step(run, i) for i in plain_steps)
