"""Teaching mode's data: a speculative run as step records, its JSON export, and the classroom experiments.

A teacher explains speculative decoding one round at a time. `teaching_run` decodes a prompt once
(and once more with the target alone, same seed, for the measured speedup) and turns every
`specui.events.Round` into a `Step`: the context so far, each drafted token with q(x), p(x),
min(1, p/q), the uniform draw u and its verdict, the residual norm(max(0, p - q)) at a rejection,
and the token the round emitted of its own. Every number is copied from the engine's Round: none is
recomputed, so the step view shows exactly what the engine decided.

The theory is `specui.metrics` (Leviathan et al. 2023, eq. 1 and Theorem 3.8). One estimator is new
here, `checked_alpha`: accepted drafts / drafts the target actually judged. Drafts after a rejection
are discarded unjudged, so accepted / drafted (the usual acceptance rate) underestimates the paper's
per-token alpha; counting only judged drafts is the maximum-likelihood alpha of the paper's model.

The experiments (`k_sweep`, `temperature_sweep`, `drafter_comparison`) run short generations over
an engine and yield plain records; `weakened_draft` makes a noisy copy of a draft model, a drafter
whose acceptance collapses as the noise grows. No gradio, no plotly, no HTML here.
"""

from __future__ import annotations

import contextlib
import copy
import math
import statistics
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field

from specui import __version__, metrics
from specui.events import GenerationResult
from specui.ui import stats
from specui.ui.text import TokenText

ACCEPTED, REJECTED, DISCARDED = "accepted", "rejected", "discarded"  # verdicts of drafted positions
EXPORT_FORMAT = "specui-teaching-run/1"


# -- step records --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DraftCheck:
    """One drafted position of a round, as the target judged it."""

    position: int  # 1..K
    token_id: int
    text: str
    q: float  # q(x): the drafter's probability (1.0 for a deterministic drafter: one-hot q)
    p: float  # p(x): the target's probability at this position
    accept_prob: float  # min(1, p/q) (greedy: 1 if x is the target's argmax, else 0)
    u: float | None  # the uniform draw compared with p/q (None in greedy mode)
    verdict: str  # accepted | rejected | discarded (after the rejection, never judged)


@dataclass(frozen=True)
class Candidate:
    """A token of a distribution shown as a bar (the residual's top tokens)."""

    token_id: int
    text: str
    prob: float


@dataclass(frozen=True)
class Emitted:
    """A token the round added to the text."""

    token_id: int
    text: str
    kind: str  # accepted | resampled | bonus | plain
    p: float  # p of the token at its position
    q: float | None  # q of the token at its position (None: no draft distribution there)


@dataclass(frozen=True)
class Step:
    """One round of speculative decoding, with every number the engine used to decide it."""

    index: int  # 0-based round number
    context: str  # the text before this round: the prompt and every token emitted so far
    num_draft_tokens: int  # K asked of the drafter (it may propose fewer)
    greedy: bool
    drafts: list[DraftCheck]
    num_accepted: int
    residual: list[Candidate]  # at a rejection: norm(max(0, p - q))'s most likely tokens
    emitted: list[Emitted]  # accepted drafts, then the round's own token
    final: Emitted | None  # the round's own token (resampled or bonus); None when EOS cut the round
    draft_s: float
    verify_s: float

    @property
    def rejected(self) -> DraftCheck | None:
        return next((d for d in self.drafts if d.verdict == REJECTED), None)


def build_steps(result: GenerationResult, *, tokenizer, prompt_ids: Sequence[int], greedy: bool) -> list[Step]:
    """The rounds of `result` as `Step`s, with token texts from `tokenizer` (exactly as it decodes them)."""
    decoder = TokenText(tokenizer, prompt_ids)
    context = tokenizer.decode(list(prompt_ids), skip_special_tokens=False, clean_up_tokenization_spaces=False)
    steps = []
    for rnd in result.rounds:
        n = rnd.num_accepted
        emitted_texts = []
        for token in rnd.token_ids[:n]:  # accepted drafts first: later drafts' text follows them
            emitted_texts.append(decoder.push(token))
        drafts = []
        for i, token in enumerate(rnd.drafted):
            text = emitted_texts[i] if i < len(emitted_texts) else decoder.peek(token)
            verdict = ACCEPTED if i < n else REJECTED if i == n else DISCARDED
            drafts.append(DraftCheck(position=i + 1, token_id=int(token), text=text, q=float(rnd.draft_probs[i]),
                                     p=float(rnd.target_probs[i]), accept_prob=float(rnd.accept_probs[i]),
                                     u=float(rnd.uniforms[i]) if i < len(rnd.uniforms) else None, verdict=verdict))
        residual = [Candidate(int(t), decoder.peek(t), float(prob)) for t, prob in rnd.residual_top]
        for token in rnd.token_ids[n:]:
            emitted_texts.append(decoder.push(token))
        emitted = [Emitted(token_id=int(t), text=text, kind=kind, p=float(p), q=None if q is None else float(q))
                   for t, text, kind, p, q in zip(rnd.token_ids, emitted_texts, rnd.kinds, rnd.token_target_probs,
                                                  rnd.token_draft_probs)]
        final = emitted[-1] if emitted and emitted[-1].kind in ("resampled", "bonus", "plain") else None
        steps.append(Step(index=rnd.index, context=context, num_draft_tokens=rnd.num_draft_tokens, greedy=greedy,
                          drafts=drafts, num_accepted=n, residual=residual, emitted=emitted, final=final,
                          draft_s=rnd.draft_s, verify_s=rnd.verify_s))
        context += "".join(emitted_texts)
    return steps


# -- what was measured ---------------------------------------------------------------------------------


def checked_alpha(rounds: Iterable) -> float | None:
    """accepted drafts / drafts the target judged (accepted ones plus the one rejection per round).

    The maximum-likelihood per-token alpha of the paper's model (each draft accepted independently
    with probability alpha); None when no draft was judged.
    """
    accepted = judged = 0
    for r in rounds:
        accepted += r.num_accepted
        judged += r.num_accepted + (r.num_accepted < r.num_drafted)
    return accepted / judged if judged else None


def mean_accept_prob(rounds: Iterable) -> float | None:
    """The mean of min(1, p/q) over the judged drafts: since x ~ q, an estimate of sum_x min(p, q) = alpha."""
    values = [p for r in rounds for p in r.accept_probs[: min(r.num_accepted + 1, r.num_drafted)]]
    return sum(values) / len(values) if values else None


@dataclass(frozen=True)
class Measured:
    """One run's numbers beside the theory (None where a number could not be measured)."""

    k: int  # K asked
    acceptance_rate: float | None  # accepted / drafted
    alpha: float | None  # accepted / judged (`checked_alpha`), the alpha the theory curves use
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


def measure(spec: GenerationResult, plain: GenerationResult | None = None) -> Measured:
    """Summarise a speculative run (and the plain run of the same prompt) for the theory charts."""
    rounds = spec.rounds
    k = max((r.num_draft_tokens for r in rounds), default=0)
    spec_stats = stats.run_stats(spec, plain=plain)
    plain_stats = stats.run_stats(plain) if plain is not None and plain.rounds else None
    alpha = checked_alpha(rounds)
    c = spec_stats.cost_ratio
    verify_cost = None
    drafted_forwards = [r.verify_s for r in rounds if r.num_drafted]
    if plain_stats is not None and drafted_forwards:
        plain_forward = statistics.median(r.verify_s for r in plain.rounds)
        verify_cost = statistics.median(drafted_forwards) / plain_forward if plain_forward > 0 else None
    theory_tokens = theory = best = best_speedup = None
    if alpha is not None and k >= 1:
        theory_tokens = metrics.expected_tokens_per_round(alpha, k)
        if c is not None:
            theory = metrics.theoretical_speedup(alpha, k, c)
            best = metrics.best_k(alpha, c)
            best_speedup = metrics.theoretical_speedup(alpha, best, c)
    return Measured(k=k, acceptance_rate=metrics.acceptance_rate(rounds), alpha=alpha,
                    tokens_per_round=metrics.mean_accepted_length(rounds), cost_ratio=c, verify_cost=verify_cost,
                    tokens_per_s=spec_stats.tokens_per_s,
                    plain_tokens_per_s=plain_stats.tokens_per_s if plain_stats else None,
                    speedup=stats.speedup(spec_stats, plain_stats) if plain_stats else None,
                    theory_tokens_per_round=theory_tokens, theory_speedup=theory, best_k=best,
                    best_k_speedup=best_speedup)


# -- a teaching run ------------------------------------------------------------------------------------


@dataclass
class TeachingRun:
    """A prompt decoded for the step-through: the engine's results, the steps and the measurements."""

    prompt: str
    prompt_ids: list[int]
    settings: dict  # preset, drafter, num_draft_tokens, temperature, top_k, top_p, max_new_tokens, seed
    spec: GenerationResult
    plain: GenerationResult | None
    steps: list[Step]
    measured: Measured
    text: str = ""  # the generated text
    extra: dict = field(default_factory=dict)  # e.g. the preset's description

    @property
    def greedy(self) -> bool:
        return float(self.settings.get("temperature", 0.0)) == 0.0


def _common(max_new_tokens, temperature, top_k, top_p, seed) -> dict:
    """The generation settings every run of one comparison shares."""
    return {"max_new_tokens": max_new_tokens, "temperature": temperature, "top_k": top_k, "top_p": top_p,
            "seed": seed}


def _locked(lock) -> contextlib.AbstractContextManager:
    return lock if lock is not None else contextlib.nullcontext()


def teaching_run(engine, tokenizer, prompt_ids: Sequence[int], *, prompt: str = "", drafter: str | None = None,
                 num_draft_tokens: int = 4, temperature: float = 0.0, top_k: int = 0, top_p: float = 1.0,
                 max_new_tokens: int = 32, seed: int = 0, compare: bool = True, lock=None,
                 settings: dict | None = None) -> TeachingRun:
    """Decode `prompt_ids` speculatively (then, with `compare`, with the target alone and the same seed).

    `lock` (e.g. the model pair's lock) is held for each generation, never across both.
    """
    common = _common(max_new_tokens, temperature, top_k, top_p, seed)
    with _locked(lock):
        spec = engine.generate(prompt_ids, speculative=True, drafter=drafter, num_draft_tokens=num_draft_tokens,
                               **common)
    plain = None
    if compare:
        with _locked(lock):
            plain = engine.generate(prompt_ids, speculative=False, **common)
    steps = build_steps(spec, tokenizer=tokenizer, prompt_ids=prompt_ids, greedy=temperature == 0)
    text = "".join(e.text for s in steps for e in s.emitted)
    chosen = {"drafter": drafter, "num_draft_tokens": num_draft_tokens, **common}
    return TeachingRun(prompt=prompt, prompt_ids=list(prompt_ids), settings={**chosen, **(settings or {})},
                       spec=spec, plain=plain, steps=steps, measured=measure(spec, plain), text=text)


# -- export --------------------------------------------------------------------------------------------


def _finite(x):
    """JSON has no NaN or infinity: such numbers become None."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_finite(v) for v in x]
    return x


def _result_dict(result: GenerationResult) -> dict:
    return {"token_ids": list(result.token_ids), "kinds": list(result.kinds), "seed": result.seed,
            "stop_reason": result.stop_reason, "prefill_s": result.prefill_s, "total_s": result.total_s,
            "engine_s": stats.engine_seconds(result),
            "rounds": [{**asdict(r), "residual_top": [list(t) for t in r.residual_top]} for r in result.rounds]}


def export_run(run: TeachingRun) -> dict:
    """The whole run as JSON-able data (tokens, kinds, rounds with p and q, timings), for slides and notebooks.

    `rounds` are the engine's `Round` records field for field; `steps` add the token texts and verdicts.
    """
    tokens = [{**asdict(e), "round": s.index} for s in run.steps for e in s.emitted]
    return _finite({
        "format": EXPORT_FORMAT, "specui_version": __version__,
        "prompt": run.prompt, "prompt_ids": list(run.prompt_ids), "settings": dict(run.settings),
        "text": run.text, "tokens": tokens,
        "steps": [asdict(s) for s in run.steps],
        "speculative": _result_dict(run.spec),
        "plain": _result_dict(run.plain) if run.plain is not None else None,
        "measured": asdict(run.measured),
        "notes": {
            "p": "target probability of a token at its position, after the shared temperature/top-k/top-p transform",
            "q": "draft probability of a token at its position (1.0 for prompt lookup: one-hot q)",
            "accept_probs": "min(1, p/q) per drafted position (greedy: 1 if the draft is the target's argmax, else 0)",
            "uniforms": "the uniform draw u per drafted position: accepted when u < p/q (empty in greedy mode)",
            "alpha": "accepted drafts / judged drafts (drafts after a rejection are never judged)",
            "acceptance_rate": "accepted drafts / drafted tokens",
            "cost_ratio": "c = seconds per drafted token / seconds per plain target forward",
            "times": "seconds of engine time: prefill_s, then per round draft_s and verify_s",
        },
        **({"extra": run.extra} if run.extra else {}),
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


def _point(label: str, result: GenerationResult, plain: GenerationResult | None, *, k: int, temperature: float,
           drafter: str) -> Point:
    m = measure(result, plain)
    return Point(label=label, k=k, temperature=temperature, drafter=drafter, tokens=len(result.token_ids),
                 rounds=len(result.rounds), acceptance_rate=m.acceptance_rate, alpha=m.alpha,
                 mean_accept_prob=mean_accept_prob(result.rounds), tokens_per_round=m.tokens_per_round,
                 tokens_per_s=m.tokens_per_s, plain_tokens_per_s=m.plain_tokens_per_s, speedup=m.speedup,
                 cost_ratio=m.cost_ratio, theory_speedup=m.theory_speedup)


def warm_up(engine, prompt_ids: Sequence[int], *, lock=None) -> None:
    """Run both paths once, a few tokens, so first-call allocations are not timed as decoding."""
    with _locked(lock):
        for speculative in (True, False):
            engine.generate(list(prompt_ids)[-8:], max_new_tokens=3, speculative=speculative, ignore_eos=True, seed=0)


def _plain(engine, prompt_ids, lock, **common) -> GenerationResult:
    with _locked(lock):
        return engine.generate(prompt_ids, speculative=False, **common)


def k_sweep(engine, prompt_ids: Sequence[int], *, ks: Iterable[int] = range(1, 9), drafter: str | None = None,
            temperature: float = 0.0, top_k: int = 0, top_p: float = 1.0, max_new_tokens: int = 32, seed: int = 0,
            lock=None, warm: bool = True) -> Iterator[Point]:
    """One prompt at each K: measured speedup against plain decoding (run once first, same seed and length).

    Yields a `Point` per K as it is measured, so a chart can grow while the sweep runs.
    """
    common = _common(max_new_tokens, temperature, top_k, top_p, seed)
    if warm:
        warm_up(engine, prompt_ids, lock=lock)
    plain = _plain(engine, prompt_ids, lock, **common)
    for k in ks:
        with _locked(lock):
            result = engine.generate(prompt_ids, speculative=True, drafter=drafter, num_draft_tokens=int(k), **common)
        yield _point(f"K={k}", result, plain, k=int(k), temperature=temperature, drafter=drafter or "default")


def temperature_sweep(engine, prompt_ids: Sequence[int], *, temperatures: Iterable[float] = (0.0, 0.3, 0.6, 1.0, 1.5),
                      num_draft_tokens: int = 4, drafter: str | None = None, top_k: int = 0, top_p: float = 1.0,
                      max_new_tokens: int = 32, seed: int = 0, lock=None) -> Iterator[Point]:
    """One prompt at each temperature: how acceptance moves as both distributions flatten or sharpen."""
    for t in temperatures:
        with _locked(lock):
            result = engine.generate(prompt_ids, speculative=True, drafter=drafter, num_draft_tokens=num_draft_tokens,
                                     temperature=float(t), top_k=top_k, top_p=top_p, max_new_tokens=max_new_tokens,
                                     seed=seed)
        yield _point(f"T={t:g}", result, None, k=num_draft_tokens, temperature=float(t), drafter=drafter or "default")


@dataclass(frozen=True)
class DrafterChoice:
    """One arm of the drafter comparison: a label, the engine to run and its drafter name."""

    label: str
    engine: object
    drafter: str  # "model" | "prompt_lookup"


def drafter_comparison(choices: Sequence[DrafterChoice], prompt_ids: Sequence[int], *, num_draft_tokens: int = 4,
                       temperature: float = 0.0, top_k: int = 0, top_p: float = 1.0, max_new_tokens: int = 32,
                       seed: int = 0, lock=None, warm: bool = True) -> Iterator[Point]:
    """The same prompt with each drafter (all engines share the target): acceptance and speedup side by side."""
    if not choices:
        return
    common = _common(max_new_tokens, temperature, top_k, top_p, seed)
    if warm:
        warm_up(choices[0].engine, prompt_ids, lock=lock)
    plain = _plain(choices[0].engine, prompt_ids, lock, **common)
    for choice in choices:
        with _locked(lock):
            result = choice.engine.generate(prompt_ids, speculative=True, drafter=choice.drafter,
                                            num_draft_tokens=num_draft_tokens, **common)
        yield _point(choice.label, result, plain, k=num_draft_tokens, temperature=temperature, drafter=choice.drafter)


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
    if c is None:
        return [metrics.expected_tokens_per_round(a, k) for a in alphas]
    return [metrics.theoretical_speedup(a, k, c) for a in alphas]
