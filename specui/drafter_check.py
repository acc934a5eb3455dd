"""Check a drafter's exactness on a real engine: `specui.check_drafter(engine, drafter, ids)`.

A drafter of your own plugs into the engine as any object with the `Drafter` methods (docs/drafters.md, "Your own
drafter"). The engine checks each proposal's form (integer ids inside the vocabulary, q rows that are
distributions), but not that each token was really drawn from the q its drafter reports, which the accept/reject
rule needs to stay exact. This checks it the way specui's own tests check its drafters:

- the law: `runs` sampled runs, each with its own seed, of K + 1 tokens (so the first round drafts K), and a
  chi-square test of each token's counts given the tokens before it against the target's own distribution after
  them (computed from the target's logits under the same temperature, top-k and top-p), prefixes seen fewer than
  10 times left out and cells expected fewer than 5 times pooled; a token the target gives no chance (outside
  top-k) fails at once;
- greedy identity: a greedy run with the drafter against plain decoding, token for token.

A drafter whose q is not the law it draws from, at any of the K positions of the first round (or in the round after
a rejection), shifts the law of the run's tokens, and `passed` turns False (its p-value falls below `alpha`). With
`alpha = 1e-3` a correct drafter fails one seed in a thousand: rerun with another `seed` before you believe it. It
tests the first K + 1 tokens of one prompt: give a prompt where your drafter does what you want to test (its state
after `start`, a copy it finds), and several prompts for more.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import torch

from specui.sampling import Sampling, logits_to_probs

MIN_EXPECTED = 5  # cells expected fewer times than this are pooled, as a chi-square test wants


@dataclass(frozen=True)
class DrafterCheck:
    """What `check_drafter` found; `passed` when both hold. str() is one line."""

    drafter: str
    runs: int
    p_value: float  # the chi-square test of the runs' law (1.0: nothing to test, e.g. a sure target)
    cells: int  # the test's cells, over every position and prefix tested
    greedy_identical: bool  # a greedy run with the drafter gave plain decoding's tokens
    alpha: float

    @property
    def passed(self) -> bool:
        return self.greedy_identical and self.p_value >= self.alpha

    def __str__(self) -> str:
        verdict = "passed" if self.passed else "FAILED"
        return (f"drafter {self.drafter!r} {verdict}: {self.runs} sampled runs, each token against the "
                f"target's law after the tokens before it, chi-square p = {self.p_value:.3g} over {self.cells} cells (fails below "
                f"{self.alpha:g}); greedy output {'identical to' if self.greedy_identical else 'DIFFERENT from'} "
                "plain decoding")


def check_drafter(engine, drafter, input_ids, *, runs: int = 2000, num_draft_tokens: int = 4,
                  temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0, greedy_tokens: int = 32,
                  seed: int = 0, alpha: float = 1e-3) -> DrafterCheck:
    """Whether `drafter` (an object with the `Drafter` methods, or a drafter name) keeps `engine`'s output exact.

    input_ids: one prompt's token ids, as `engine.generate` takes them.
    runs: sampled runs for the law test (2000 finds a q off by a few percent on a small vocabulary; a large one
          spreads the counts thinly: a lower temperature or a top_k concentrates them).
    num_draft_tokens: K of the first round. temperature (> 0), top_k, top_p: the runs' sampling transform.
    greedy_tokens: the length of the greedy identity check (0 skips it). seed: run i takes seed + i.
    alpha: the p-value below which the law test fails.
    Returns a `DrafterCheck` (`.passed`, `.p_value`, `.greedy_identical`; print it for one line). A malformed
    proposal raises the engine's ValueError, which names what to change.
    """
    if isinstance(runs, bool) or not isinstance(runs, int) or runs < 50:
        raise ValueError(f"runs must be an integer of at least 50 (a chi-square test needs counts), got {runs!r}")
    if isinstance(num_draft_tokens, bool) or not isinstance(num_draft_tokens, int) or num_draft_tokens < 1:
        raise ValueError(f"num_draft_tokens must be an integer >= 1, got {num_draft_tokens!r}")
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not temperature > 0:
        raise ValueError(f"temperature must be above 0: the law test samples (greedy is checked apart), got "
                         f"{temperature!r}")
    settings = dict(num_draft_tokens=num_draft_tokens, temperature=temperature, top_k=top_k, top_p=top_p,
                    draft_confidence=0.0, drafter=drafter, ignore_eos=True)
    seqs = [tuple(engine.generate(input_ids, max_new_tokens=num_draft_tokens + 1, seed=(seed + i) % 2**64,
                                  **settings).token_ids) for i in range(runs)]
    prompt = _ids(engine, input_ids)
    sampling = Sampling(temperature=float(temperature), top_k=top_k, top_p=float(top_p))
    p_value, cells = _law_p_value(engine, prompt, sampling, seqs)
    identical = True
    if greedy_tokens:
        greedy = dict(max_new_tokens=greedy_tokens, temperature=0.0, num_draft_tokens=num_draft_tokens,
                      draft_confidence=0.0)
        plain = engine.generate(input_ids, speculative=False, **greedy).token_ids
        identical = engine.generate(input_ids, drafter=drafter, **greedy).token_ids == plain
    name = drafter if isinstance(drafter, str) else getattr(drafter, "name", None) or type(drafter).__name__
    return DrafterCheck(drafter=str(name), runs=runs, p_value=p_value, cells=cells, greedy_identical=identical,
                        alpha=alpha)


def _ids(engine, input_ids) -> list[int]:
    """The prompt as the engine reads it (a list, a tensor or the tokenizer's output)."""
    from specui.engine_checks import check_prompt

    return check_prompt(input_ids, engine.vocab_size)


@torch.inference_mode()
def _next_probs(engine, rows: list[list[int]], sampling: Sampling) -> torch.Tensor:
    """The target's transformed distribution after each row (rows of one length), [len(rows), V] float64."""
    out = []
    for start in range(0, len(rows), 64):  # a few at a time: a large target's logits are [64, n, V]
        batch = torch.tensor(rows[start:start + 64], device=engine.device)
        logits = engine.target_model(input_ids=batch).logits[:, -1, :engine.vocab_size]
        out.append(logits_to_probs(logits.float(), sampling).double().cpu())
    return torch.cat(out)


def _law_p_value(engine, prompt: list[int], sampling: Sampling, seqs: list[tuple[int, ...]]) -> tuple[float, int]:
    """The chi-square p-value of every position's token given the tokens before it, and the test's cells.

    Each position t's runs are grouped by their first t tokens; a group of at least 2 * MIN_EXPECTED runs is
    compared with the target's law after that prefix (its rare tokens pooled). Under the target's law each group's
    counts are multinomial given its size, so the groups' statistics add up to one chi-square over their summed
    degrees of freedom: a drafter off at any drafted position (or in a later round) moves some group's counts."""
    stat, df, cells = 0.0, 0, 0
    for t in range(max(map(len, seqs))):
        groups: dict[tuple[int, ...], Counter] = {}
        for seq in seqs:
            if len(seq) > t:
                groups.setdefault(seq[:t], Counter())[seq[t]] += 1
        tested = [prefix for prefix, counts in groups.items() if counts.total() >= 2 * MIN_EXPECTED]
        if not tested:
            break  # every prefix of t tokens seen too rarely to test, and those of later positions more so
        for prefix, probs in zip(tested, _next_probs(engine, [[*prompt, *prefix] for prefix in tested], sampling)):
            counts = groups[prefix]
            if any(probs[b] == 0 for b in counts):
                return 0.0, cells  # a token the target never emits after this prefix (outside top-k, top-p)
            group_stat, group_cells = _pearson(counts, probs / probs.sum())
            stat, df, cells = stat + group_stat, df + group_cells - 1, cells + group_cells
    if not df:
        return 1.0, cells  # nothing to test, e.g. a sure target
    return float(torch.special.gammaincc(torch.tensor(df / 2, dtype=torch.float64),
                                         torch.tensor(stat / 2, dtype=torch.float64))), cells


def _pearson(counts: Counter, probs: torch.Tensor) -> tuple[float, int]:
    """Pearson's statistic of one group's counts against `probs` and its cells: tokens expected MIN_EXPECTED times
    or more a cell each, the rest one cell, pooled with the rarest where it is expected fewer times itself."""
    n = counts.total()
    big = (probs * n >= MIN_EXPECTED).nonzero()[:, 0].tolist()
    expected, observed = [float(probs[b]) * n for b in big], [counts.get(b, 0) for b in big]
    rest_expected, rest_observed = n - sum(expected), n - sum(observed)
    if rest_expected >= MIN_EXPECTED or not expected:
        expected.append(rest_expected)
        observed.append(rest_observed)
    elif rest_expected > 0 or rest_observed:
        i = min(range(len(expected)), key=expected.__getitem__)
        expected[i] += rest_expected
        observed[i] += rest_observed
    if len(expected) < 2:
        return 0.0, len(expected)
    return sum((o - e) ** 2 / e for o, e in zip(observed, expected)), len(expected)
