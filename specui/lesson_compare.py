"""Two drafters on the same rounds: what each proposes from the same context, judged with the same draws.

The Teach tab steps through one run of a primary drafter. `compare` decodes that run again, round by
round, and at the context each round starts from (the prompt and every token emitted before it) asks
the engine for one round of a second drafter:

    primary  the engine's own stream with the primary drafter: exactly `engine.generate` for the seed
             (the same rounds and tokens as the teaching run's).
    second   at round i, a fresh `engine.stream` over the context so far with the second drafter, of
             which the first round is kept. The engine starts the drafter as at any run's start (the
             context's target features for EAGLE and Medusa, the target's own cache for early exit), it
             proposes, the target checks the block in one forward and the engine's `verify` decides.
             Its draws (the uniforms u, then the resampled or bonus token) come from a copy of the
             primary's generators taken just before round i, so both drafters meet the same u_1, u_2, ...
             (common random numbers): a difference in what they get accepted is the drafters', not luck.
             Its token budget is what the primary had left, so its K is the primary's K for that round.

Greedy: the target's output is the same whichever drafter drafts, so this is the second drafter's round
on the very text the primary wrote; what it emits is a prefix of the same continuation. Sampling: the walk
follows the primary's output; the second drafter's round is what it would do from the same context with
the same draws, and the tokens it would add may differ from the primary's: the walk does not follow them.

What differs from a run of the second drafter alone: its state is rebuilt from the context at every round.
Its caches hold the context either way, so its proposal is the one it makes at this context (EAGLE's and
Medusa's features of the context come from one prefill forward instead of the verify forwards of earlier
rounds: equal up to float rounding); a sampling drafter's own generator restarts from the seed each round;
adaptive K is refused, since its K depends on the rounds before. The numbers shown are the engine's `Round`
fields (through `lesson_steps.build_steps`); nothing is recomputed. So the ~1e-7 by which such a round's q (or p)
can differ from a run of the second drafter alone changes no number shown against the verdict shown: the round's
own q, p and u are the ones its verdict was decided with, and they are the ones shown and exported (a standalone
run could, with a chance of that order, draw another token or verdict at a draw that close to its threshold: an
equally exact round, not this one). No gradio, no HTML here.
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace

from specui.drafters.registry import LABELS
from specui.events import GenerationResult
from specui.lesson import DEFAULTS, locked
from specui.lesson_steps import Step, build_steps
from specui.sampling import Generators
from specui.settings import DecodeSettings


@dataclass(frozen=True)
class ComparedRound:
    """One round of the primary's run and the second drafter's round from the same context and draws."""

    index: int  # 0-based round of the primary's run
    context_tokens: int  # tokens before the round: the prompt and what the primary emitted so far
    primary: Step
    second: Step

    @property
    def shared_draws(self) -> int:
        """How many leading uniforms both rounds drew alike (0 in greedy mode, which draws none)."""
        pairs = zip((d.u for d in self.primary.drafts), (d.u for d in self.second.drafts))
        return next((i for i, (a, b) in enumerate(pairs) if a is None or a != b),
                    min(len(self.primary.drafts), len(self.second.drafts)))

    @property
    def same_drafts(self) -> int:
        """How many leading draft tokens the two drafters proposed alike."""
        pairs = zip((d.token_id for d in self.primary.drafts), (d.token_id for d in self.second.drafts))
        return next((i for i, (a, b) in enumerate(pairs) if a != b),
                    min(len(self.primary.drafts), len(self.second.drafts)))


@dataclass(frozen=True)
class Tally:
    """One drafter's rounds added up (up to some round)."""

    drafter: str
    label: str
    rounds: int
    drafted: int
    accepted: int
    tokens: int  # what its rounds emitted (or would have), bonus and resampled tokens included

    @property
    def acceptance_rate(self) -> float | None:
        return self.accepted / self.drafted if self.drafted else None

    @property
    def tokens_per_round(self) -> float | None:
        return self.tokens / self.rounds if self.rounds else None


@dataclass(frozen=True)
class Comparison:
    """The primary's run with the second drafter's round beside each of its rounds."""

    primary: str  # drafter names (`specui.drafters.DRAFTER_NAMES`)
    second: str
    greedy: bool
    seed: int
    rounds: tuple[ComparedRound, ...]
    result: GenerationResult  # the primary's run: the text the walk follows

    def tally(self, which: str, *, upto: int | None = None) -> Tally:
        """`which` ("primary" or "second") added up over rounds [0, upto) (every round when None)."""
        steps = [getattr(r, which) for r in self.rounds[:upto]]
        name = self.primary if which == "primary" else self.second
        return Tally(drafter=name, label=LABELS.get(name, name), rounds=len(steps),
                     drafted=sum(len(s.drafts) for s in steps), accepted=sum(s.num_accepted for s in steps),
                     tokens=sum(len(s.emitted) for s in steps))


def check(engine, settings: DecodeSettings, *, primary: str, second: str) -> None:
    """Raise ValueError, saying why, when the two drafters cannot be compared on this engine."""
    have = ", ".join(repr(d) for d in engine.drafters)
    for role, name in (("primary", primary), ("second", second)):
        if name not in engine.drafters:
            raise ValueError(f"the {role} drafter {name!r} is not one of this engine's drafters ({have})")
    if primary == second:
        raise ValueError(f"both drafters are {LABELS.get(primary, primary)}: pick a different second drafter")
    if settings.adaptive:
        raise ValueError("comparing drafters needs a fixed K (adaptive K depends on the rounds before)")


def compare(engine, tokenizer, prompt_ids: Sequence[int], settings: DecodeSettings | None = None, *,
            primary: str, second: str, lock=None, **keywords) -> Comparison:
    """Decode `prompt_ids` with `primary` and, at every round's context, run one round of `second` with the
    same draws (see the module docstring). `lock` is held for each engine call, never across two."""
    settings = (settings or DEFAULTS).but(**keywords) if keywords else (settings or DEFAULTS)
    check(engine, settings, primary=primary, second=second)
    seed = secrets.randbits(63) if settings.seed is None else settings.seed
    prompt = list(prompt_ids)
    result, before = _primary_run(engine, prompt, settings.but(speculative=True, drafter=primary, seed=seed), lock)
    steps = build_steps(result, tokenizer=tokenizer, prompt_ids=prompt, greedy=settings.greedy)
    rounds, context = [], list(prompt)
    for round_, step, draws in zip(result.rounds, steps, before):
        left = settings.max_new_tokens - (len(context) - len(prompt))  # the primary's budget at this round
        arm = settings.but(speculative=True, drafter=second, seed=seed, max_new_tokens=left)
        theirs = _one_round(engine, context, arm, draws, lock)
        other = build_steps(theirs, tokenizer=tokenizer, prompt_ids=context, greedy=settings.greedy)[0]
        rounds.append(ComparedRound(index=round_.index, context_tokens=len(context), primary=step,
                                    second=replace(other, index=round_.index, context=step.context)))
        context.extend(round_.token_ids)
    return Comparison(primary=primary, second=second, greedy=settings.greedy, seed=seed, rounds=tuple(rounds),
                      result=result)


def export_comparison(comparison: Comparison) -> dict:
    """The second drafter's rounds as the Teach tab shows them beside the primary's, as JSON-able data (the export's
    "second_drafter"): each round's `Step` (the primary's are the export's "steps"), the draws both met alike, the
    drafts both proposed alike, and both tallies over every round."""
    return {
        "primary": comparison.primary, "second": comparison.second, "greedy": comparison.greedy,
        "seed": comparison.seed,
        "rounds": [{"index": r.index, "context_tokens": r.context_tokens, "second": asdict(r.second),
                    "shared_draws": r.shared_draws, "same_drafts": r.same_drafts} for r in comparison.rounds],
        "tally": {which: asdict(comparison.tally(which)) for which in ("primary", "second")},
        "note": "round i of the second drafter is one round of a fresh run over the primary's context before its "
                "round i, drawing from a copy of the primary's draws (the same u): steps[i] is the primary's",
    }


def _primary_run(engine, prompt, settings, lock) -> tuple[GenerationResult, list[Generators]]:
    """The primary's run, and a copy of its draws' generators as they stood before each round."""
    draws = Generators(settings.seed, home=engine.device)
    result = GenerationResult()
    stream = engine.stream(prompt, settings, into=result, draws=draws)
    before = [draws.copy()]
    with contextlib.closing(stream):
        while True:
            with locked(lock):
                round_ = next(stream, None)
            if round_ is None:
                break
            before.append(draws.copy())
    return result, before[:-1]


def _one_round(engine, context, settings, draws: Generators, lock) -> GenerationResult:
    """The first round of a fresh engine stream over `context`, drawing from `draws`."""
    result = GenerationResult()
    with locked(lock), contextlib.closing(engine.stream(context, settings, into=result, draws=draws)) as stream:
        next(stream)
    return result
