"""The drafter arena: one prompt decoded by the target alone and then by every drafter of an engine.

The contestants run one after another, never overlapping, with the same settings and the same seed
(plain decoding first; a seed it drew is reused by every drafter), so their timings are comparable and,
in greedy mode, their outputs must be identical token for token.

    contestants(engine, settings)   "plain", then `engine.drafters` in display order: with token trees
                               (tree_width > 1) only the drafters that draft trees (`can_draft`); the
                               rest are `skipped`, never run as chains: a table says so, not a number
    streams(engine, prompt, settings, into=...)   one engine stream per contestant, each opened only
                               when the one before it is finished (for a UI that draws every round)
    summarise(results, greedy=..., settings=..., ks=..., confidences=...)   pure: the per-contestant figures
                               (`specui.runstats`, each drafter's K as chosen and its confidence stop,
                               `k_said` the K as a table says it), the identity check
                               and each token's provenance per drafter
    run(engine, prompt, settings)    all of it at once, for the library and the tests
A drafter may race at its own K (`ks`, from a preset's `drafter_tokens`: Medusa and early exit do best
with shorter drafts than a draft model); the others at the settings' K. `chosen_k` is that K, as chosen: the
table's and Theorem 3.8's, as in the chat tab's stats line and the Teach tab (`lesson.chosen_k`), even where
the token budget cut every round short (K 64 and 64 new tokens: 63 drafts at most in the first round).

A token's provenance per drafter (`Credit.kinds`) is how that drafter's own run emitted the token at
that position: `accepted` (the drafter proposed exactly this token there and the target kept it),
`resampled` (it proposed another token, which the target turned down) or `bonus` (it proposed nothing
more: the target's own token after a fully accepted block, or after an empty draft). Positions are
those of plain decoding's output; a run whose output parted from it (sampling) has no kind from there on.
No gradio, no HTML: `specui.ui` draws these records.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from specui import metrics, runstats
from specui.drafters.registry import COPIES, LABELS, PROMPT_LOOKUP
from specui.events import GenerationResult, Kind
from specui.settings import TREE_DRAFTERS, DecodeSettings, why_no_trees

PLAIN = "plain"  # the contestant without a drafter: the target alone
PLAIN_LABEL = "plain (target alone)"


def skip_reason(name: str) -> str:
    """Why drafter `name` sat out a token-tree arena (it is in `ArenaRun.skipped`)."""
    return f"cannot draft token trees ({why_no_trees(name)})"


def label(name: str) -> str:
    """What people read for a contestant: "plain (target alone)" or the drafter's label."""
    return PLAIN_LABEL if name == PLAIN else LABELS.get(name, name)


def can_draft(name: str, settings: DecodeSettings) -> bool:
    """Whether contestant `name` can decode with `settings`: plain always; with token trees only the drafters
    that draft trees (`skip_reason` says why the others cannot)."""
    return name == PLAIN or settings.tree_width == 1 or name in TREE_DRAFTERS


def contestants(engine, settings: DecodeSettings | None = None) -> tuple[str, ...]:
    """Plain decoding, then every drafter the engine can draft with (with `settings`: that can decode with
    them, see `can_draft`), in display order."""
    names = (PLAIN, *engine.drafters)
    return names if settings is None else tuple(name for name in names if can_draft(name, settings))


def skipped(engine, settings: DecodeSettings) -> tuple[str, ...]:
    """The engine's drafters an arena with `settings` leaves out (token trees: those that cannot draft them)."""
    return tuple(name for name in engine.drafters if not can_draft(name, settings))


def chosen_k(settings: DecodeSettings, name: str, ks: Mapping[str, int] | None = None) -> int | None:
    """The K contestant `name` races at, as chosen: its own in `ks` (a preset's `drafter_tokens`), else the
    settings'; None for plain decoding and with adaptive K (then the run's own: `metrics.run_k`)."""
    if name == PLAIN or settings.adaptive:
        return None
    return (ks or {}).get(name) or settings.num_draft_tokens


def stops_sooner(k: int, confidence: float | None, drafter: str) -> bool:
    """Whether a confidence stop (`confidence` > 0) may end `drafter`'s rounds before K: one with probabilities to stop
    on (not prompt lookup) at K 2 or more (a round drafts at least one token)."""
    return bool(confidence) and k > 1 and drafter != PROMPT_LOOKUP


def at_most_k(k: int, confidence: float | None, drafter: str) -> bool:
    """Whether K is the most a round of `drafter` drafts and a stop may make it fewer (`stops_sooner`): not a drafter
    that copies (`COPIES`), whose copied rounds draft up to their copy's length, past a K below it."""
    return stops_sooner(k, confidence, drafter) and drafter not in COPIES


def k_said(k: int | None, confidence: float | None, drafter: str, *, at_most: str = "≤ ", none: str = "–") -> str:
    """A contestant's K as a table gives it: `at_most` before it where its rounds draft K at most and may draft fewer
    (`at_most_k`); `none` for no K (plain decoding)."""
    if not k:
        return none
    return f"{at_most}{k}" if at_most_k(k, confidence, drafter) else str(k)


def arm_settings(settings: DecodeSettings, name: str, *, seed: int | None, k: int | None = None,
                 confidence: float | None = None) -> DecodeSettings:
    """A contestant's settings: the shared ones, its drafter (none for plain), the shared seed, and its own
    K and draft_confidence when it has them (`k`: a preset's `drafter_tokens`; `confidence`: its
    `draft_confidence`, tuned for its chains: a token tree takes the settings' own as its floor)."""
    if name == PLAIN:
        return settings.but(speculative=False, seed=seed)
    own = {"num_draft_tokens": k} if k else {}  # as `chosen_k` reads it
    return settings.but(speculative=True, drafter=name, seed=seed, **own,
                        draft_confidence=raced_confidence(settings, name, confidence))


def raced_confidence(settings: DecodeSettings, name: str, confidence: float | None = None) -> float:
    """The draft_confidence contestant `name` races with (`arm_settings`): its own `confidence` on a chain, else the
    settings' (a token tree's floor); 0 for plain decoding."""
    if name == PLAIN:
        return 0.0
    return confidence if confidence is not None and settings.tree_width == 1 else settings.draft_confidence


def streams(engine, prompt: Sequence[int], settings: DecodeSettings, *, into: dict[str, GenerationResult],
            names: Sequence[str] | None = None, ks: Mapping[str, int] | None = None,
            confidences: Mapping[str, float] | None = None) -> Iterator[tuple[str, Iterator]]:
    """(name, engine stream) per contestant, in order; each result fills `into[name]`.

    Plain decoding's stream is opened now, so bad settings or a prompt too long raise ValueError here,
    before any work. The next stream opens only when the caller asks for it: finish (or close) each
    stream first, and no two runs ever overlap. names: a subset of `contestants(engine)` (plain first).
    ks: drafters that race at their own K (a preset's `drafter_tokens`); the rest at the settings' K.
    confidences: drafters that race with their own draft_confidence (a preset's `draft_confidence`).
    """
    names = tuple(names) if names is not None else contestants(engine, settings)
    if not names or names[0] != PLAIN:
        raise ValueError(f"the arena starts with {PLAIN!r}; got {names!r}")
    into[PLAIN] = GenerationResult()
    first = engine.stream(prompt, arm_settings(settings, PLAIN, seed=settings.seed), into=into[PLAIN])
    return _one_after_another(engine, prompt, settings, names, first, into, ks or {}, confidences or {})


def _one_after_another(engine, prompt, settings, names, first, into, ks, confidences) -> Iterator[tuple[str, Iterator]]:
    yield PLAIN, first
    seed = into[PLAIN].seed  # the seed plain decoding used (drawn if the settings had none)
    for name in names[1:]:
        into[name] = GenerationResult()
        own = arm_settings(settings, name, seed=seed, k=ks.get(name), confidence=confidences.get(name))
        yield name, engine.stream(prompt, own, into=into[name])


def warm_up(engine, prompt: Sequence[int], settings: DecodeSettings | None = None, *,
            names: Sequence[str] | None = None, lock=None, ks: Mapping[str, int] | None = None,
            confidences: Mapping[str, float] | None = None) -> None:
    """Three tokens with each contestant (`names`, else those that can decode with `settings`), with the arena's
    settings as `streams` gives them (sampled or greedy, token trees, each drafter's own K and draft_confidence), so
    that the first use of what a contestant's run takes (a drafter's preparation, its native rounds, the tree or the
    sampled paths and what they set up once) falls here, not inside its timed run."""
    settings = (settings or DecodeSettings()).but(max_new_tokens=3, ignore_eos=True)
    ks, confidences = ks or {}, confidences or {}
    for name in names if names is not None else contestants(engine, settings):
        with lock if lock is not None else contextlib.nullcontext():
            engine.generate(list(prompt)[-8:], arm_settings(settings, name, seed=0, k=ks.get(name),
                                                            confidence=confidences.get(name)))


# -- the records -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Standing:
    """One contestant's figures (engine time, as the chat tab measures a run)."""

    name: str
    label: str
    result: GenerationResult  # its tokens, their kinds and its rounds
    stats: runstats.RunStats  # alpha, mean accepted length, c, tokens/s (Theorem 3.8 at `k`)
    speedup: float | None  # its tokens/s over plain decoding's
    finished: bool  # ran to its end (EOS or the token budget), not stopped
    identical: bool | None  # greedy and finished: its tokens equal plain decoding's; None otherwise
    k: int | None = None  # the K it raced at as chosen (`chosen_k`; adaptive: the run's own); None for plain
    confidence: float = 0.0  # the draft_confidence it raced with (`arm_settings`); 0: no confidence stop, or unknown


@dataclass(frozen=True)
class Credit:
    """One token of plain decoding's output and how each drafter's run emitted it (see the module docstring)."""

    index: int
    token_id: int
    kinds: dict[str, Kind | None]  # drafter name -> accepted | resampled | bonus; None: not (yet) there

    @property
    def drafted_by(self) -> tuple[str, ...]:
        """The drafters that proposed this token at this position in their runs (accepted drafts)."""
        return tuple(name for name, kind in self.kinds.items() if kind == Kind.ACCEPTED)


@dataclass(frozen=True)
class Arena:
    """The arena's outcome, or its state so far while it runs."""

    names: tuple[str, ...]  # the contestants that have run (or are running), plain first
    standings: tuple[Standing, ...]
    credits: tuple[Credit, ...]  # one per token of plain decoding's output
    greedy: bool
    skipped: tuple[str, ...] = ()  # drafters left out because they cannot decode with the settings (skip_reason)

    @property
    def identical(self) -> bool | None:
        """Greedy: every finished drafter's output equals plain decoding's (None when sampling or none finished)."""
        checks = [s.identical for s in self.standings if s.name != PLAIN and s.identical is not None]
        return all(checks) if checks else None

    def standing(self, name: str) -> Standing:
        return next(s for s in self.standings if s.name == name)


def summarise(results: Mapping[str, GenerationResult], *, greedy: bool, skipped: Sequence[str] = (),
              settings: DecodeSettings | None = None, ks: Mapping[str, int] | None = None,
              confidences: Mapping[str, float] | None = None) -> Arena:
    """The figures, the identity check and the provenance of each token, from the contestants' results
    (`results[PLAIN]` first; a result may be partial while the arena runs); `skipped`: the drafters left out.
    `settings`, `ks` and `confidences` (as `streams` took them) give each drafter's K as chosen (`chosen_k`) and the
    draft_confidence it raced with; without them, or with adaptive K, a drafter's K is its run's own
    (`metrics.run_k`), and without settings its confidence 0."""
    plain = results[PLAIN]
    plain_stats = runstats.run_stats(plain) if plain.rounds else None
    standings = []
    for name, result in results.items():
        if not result.rounds:
            continue
        k, confidence = None, 0.0
        if name != PLAIN:  # as chosen; with adaptive K (or no settings given) the run's own
            k = (chosen_k(settings, name, ks) if settings is not None else None) or metrics.run_k(result.rounds)
            if settings is not None:  # as `streams` raced it
                confidence = raced_confidence(settings, name, (confidences or {}).get(name))
        stats = plain_stats if name == PLAIN else runstats.run_stats(result, plain=plain, k=k)
        finished = bool(result.stop_reason)  # set by the engine at a run's last round
        same = result.token_ids == plain.token_ids if greedy and finished and plain.stop_reason else None
        standings.append(Standing(name=name, label=label(name), result=result, stats=stats,
                                  speedup=runstats.speedup(stats, plain_stats), finished=finished, identical=same,
                                  k=k, confidence=confidence))
    return Arena(names=tuple(results), standings=tuple(standings), credits=tuple(credits(results)), greedy=greedy,
                 skipped=tuple(skipped))


def credits(results: Mapping[str, GenerationResult]) -> list[Credit]:
    """Per token of plain decoding's output: each drafter's kind there, while its output agrees with plain's."""
    reference = results[PLAIN].token_ids
    agree = {}  # drafter -> how many leading tokens of its output equal plain decoding's
    for name, result in results.items():
        if name != PLAIN:
            part = runstats.first_difference(result.token_ids, reference)
            agree[name] = min(len(result.token_ids), len(reference)) if part is None else part
    return [Credit(index=i, token_id=token,
                   kinds={name: Kind(results[name].kinds[i]) if i < agree[name] else None for name in agree})
            for i, token in enumerate(reference)]


def run(engine, prompt: Sequence[int], settings: DecodeSettings | None = None, *, names: Sequence[str] | None = None,
        stop=None, warm: bool = True, ks: Mapping[str, int] | None = None,
        confidences: Mapping[str, float] | None = None) -> Arena:
    """Decode `prompt` with each contestant in turn and summarise. `stop` (e.g. a threading.Event) ends
    the arena at the next round; the contestants not yet run are left out. Without `names`, the drafters
    that cannot decode with `settings` (token trees) are left out and named in `Arena.skipped`. ks: the
    drafters' own K, as in `streams` (e.g. `dict(engine.preset.drafter_tokens)`); confidences: their own
    draft_confidence (e.g. `dict(engine.preset.draft_confidence)`)."""
    settings = settings or DecodeSettings()
    left_out = skipped(engine, settings) if names is None else ()
    names = tuple(names) if names is not None else contestants(engine, settings)
    if warm:
        warm_up(engine, prompt, settings, names=names, ks=ks, confidences=confidences)
    results: dict[str, GenerationResult] = {}
    for _, stream in streams(engine, prompt, settings, into=results, names=names, ks=ks, confidences=confidences):
        with contextlib.closing(stream):
            for _ in stream:
                if stop is not None and stop.is_set():
                    break
        if stop is not None and stop.is_set():
            break
    return summarise(results, greedy=settings.greedy, skipped=left_out, settings=settings, ks=ks,
                     confidences=confidences)
