"""A lesson's step records: a speculative run's rounds as a teacher shows them, one `Step` per round.

`build_steps` turns every `specui.events.Round` of a run into a `Step`: the context so far, each drafted token with
q(x), p(x), min(1, p/q), the uniform draw u and its verdict (`DraftCheck`), the residual norm(max(0, p - q))'s most
likely tokens at a rejection (`Candidate`), and the tokens the round added (`Emitted`), with their texts as the
tokenizer decodes them. Every number is copied from the engine's Round: none is recomputed. `specui.lesson` builds
them for a teaching run; `specui.lesson_compare` for a second drafter's round; the Teach tab (`specui.ui.teach_view`)
shows them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from specui.events import OWN_KINDS, Check, GenerationResult, Kind
from specui.text import TokenText

ACCEPTED, REJECTED, DISCARDED = Check.ACCEPTED, Check.REJECTED, Check.DISCARDED  # verdicts of drafted positions


@dataclass(frozen=True)
class DraftCheck:
    """One drafted position of a round, as the target judged it."""

    position: int  # 1..K
    token_id: int
    text: str
    q: float  # q(x): the drafter's probability (1.0 for a deterministic drafter: one-hot q)
    p: float | None  # p(x): the target's probability at this position (None: sampled, discarded, never read)
    accept_prob: float  # min(1, p/q) (greedy: 1 if x is the target's argmax, else 0)
    u: float | None  # the uniform draw compared with p/q (None in greedy mode)
    verdict: Check  # accepted | rejected | discarded (after the rejection, never judged)


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
    kind: Kind  # accepted | resampled | bonus | plain
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
    copied: bool = False  # the model + lookup drafter copied this round's draft from the context (q one-hot)

    @property
    def rejected(self) -> DraftCheck | None:
        return next((d for d in self.drafts if d.verdict == REJECTED), None)


def build_steps(result: GenerationResult, *, tokenizer, prompt_ids: Sequence[int], greedy: bool) -> list[Step]:
    """The rounds of `result` as `Step`s, with token texts from `tokenizer` (exactly as it decodes them)."""
    decoder = TokenText(tokenizer, prompt_ids)
    context = tokenizer.decode(list(prompt_ids), skip_special_tokens=False, clean_up_tokenization_spaces=False)
    steps = []
    for rnd in result.rounds:
        tokens = list(rnd.emitted())
        n = rnd.num_accepted
        texts = [decoder.push(t.token_id) for t in tokens[:n]]  # accepted drafts first: later drafts follow them
        drafts = [DraftCheck(position=d.index + 1, token_id=d.token_id,
                             text=texts[d.index] if d.index < len(texts) else decoder.peek(d.token_id), q=d.draft_prob,
                             p=d.target_prob, accept_prob=d.accept_prob, u=d.uniform, verdict=d.check)
                  for d in rnd.positions()]
        residual = [Candidate(int(t), decoder.peek(t), float(prob)) for t, prob in rnd.residual_top]
        texts += [decoder.push(t.token_id) for t in tokens[n:]]
        emitted = [Emitted(token_id=t.token_id, text=text, kind=t.kind, p=t.target_prob, q=t.draft_prob)
                   for t, text in zip(tokens, texts)]
        final = emitted[-1] if emitted and emitted[-1].kind in OWN_KINDS else None
        steps.append(Step(index=rnd.index, context=context, num_draft_tokens=rnd.num_draft_tokens, greedy=greedy,
                          drafts=drafts, num_accepted=n, residual=residual, emitted=emitted, final=final,
                          draft_s=rnd.draft_s, verify_s=rnd.verify_s, copied=rnd.copied))
        context += "".join(texts)
    return steps
