"""The Teach tab's "Where the time goes" experiment: why the measured speedup falls short of the theorem.

`time_budget_run` decodes a prompt three times with the target alone and three times speculatively
(interleaved, the same settings, EOS ignored so both emit the same tokens), keeps each arm's run of median
time, times each model's one-token forward alone and the target's forward of K+1 new tokens, and splits both
runs with `specui.bench.budget.time_budget`: the forwards
Theorem 3.8 counts, and what it does not (the verify's extra rows, sampling and bookkeeping, prefill).
The draft cost c is the draft model's one-token forward over the target's; a head's is its median
seconds per drafted token in the run (it has no forward of its own to time alone), prompt lookup's 0.
No gradio, no plotly: the Teach tab draws the returned dict.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from specui import metrics
from specui.bench.budget import time_budget
from specui.bench.run import forward_seconds
from specui.drafters import COPIES, LABELS, MODEL, PROMPT_LOOKUP
from specui.lesson import locked, warm_up
from specui.settings import DecodeSettings
from specui.verify_cost import measure_verify_cost, sync_device

FORWARD_SAMPLES = 12
RUNS = 3  # runs of each arm; the one of median time is split


def time_budget_run(engine, prompt_ids: Sequence[int], settings: DecodeSettings, *, lock=None) -> dict:
    """Plain and speculative runs of `prompt_ids` split into parts (see the module docstring): the
    budget's dict plus `theory` (Thm 3.8's speedup), `c`, `k`, `tokens` and the forward times in ms."""
    ids = list(prompt_ids)
    if len(ids) < 2:
        raise ValueError("the prompt needs at least two tokens to time a forward after it")
    settings = settings.but(ignore_eos=True)  # both runs emit max_new_tokens tokens
    drafter = settings.drafter or (MODEL if engine.draft_model is not None else PROMPT_LOOKUP)
    k = settings.num_draft_tokens
    sync = functools.partial(sync_device, engine.device)
    warm_up(engine, ids, lock=lock)
    with locked(lock):
        runs = {False: [], True: []}
        for _ in range(RUNS):  # interleaved, so a slow spell of a shared machine hits both
            for speculative in (False, True):
                runs[speculative].append(engine.generate(ids, settings.but(speculative=speculative)))
        plain, spec = (sorted(runs[s], key=lambda r: r.total_s)[RUNS // 2] for s in (False, True))  # the median runs
        target_s = metrics.median(forward_seconds(engine.target_model, ids, tokens=1, samples=FORWARD_SAMPLES,
                                                  sync=sync))
        if drafter == MODEL:
            draft_s = metrics.median(forward_seconds(engine.draft_model, ids, tokens=1, samples=FORWARD_SAMPLES,
                                                     sync=sync, chain=settings.temperature == 0))  # as it drafts
        elif drafter == PROMPT_LOOKUP:
            draft_s = 0.0
        else:
            per_token = [r.draft_s / r.num_drafted for r in spec.rounds if r.num_drafted]
            draft_s = metrics.median(per_token) if per_token else 0.0
        curve = measure_verify_cost(engine.target_model, cache_length=len(ids), max_tokens=max(2, k + 1),
                                    repeats=3).as_dict()
    c = draft_s / target_s
    theory = metrics.theory(spec.rounds, c=c, k=k)
    if theory is None and drafter in COPIES:
        raise ValueError(f"the {LABELS[drafter]} drafter mixes two proposers (copies from the context and K drafted "
                         "tokens), which Theorem 3.8 does not describe; choose a drafter without lookup, or prompt "
                         "lookup")
    if theory is None:
        raise ValueError("the speculative run drafted nothing, so the theorem has nothing to compare")
    budget = time_budget([plain], [spec], target_s=target_s, draft_s=draft_s, curve=curve, theory=theory.speedup)
    return {**budget, "theory": theory.speedup, "c": c, "k": k, "drafter": drafter, "tokens": len(plain.token_ids),
            "target_forward_ms": 1e3 * target_s, "draft_forward_ms": 1e3 * draft_s}
