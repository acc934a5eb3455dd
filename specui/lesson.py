"""The lesson: a speculative run as step records, its JSON export, and the classroom experiments.

A teacher explains speculative decoding one round at a time. `teaching_run` decodes a prompt once
(and once more with the target alone, same seed, for the measured speedup) and turns every
`specui.events.Round` into a `Step` (`specui.lesson_steps`): the context so far, each drafted token with
q(x), p(x), min(1, p/q), the uniform draw u and its verdict, the residual norm(max(0, p - q)) at a
rejection, and the token the round emitted of its own. Every number is copied from the engine's Round:
none is recomputed, so the step view shows exactly what the engine decided.

The theory is `specui.metrics.theory` (Leviathan et al. 2023, eq. 1 and Theorem 3.8), the same figure
as the chat tab's and the benchmark's: alpha fitted to the measured tokens per round, c from
`specui.runstats`.

The experiments (`k_sweep`, `temperature_sweep`, `drafter_comparison`) run short generations over
an engine and yield plain records; `weakened_draft` makes a noisy copy of a draft model, a drafter
whose acceptance collapses as the noise grows. Every run takes one `DecodeSettings`. No gradio, no
plotly, no HTML here: the Teach tab in `specui.ui` renders these records.
"""

from __future__ import annotations

import contextlib
import copy
import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field

from specui import __version__, metrics, runstats
from specui.events import GenerationResult
from specui.lesson_steps import Step, build_steps
from specui.settings import DecodeSettings
from specui.text import fmt

EXPORT_FORMAT = "specui-teaching-run/1"
DEFAULTS = DecodeSettings(max_new_tokens=32, seed=0)  # a lesson's runs: short, and seeded


def _settings(settings: DecodeSettings | None, keywords: dict) -> DecodeSettings:
    """`settings` (the lesson's defaults when None) with `keywords` changed."""
    return (settings or DEFAULTS).but(**keywords) if keywords else (settings or DEFAULTS)


# -- what was measured ---------------------------------------------------------------------------------


def mean_accept_prob(rounds: Iterable) -> float | None:
    """The mean of min(1, p/q) over the judged drafts: since x ~ q, an estimate of sum_x min(p, q) = alpha."""
    values = [p for r in rounds for p in r.accept_probs[: min(r.num_accepted + 1, r.num_drafted)]]
    return sum(values) / len(values) if values else None


@dataclass(frozen=True)
class Measured:
    """One run's numbers beside the theory (None where a number could not be measured)."""

    k: int  # K chosen (the run's own, `metrics.run_k`, for adaptive K): the theory's and the fitted alpha's K
    acceptance_rate: float | None  # accepted / drafted
    alpha: float | None  # fitted to the tokens per round (`metrics.fitted_alpha`), as the theory curves use
    tokens_per_round: float | None  # emitted tokens / rounds, bonus included
    cost_ratio: float | None  # c: seconds per drafted token / seconds per plain target forward
    verify_cost: float | None  # seconds of one verify forward (K+1 tokens) / one plain forward
    tokens_per_s: float
    plain_tokens_per_s: float | None
    speedup: float | None  # measured: tokens/s / plain tokens/s, engine time
    theory_tokens_per_round: float | None  # eq. 1 at (alpha, K)
    theory_speedup: float | None  # Theorem 3.8 at (alpha, K, c)
    best_k: int | None  # the K that maximises Theorem 3.8 at the measured (alpha, c)
    best_k_speedup: float | None


def chosen_k(settings: DecodeSettings) -> int | None:
    """The K of Theorem 3.8, as in the chat tab's stats line: the K chosen, even where the token budget cut the
    rounds short (K 8, 8 new tokens); None for adaptive K (the run's own)."""
    return None if settings.adaptive else settings.num_draft_tokens


def measure(spec: GenerationResult, plain: GenerationResult | None = None, *, k: int | None = None) -> Measured:
    """Summarise a speculative run (and the plain run of the same prompt) for the theory charts, at K `k`."""
    rounds = spec.rounds
    k = metrics.run_k(rounds) if k is None else k
    spec_stats = runstats.run_stats(spec, plain=plain, k=k)
    plain_stats = runstats.run_stats(plain) if plain is not None and plain.rounds else None
    theory = spec_stats.theory  # None: trees, no drafts
    drafted = metrics.median(r.verify_s for r in rounds if r.num_drafted)
    plain_forward = metrics.median(r.verify_s for r in plain.rounds) if plain_stats is not None else None
    verify_cost = drafted / plain_forward if drafted is not None and plain_forward else None
    return Measured(k=k or 0, acceptance_rate=metrics.acceptance_rate(rounds),
                    alpha=metrics.fitted_alpha(rounds, k), tokens_per_round=metrics.mean_accepted_length(rounds),
                    cost_ratio=spec_stats.cost_ratio, verify_cost=verify_cost, tokens_per_s=spec_stats.tokens_per_s,
                    plain_tokens_per_s=plain_stats.tokens_per_s if plain_stats else None,
                    speedup=runstats.speedup(spec_stats, plain_stats) if plain_stats else None,
                    theory_tokens_per_round=theory.tokens_per_round if theory else None,
                    theory_speedup=theory.speedup if theory else None, best_k=theory.best_k if theory else None,
                    best_k_speedup=theory.best_k_speedup if theory else None)


# -- a teaching run ------------------------------------------------------------------------------------


@dataclass
class TeachingRun:
    """A prompt decoded for the step-through: the engine's results, the steps and the measurements."""

    prompt: str
    prompt_ids: list[int]
    decode: DecodeSettings
    spec: GenerationResult
    plain: GenerationResult | None
    steps: list[Step]
    measured: Measured
    text: str = ""  # the generated text
    extra: dict = field(default_factory=dict)  # e.g. the preset's name

    @property
    def greedy(self) -> bool:
        return self.decode.greedy

    @property
    def settings(self) -> dict:
        """The settings as exported: the decode settings and the extras (e.g. the preset)."""
        return {**self.decode.as_dict(), **self.extra}


def locked(lock) -> contextlib.AbstractContextManager:
    """`lock` held (None: nothing to hold): one engine run at a time where the caller shares an engine."""
    return lock if lock is not None else contextlib.nullcontext()


def teaching_run(engine, tokenizer, prompt_ids: Sequence[int], settings: DecodeSettings | None = None, *,
                 prompt: str = "", compare: bool = True, lock=None, extra: dict | None = None,
                 **keywords) -> TeachingRun:
    """Decode `prompt_ids` speculatively (then, with `compare`, with the target alone and the same seed).

    `lock` (e.g. the model pair's lock) is held for each generation, never across both.
    """
    settings = _settings(settings, keywords)
    with locked(lock):
        spec = engine.generate(prompt_ids, settings.but(speculative=True))
    plain = None
    if compare:
        with locked(lock):
            plain = engine.generate(prompt_ids, settings.but(speculative=False, seed=spec.seed))
    steps = build_steps(spec, tokenizer=tokenizer, prompt_ids=prompt_ids, greedy=settings.greedy)
    text = "".join(e.text for s in steps for e in s.emitted)
    return TeachingRun(prompt=prompt, prompt_ids=list(prompt_ids), decode=settings, spec=spec, plain=plain, steps=steps,
                       measured=measure(spec, plain, k=chosen_k(settings)), text=text, extra=dict(extra or {}))


# -- export --------------------------------------------------------------------------------------------


def json_safe(x):
    """JSON has no NaN or infinity: such numbers become None."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [json_safe(v) for v in x]
    return x


def _result_dict(result: GenerationResult) -> dict:
    return {"token_ids": list(result.token_ids), "kinds": list(result.kinds), "seed": result.seed,
            "stop_reason": result.stop_reason, "prefill_s": result.prefill_s, "total_s": result.total_s,
            "engine_s": runstats.engine_seconds(result),
            "rounds": [{**asdict(r), "residual_top": [list(t) for t in r.residual_top]} for r in result.rounds]}


def export_run(run: TeachingRun) -> dict:
    """The whole run as JSON-able data (tokens, kinds, rounds with p and q, timings), for slides and notebooks.

    `rounds` are the engine's `Round` records field for field; `steps` add the token texts and verdicts.
    """
    tokens = [{**asdict(e), "round": s.index} for s in run.steps for e in s.emitted]
    return json_safe({
        "format": EXPORT_FORMAT, "specui_version": __version__,
        "prompt": run.prompt, "prompt_ids": list(run.prompt_ids), "settings": dict(run.settings),
        "text": run.text, "tokens": tokens,
        "steps": [asdict(s) for s in run.steps],
        "speculative": _result_dict(run.spec),
        "plain": _result_dict(run.plain) if run.plain is not None else None,
        "measured": asdict(run.measured),
        "notes": {
            "p": "target probability of a token at its position, after the repetition penalty (if any) and the shared "
                 "temperature/top-k/top-p transform",
            "q": "draft probability of a token at its position (1.0 for prompt lookup: one-hot q)",
            "accept_probs": "min(1, p/q) per drafted position (greedy: 1 if the draft is the target's argmax, else 0)",
            "uniforms": "the uniform draw u per drafted position: accepted when u < p/q (empty in greedy mode)",
            "alpha": "the alpha whose expected tokens per round (1 - a^(K+1))/(1 - a) equal the measured ones, each "
                     "round at the K it was asked (a round the token budget cut short is not read as rejections)",
            "acceptance_rate": "accepted drafts / drafted tokens",
            "cost_ratio": "c = seconds per drafted token / seconds per plain target forward",
            "times": "seconds of engine time: prefill_s, then per round draft_s and verify_s (of it forward_s, the "
                     "target's forward)",
        },
    })


# -- experiments ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Point:
    """One generation of an experiment, measured."""

    label: str  # what varied: "K=3", "T=0.7", "prompt lookup"
    k: int
    temperature: float
    drafter: str
    tokens: int
    rounds: int
    acceptance_rate: float | None
    alpha: float | None
    mean_accept_prob: float | None
    tokens_per_round: float | None
    tokens_per_s: float
    plain_tokens_per_s: float | None
    speedup: float | None
    cost_ratio: float | None
    theory_speedup: float | None


def _point(label: str, result: GenerationResult, plain: GenerationResult | None, settings: DecodeSettings) -> Point:
    m = measure(result, plain, k=chosen_k(settings))
    drafter = settings.drafter if isinstance(settings.drafter, str) else "default"
    return Point(label=label, k=settings.num_draft_tokens, temperature=float(settings.temperature), drafter=drafter,
                 tokens=len(result.token_ids), rounds=len(result.rounds), acceptance_rate=m.acceptance_rate,
                 alpha=m.alpha, mean_accept_prob=mean_accept_prob(result.rounds), tokens_per_round=m.tokens_per_round,
                 tokens_per_s=m.tokens_per_s, plain_tokens_per_s=m.plain_tokens_per_s, speedup=m.speedup,
                 cost_ratio=m.cost_ratio, theory_speedup=m.theory_speedup)


def warm_up(engine, prompt_ids: Sequence[int], *, lock=None) -> None:
    """Run both paths once, a few tokens, so first-call allocations are not timed as decoding."""
    with locked(lock):
        for speculative in (True, False):
            engine.generate(list(prompt_ids)[-8:], max_new_tokens=3, speculative=speculative, ignore_eos=True, seed=0)


def _generate(engine, prompt_ids, settings: DecodeSettings, lock) -> GenerationResult:
    with locked(lock):
        return engine.generate(prompt_ids, settings)


def k_sweep(engine, prompt_ids: Sequence[int], settings: DecodeSettings | None = None, *,
            ks: Iterable[int] = range(1, 9), lock=None, warm: bool = True, **keywords) -> Iterator[Point]:
    """One prompt at each K: measured speedup against plain decoding (same seed and length) timed beside it
    (`timed_beside`).

    Yields a `Point` per K as it is measured, so a chart can grow while the sweep runs.
    """
    settings = _settings(settings, keywords)
    if warm:
        warm_up(engine, prompt_ids, lock=lock)
    arms = [settings.but(num_draft_tokens=int(k), speculative=True) for k in ks]
    plain = settings.but(speculative=False)
    for at_k, result, baseline in timed_beside(arms, lambda arm: _generate(engine, prompt_ids, arm, lock),
                                               lambda: _generate(engine, prompt_ids, plain, lock)):
        yield _point(f"K={at_k.num_draft_tokens}", result, baseline, at_k)


def timed_beside(arms: Iterable, run_arm, run_plain) -> Iterator[tuple]:
    """(arm, its run, its plain run) for each of `arms`, timed side by side: plain decoding runs before the first arm
    and again after every arm, and each arm is measured against the faster of the two plain runs around it (the same
    tokens: same prompt, settings and seed), so a busy spell of a shared machine slows the baseline beside the arm it
    slows. One plain run timed once for every arm gave a noised draft of α 0.03 a speedup of 1.30×."""
    before = run_plain()
    for arm in arms:
        result = run_arm(arm)
        after = run_plain()
        yield arm, result, min(before, after, key=runstats.engine_seconds)
        before = after


def temperature_sweep(engine, prompt_ids: Sequence[int], settings: DecodeSettings | None = None, *,
                      temperatures: Iterable[float] = (0.0, 0.3, 0.6, 1.0, 1.5), lock=None,
                      **keywords) -> Iterator[Point]:
    """One prompt at each temperature: how acceptance moves as both distributions flatten or sharpen."""
    settings = _settings(settings, keywords)
    for t in temperatures:
        at_t = settings.but(temperature=float(t), speculative=True)
        yield _point(f"T={fmt(t, 'g')}", _generate(engine, prompt_ids, at_t, lock), None, at_t)


@dataclass(frozen=True)
class DrafterChoice:
    """One arm of the drafter comparison: a label, the engine to run and its drafter name."""

    label: str
    engine: object
    drafter: str  # a name of specui.drafters.DRAFTER_NAMES


def drafter_comparison(choices: Sequence[DrafterChoice], prompt_ids: Sequence[int],
                       settings: DecodeSettings | None = None, *, lock=None, warm: bool = True,
                       **keywords) -> Iterator[Point]:
    """The same prompt with each drafter (all engines share the target): acceptance and speedup side by side, each
    against plain decoding timed beside it (`timed_beside`)."""
    if not choices:
        return
    settings = _settings(settings, keywords)
    if warm:
        warm_up(choices[0].engine, prompt_ids, lock=lock)
    arms = [(choice, settings.but(drafter=choice.drafter, speculative=True)) for choice in choices]
    plain = settings.but(speculative=False)
    for (choice, arm), result, baseline in timed_beside(arms, lambda a: _generate(a[0].engine, prompt_ids, a[1], lock),
                                                        lambda: _generate(choices[0].engine, prompt_ids, plain, lock)):
        yield _point(choice.label, result, baseline, arm)


def weakened_draft(draft_model, *, noise: float, seed: int = 0):
    """A copy of `draft_model` with Gaussian noise (noise x each tensor's std) added to every weight.

    The original is untouched. As the noise grows the copy's q drifts from the target's p and the
    acceptance rate collapses, while the output stays an exact sample of the target.
    """
    import torch

    weak = copy.deepcopy(draft_model)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for param in weak.parameters():
            scale = param.detach().float().std().clamp_min(1e-3) if param.numel() > 1 else torch.tensor(1e-3)
            delta = torch.randn(param.shape, generator=generator) * noise * scale
            param.add_(delta.to(device=param.device, dtype=param.dtype))
    return weak.eval()


def theory_curve(alphas: Sequence[float], k: int, c: float | None = None) -> list[float]:
    """Eq. 1 (c None) or Theorem 3.8 (c given) at each alpha, for the charts."""
    return [metrics.expected_tokens_per_round(a, k) if c is None else metrics.theoretical_speedup(a, k, c)
            for a in alphas]
