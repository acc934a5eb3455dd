"""Verification of one drafted block: the accept/reject rule of speculative sampling.

References: Leviathan, Kalman, Matias, "Fast Inference from Transformers via Speculative Decoding"
(ICML 2023), Algorithm 1; Chen et al., "Accelerating Large Language Model Decoding with Speculative
Sampling" (2023), Algorithm 2. Their names map to ours as follows:

    p(x)   target distribution           -> target_probs[i]  (after the shared sampling transform)
    q(x)   draft distribution            -> draft_probs[i]   (None: deterministic drafts, one-hot q)
    x_i    drafted token i               -> draft_tokens[i]
    r_i    uniform draw for token i      -> uniforms[i]
    n      number of accepted drafts     -> Verdict.num_accepted

Draft token x_i is accepted when r_i < p(x_i) / q(x_i) (so with probability min(1, p/q); a token with
q(x) = 0 or p(x) = 0 is never accepted). At the first rejection the round ends with a token drawn
from norm(max(0, p - q)) ("resampled"); when all K drafts pass, the target's distribution at
position K+1 gives one more token ("bonus"). Either way the emitted tokens are distributed exactly
as if the target had sampled them alone. Greedy decoding is the argmax case: accept while the draft
equals the target's argmax; the correction (or bonus) is the target's argmax. That argmax is taken of
the logits, as plain decoding takes it, and given to `verify`: two logits a few ulps apart can round
to the same probability, and an argmax of the probabilities would then pick another token.

This module is pure: tensors in, a Verdict out. No model calls, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from specui.events import Kind
from specui.sampling import sample

ACCEPTED, RESAMPLED, BONUS, PLAIN = Kind.ACCEPTED, Kind.RESAMPLED, Kind.BONUS, Kind.PLAIN


@dataclass(frozen=True)
class Verdict:
    num_accepted: int  # n: drafts 0..n-1 were accepted
    next_token: int  # the round's last token: resampled at position n, or the bonus after K drafts
    next_kind: str  # RESAMPLED or BONUS
    accept_probs: list[float]  # min(1, p(x_i)/q(x_i)) per judged position, 0..n (greedy: 1.0 or 0.0 per drafted one)
    uniforms: list[float]  # r_i per drafted position (empty in greedy mode)
    residual: torch.Tensor | None  # [V] norm(max(0, p - q)) at the rejection, None otherwise


def verify(
    *,
    target_probs: torch.Tensor,
    draft_tokens: torch.Tensor,
    draft_probs: torch.Tensor | None,
    generator: torch.Generator | None,
    target_argmax: torch.Tensor | None = None,
) -> Verdict:
    """Decide one round.

    target_probs: [K+1, V] target distribution at each drafted position and one past the last: a tensor, or
                  `specui.sampling.Rows`, which transforms a row when it is read (rows past the first
                  rejection are not). Unused in greedy mode.
    draft_tokens: [K] int64 drafted tokens (K may be 0).
    draft_probs:  [K, V] the draft distributions the tokens were sampled from, or None for
                  deterministic drafts (q is one-hot on the drafted token). Ignored in greedy mode.
    generator:    the source of the uniform draws and of the resampled or bonus token; it must live on
                  target_probs' device. Unused in greedy mode.
    target_argmax: greedy decoding: [K+1] int64, the argmax of the target's logits at each position
                  (`logits.argmax(-1)`). None: speculative sampling from target_probs.
    """
    k = draft_tokens.shape[0]
    if target_argmax is not None:
        best = target_argmax.tolist()  # [K+1]
        drafted = draft_tokens.tolist()
        n = 0
        while n < k and drafted[n] == best[n]:
            n += 1
        accept_probs = [1.0 if drafted[i] == best[i] else 0.0 for i in range(k)]
        return Verdict(n, best[n], RESAMPLED if n < k else BONUS, accept_probs, [], None)

    # every draw r_i first, as one call (the stream does not depend on how many rows the decision reads); then the
    # rows in order, each read only once the drafts before it passed: a row past the first rejection is never read
    r = torch.rand(k, generator=generator, device=target_probs.device)  # [K], in [0, 1)
    uniforms, drafted = r.tolist(), draft_tokens.tolist()
    real = np.float64 if draft_probs is not None and draft_probs.dtype == torch.float64 else np.float32
    tiny = real(torch.finfo(torch.float32 if draft_probs is None else draft_probs.dtype).tiny)
    accept_probs, n = [], 0
    while n < k:
        x = drafted[n]
        p_x = real(float(target_probs[n][x]))
        q_x = real(1.0) if draft_probs is None else real(float(draft_probs[n, x]))
        # as tensors of that precision would: r < p/q without dividing by zero, min(1, p/q) reported
        accept_probs.append(float(min(p_x / max(q_x, tiny), real(1.0))) if q_x > 0 else 0.0)
        if not (q_x > 0 and real(uniforms[n]) * q_x < p_x):
            break
        n += 1

    if n == k:  # every draft passed: the bonus token comes from the target one position further
        token = int(sample(target_probs[k], generator))
        return Verdict(n, token, BONUS, accept_probs, uniforms, None)

    residual = _residual(target_probs[n], draft_probs[n] if draft_probs is not None else None, drafted[n])
    token = int(sample(residual, generator))
    return Verdict(n, token, RESAMPLED, accept_probs, uniforms, residual)


def _residual(p: torch.Tensor, q: torch.Tensor | None, rejected: int) -> torch.Tensor:
    """norm(max(0, p - q)); with a one-hot q this is p without the rejected token, renormalised.

    If nothing is left (p == q up to rounding, where a rejection has probability ~0), fall back to p,
    which is then the correct distribution.
    """
    if q is None:
        leftover = p.clone()
        leftover[rejected] = 0.0
    else:
        leftover = (p - q).clamp_min(0.0)
    total = leftover.sum()
    if not total > 0:
        return p
    return leftover / total
