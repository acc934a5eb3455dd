"""What the engine reports: one `Round` per draft-then-verify step, and the whole `GenerationResult`.

Everything a UI draws comes from these records; nothing here needs a model or a tokenizer.
Token provenance (`Kind`, string-valued so JSON and HTML classes read the same words):
    accepted   a draft token the target accepted
    resampled  the target's token at the first rejection (greedy: its correction)
    bonus      the target's extra token after a fully accepted block (also the token of a round
               whose drafter proposed nothing, e.g. prompt lookup without a match)
    plain      a token of plain decoding by the target alone
    rejected   a drafted token the target turned down (shown by the UI, never emitted)
A drafted position's outcome (`Check`): accepted, rejected (the first rejection) or discarded
(after the rejection, never judged).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import Enum

from specui import metrics


class _Label(str, Enum):
    """A str-valued enum that prints, formats, serialises and shows (repr) as its value: a notebook shows a round's
    kinds as ['accepted', 'bonus'], strings they equal, not [<Kind.ACCEPTED: 'accepted'>, <Kind.BONUS: 'bonus'>]."""

    def __str__(self) -> str:
        return self.value

    def __repr__(self) -> str:
        return repr(self.value)

    __format__ = str.__format__


class Kind(_Label):
    ACCEPTED = "accepted"
    RESAMPLED = "resampled"
    BONUS = "bonus"
    PLAIN = "plain"
    REJECTED = "rejected"


class Check(_Label):
    ACCEPTED = "accepted"
    REJECTED = "rejected"
    DISCARDED = "discarded"


KINDS = (Kind.ACCEPTED, Kind.RESAMPLED, Kind.BONUS, Kind.PLAIN)  # the kinds of emitted tokens
OWN_KINDS = frozenset({Kind.RESAMPLED, Kind.BONUS, Kind.PLAIN})  # a round's own token (not a draft)


@dataclass(frozen=True)
class Position:
    """One drafted position of a round, as the target judged it."""

    index: int  # 0-based; position index + 1 in the paper's numbering
    token_id: int
    target_prob: float | None  # p(x) (None: sampled, discarded after the rejection, its row never read)
    draft_prob: float  # q(x) (1.0 for a deterministic drafter)
    accept_prob: float | None  # min(1, p/q) (greedy: 1.0 or 0.0)
    uniform: float | None  # the draw compared with p/q (None in greedy mode or when never judged)
    check: Check


@dataclass(frozen=True)
class Emitted:
    """One token a round emitted."""

    index: int  # 0-based within the round
    token_id: int
    kind: Kind
    target_prob: float  # p at its position
    draft_prob: float | None  # q at its position (None: no draft distribution there)
    accept_prob: float | None  # min(1, p/q) of the draft judged at its position (None for a bonus or plain token)


@dataclass(frozen=True)
class TreeNode:
    """One node of a tree round's draft, as the target judged it (`specui.tree_verify`)."""

    index: int  # its index in the round's tree
    token_id: int
    parent: int  # -1: a child of the root (the round's first token, cur)
    target_prob: float | None  # p(x) at its parent, before any sibling's rejection (sampled: None where the walk
    # never reached its parent, whose row is then never transformed)
    draft_prob: float  # q(x), the draft's probability at its parent
    accept_prob: float | None  # min(1, p/q) (sampled children), the residual p(x) (deterministic), 1/0 (greedy)
    uniform: float | None  # the draw it was judged with (None: greedy, or never judged)
    verdict: str  # "accepted", "rejected" or "unvisited"


@dataclass(frozen=True)
class Round:
    """One round: K drafted tokens checked by one target forward, emitting 1..K+1 tokens.

    Per drafted position i (lists of length len(drafted)):
        target_probs[i]  p(x_i), the target's probability of the drafted token (sampled: None past the rejection,
                         whose rows the rule never reads, `specui.sampling.Rows`)
        draft_probs[i]   q(x_i), the drafter's probability (1.0 for deterministic drafters)
        accept_probs[i]  min(1, p/q) (greedy: 1.0 if x_i is the target's argmax, else 0.0); sampled, only the
                         judged positions 0..n have one
        uniforms[i]      the uniform draw r_i compared with p/q (empty in greedy mode)
    Per emitted token j (lists of length len(token_ids)):
        kinds[j]         provenance, see the module docstring
        token_target_probs[j]  p of the emitted token at its position
        token_draft_probs[j]   q of the emitted token at its position, None where the drafter
                               gave no distribution (bonus and plain tokens, deterministic drafts)
    In greedy mode p and q are the models' plain softmax probabilities, shown for information.
    And: index (0-based, in the run), num_accepted (drafts accepted; num_drafted: drafted), num_draft_tokens (the K
    asked of the drafter: it may propose fewer, a copy more), residual_top (at a sampled rejection, the residual's
    most likely (token, probability) pairs), copied (the model + lookup drafter copied this draft from the context),
    speculative (False: a plain round); seconds: draft_s drafting, verify_s the target's forward and the decision
    (forward_s of it the forward alone), elapsed_s since the run began when the round ended (the prompt included).
    Tree rounds (tree_width > 1) also give `tree` (every node: token, parent, p, q, verdict) and
    `tree_path` (the accepted nodes, root to leaf) and `tree_sampled` (children drawn from q, else chosen); their
    per-position lists above describe the path the target walked: the accepted nodes, then the first rejected child
    where it stopped (if any).
    """

    index: int
    token_ids: list[int]
    kinds: list[str]
    drafted: list[int]
    num_accepted: int
    target_probs: list[float | None]
    draft_probs: list[float]
    accept_probs: list[float]
    uniforms: list[float]
    token_target_probs: list[float]
    token_draft_probs: list[float | None]
    residual_top: list[tuple[int, float]]  # at a rejection: the residual's most likely tokens
    num_draft_tokens: int  # K asked of the drafter this round (it may propose fewer; a copy may be longer)
    draft_s: float  # seconds spent drafting
    verify_s: float  # seconds in the target forward and the accept/reject decision
    elapsed_s: float  # seconds since the generation started (prefill included) when the round ended
    speculative: bool = True
    tree: tuple[TreeNode, ...] | None = field(default=None, repr=False)  # tree rounds only: every drafted node (up
    # to 256: left out of the repr, which a notebook shows)
    tree_path: tuple[int, ...] | None = None  # tree rounds only: the accepted nodes' indices
    tree_sampled: bool = False  # tree rounds: children drawn i.i.d. from q (p <- norm(max(0, p - q)) on a
    # rejection); False: chosen deterministically (the rejected token leaves p, which is renormalised)
    copied: bool = False  # the model + lookup drafter copied this round's draft from the context (no model forward)
    forward_s: float = 0.0  # of verify_s, the seconds in the target's forward itself (the rest: the decision,
    # the record)

    @property
    def num_drafted(self) -> int:
        return len(self.drafted)

    def positions(self) -> Iterator[Position]:
        """Each drafted position with its p, q, acceptance probability, draw and outcome."""
        n = self.num_accepted
        for i, token in enumerate(self.drafted):
            check = Check.ACCEPTED if i < n else Check.REJECTED if i == n else Check.DISCARDED
            p = self.target_probs[i]
            yield Position(index=i, token_id=int(token), target_prob=None if p is None else float(p),
                           draft_prob=float(self.draft_probs[i]),
                           accept_prob=float(self.accept_probs[i]) if i < len(self.accept_probs) else None,
                           uniform=float(self.uniforms[i]) if i < len(self.uniforms) else None, check=check)

    def emitted(self) -> Iterator[Emitted]:
        """Each emitted token with its kind, p, q and (for a judged draft position) min(1, p/q)."""
        for j, (token, kind) in enumerate(zip(self.token_ids, self.kinds)):
            q = self.token_draft_probs[j]
            judged = kind in (Kind.ACCEPTED, Kind.RESAMPLED) and j < len(self.accept_probs)
            yield Emitted(index=j, token_id=int(token), kind=Kind(kind), target_prob=float(self.token_target_probs[j]),
                          draft_prob=None if q is None else float(q),
                          accept_prob=float(self.accept_probs[j]) if judged else None)


@dataclass
class GenerationResult:
    """The tokens of one generation, their provenance, and every round that produced them.

    token_ids      the new tokens only (an EOS that ended the run is the last); decode them with the tokenizer
    kinds          one per token: 'accepted', 'resampled', 'bonus' or 'plain' (`Kind`)
    rounds         every `Round`, in order: drafted tokens, p, q, draws, timings
    stop_reason    'eos' (the model ended its answer), 'length' (max_new_tokens reached), or '' for a run not ended:
                   a stream's `into` while it runs, or once it was left (break, Ctrl-C, an error)
    prefill_s      seconds reading the prompt; total_s: seconds in all, the prompt included
    reused_tokens  prompt tokens a conversation's cache held, not read again (`specui.prompt_cache`)
    seed           the run's seed (drawn when none was given): seed= repeats a sampled run
    speculative    False for plain decoding
    Figures (as the benchmark computes them, `specui.metrics`): num_drafted and num_accepted draft tokens,
    acceptance_rate (accepted / drafted), mean_accepted_length (tokens per target forward; None without a round),
    tokens_per_s (new tokens / total_s).
    """

    token_ids: list[int] = field(default_factory=list)  # new tokens only
    kinds: list[str] = field(default_factory=list)
    rounds: list[Round] = field(default_factory=list)
    prefill_s: float = 0.0
    reused_tokens: int = 0  # prompt tokens a conversation's cache held (not read again: `specui.prompt_cache`)
    total_s: float = 0.0
    stop_reason: str = ""  # "eos" | "length"; "" until the run ends
    seed: int | None = None
    speculative: bool = True

    def add(self, round_: Round) -> None:
        self.rounds.append(round_)
        self.token_ids.extend(round_.token_ids)
        self.kinds.extend(round_.kinds)
        self.total_s = round_.elapsed_s

    @property
    def num_drafted(self) -> int:
        return sum(r.num_drafted for r in self.rounds)

    @property
    def num_accepted(self) -> int:
        return sum(r.num_accepted for r in self.rounds)

    @property
    def acceptance_rate(self) -> float | None:
        """Accepted draft tokens / drafted tokens (None when nothing was drafted)."""
        return metrics.acceptance_rate(self.rounds)

    @property
    def mean_accepted_length(self) -> float | None:
        """Tokens emitted per target forward, bonus included (vLLM / Spec-Bench); plain decoding = 1.0; None for a
        run with no round (one stopped before its first: no forward, so no figure, not 0)."""
        return metrics.mean_accepted_length(self.rounds)

    @property
    def tokens_per_s(self) -> float:
        return len(self.token_ids) / self.total_s if self.total_s > 0 else 0.0

    def __repr__(self) -> str:
        """A line a notebook can show: the counts and the first and last ids, not every token and round."""
        ids = self.token_ids
        shown = ", ".join(map(str, ids)) if len(ids) <= 12 else \
            f"{', '.join(map(str, ids[:8]))}, ..., {', '.join(map(str, ids[-3:]))}"
        alpha = self.acceptance_rate
        return (f"GenerationResult({_count(len(ids), 'token')} [{shown}], {_count(len(self.rounds), 'round')}, "
                f"stop_reason={self.stop_reason!r}, speculative={self.speculative}, "
                f"acceptance_rate={'None' if alpha is None else f'{alpha:.3f}'}, seed={self.seed})")

    @property
    def text(self):
        """None to give: the engine works on token ids; this says so where a user looks for the text."""
        raise AttributeError("GenerationResult has no text: the engine works on token ids; decode them with the "
                             "tokenizer the prompt was made with: tokenizer.decode(result.token_ids, "
                             "skip_special_tokens=True), where an engine from specui.load_engine carries it as "
                             "engine.tokenizer (your own models: AutoTokenizer.from_pretrained(the target's folder))")


def _count(n: int, noun: str) -> str:
    """'1 token', '12 tokens': a count and its noun, singular for one."""
    return f"{n} {noun}{'' if n == 1 else 's'}"
