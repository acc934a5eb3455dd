"""One chain round of the engine, and one round of plain decoding.

A chain round, with the target's KV cache holding every token but the last one ("cur"):
    1. the drafter proposes up to K tokens x_1..x_K after the context (`check_draft` checks them);
    2. the target scores [cur, x_1..x_K] in one forward: K+1 distributions;
    3. the engine's rule (`engine.verify`, `specui.verify_rule`) accepts x_1..x_n and adds one target token;
    4. the target's cache keeps cur and the accepted drafts; the drafter learns n (`observe`).
A plain round is one target forward over cur, and one token. Both give a `Round` with the p and q of its tokens.
`engine` gives the rule, the device, the vocabulary size and the timing; `SpeculativeEngine._run` calls these
(and `specui.tree_round` for token trees).
"""

from __future__ import annotations

import time

import torch

from specui.drafters import Drafter
from specui.drafters.base import features_of
from specui.engine_checks import align, check_draft
from specui.events import Kind, Round
from specui.kv import CachedLM
from specui.sampling import Generators, Rows, Sampling, argmax, choose, penalize


def plain_round(engine, *, target: CachedLM, context: list[int], sampling: Sampling, generators: Generators) -> Round:
    """One token of plain decoding: one target forward over the last token, one draw (or argmax)."""
    t0 = time.perf_counter()
    logits = penalize(target.extend(context[-1:])[-1], sampling, context)
    forward_s = engine._sync_time(t0)
    token, probs = choose(logits, sampling, generators.for_tensor(logits))
    token = int(token)
    p = float(probs[token])
    return Round(index=0, token_ids=[token], kinds=[Kind.PLAIN], drafted=[], num_accepted=0, target_probs=[],
                 draft_probs=[], accept_probs=[], uniforms=[], token_target_probs=[p], token_draft_probs=[None],
                 residual_top=[], num_draft_tokens=0, draft_s=0.0, verify_s=engine._sync_time(t0),
                 elapsed_s=0.0, speculative=False, forward_s=forward_s)


def chain_round(engine, *, target: CachedLM, drafter: Drafter, context: list[int], k: int, sampling: Sampling,
                generators: Generators, limit: int) -> Round:
    """One round (see the module docstring). limit: the most tokens kept of the proposal (k, or more for a
    drafter that copies past K)."""
    t0 = time.perf_counter()
    # specui's drafters only read the context (prompt lookup indexes it as it grows: O(k) a proposal, where a copy
    # is O(L)); a drafter of one's own reads a copy, so that its edits stay its own
    seen = context if type(drafter).__module__.startswith("specui.") else list(context)
    draft_tokens, draft_probs = check_draft(drafter.propose(seen, k), limit, drafter,
                                            vocab_size=engine.vocab_size, device=engine.device)
    draft_s = engine._sync_time(t0)
    copied = bool(getattr(drafter, "copied", False))  # the model + lookup drafter copied this round's draft
    t1 = time.perf_counter()

    features = features_of(drafter)
    logits = target.extend(torch.cat([torch.tensor(context[-1:], device=engine.device), draft_tokens]),
                           features=features)
    forward_s = engine._sync_time(t1)
    if features:
        logits, states = logits
    drafted = draft_tokens.tolist()
    logits = penalize(logits, sampling, context, drafted)  # row i has seen the context and the drafts before it
    # verification happens where the logits are (the last device of a target spread over several)
    device = logits.device
    draft_tokens, draft_probs = draft_tokens.to(device), align(draft_probs, engine.vocab_size, device)
    target_probs = Rows(logits, sampling)  # [k+1, V], each row transformed when the rule reads it
    verdict = engine.verify(target_probs=target_probs, draft_tokens=draft_tokens,
                          draft_probs=None if sampling.greedy else draft_probs,
                          generator=generators.for_tensor(target_probs),
                          target_argmax=argmax(logits) if sampling.greedy else None)  # as plain decoding
    n = verdict.num_accepted
    target.trim(len(context) + n)  # keep cur and the accepted drafts; the new token is next round's cur
    drafter.observe(n, **({"features": states[: n + 1]} if features else {}))

    # p and q of every drafted token and of the round's last token
    # (sampled: None for the drafts past the rejection, whose rows the rule never read)
    k_drafted = len(drafted)
    rows, cols = [*range(k_drafted), n], [*drafted, verdict.next_token]
    p_all = target_probs.probs(rows, cols, needed=n)  # p(x_1..x_k), then p of the round's last token
    if draft_probs is None:
        q_all, q_next = [1.0] * k_drafted, None
    else:
        at = torch.tensor([rows[:-1], cols[:-1]], dtype=torch.long, device=device)
        q_all = draft_probs[at[0], at[1]].tolist()
        q_next = float(draft_probs[n, verdict.next_token]) if n < k_drafted else None
    residual_top = []
    if verdict.residual is not None:
        top = torch.topk(verdict.residual, min(10, verdict.residual.shape[0]))
        residual_top = [(int(i), float(v)) for i, v in zip(top.indices.tolist(), top.values.tolist()) if v > 0]
    verify_s = engine._sync_time(t1)
    return Round(index=0, token_ids=drafted[:n] + [verdict.next_token], kinds=[Kind.ACCEPTED] * n + [verdict.next_kind],
                 drafted=drafted, num_accepted=n, target_probs=p_all[:k_drafted], draft_probs=q_all,
                 accept_probs=verdict.accept_probs, uniforms=verdict.uniforms,
                 token_target_probs=p_all[:n] + [p_all[-1]], token_draft_probs=q_all[:n] + [q_next],
                 residual_top=residual_top, num_draft_tokens=k, draft_s=draft_s, verify_s=verify_s,
                 elapsed_s=0.0, copied=copied, forward_s=forward_s)
