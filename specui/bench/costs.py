"""The forward costs `python -m specui.bench` measures beside its runs: c, a draft's one-token forward over the
target's (each timed as the engine runs it), and the target's verify-cost curve, whose K+1 point is the cost of its
(K+1)-token verify forward in one-token forwards. specui.bench.run times the runs themselves."""

from __future__ import annotations

import time

import torch

from specui import metrics, native
from specui.bench.flags import TIMING_SAMPLES
from specui.drafters import MODEL_DRAFTERS
from specui.kv import CachedLM
from specui.native_chain import GREEDY, DecoderChain, picks
from specui.verify_cost import measure_verify_cost


def forward_seconds(model, prompt: list[int], *, tokens: int, samples: int, sync, chain: bool = False) -> list[float]:
    """Times of a KV-cached forward of `tokens` new tokens after `prompt` (the cache rolled back each time).
    chain: a draft model's one-token step as its rounds run it, in one native call where it can
    (`specui.native_chain.DecoderChain`: its layers, then the argmax and softmax of a drafted token; a sampled
    round's draw costs about what the argmax does), so that c is the cost drafting pays."""
    lm = CachedLM(model, drafts=chain)
    times = []
    with torch.inference_mode():
        lm.extend(prompt[:-1], last_only=True)
        kernel = native.kernel() if chain and tokens == 1 and picks(GREEDY) else None  # as `ModelDrafter.start`
        steps = DecoderChain(lm, kernel) if kernel is not None and DecoderChain.serves(lm) else None
        step = [prompt[-1]] * tokens
        for _ in range(samples + 3):  # three untimed
            sync()
            started = time.perf_counter()
            if steps is not None:
                steps.run(step, 1, 0.0)
            else:
                lm.extend(step)
            sync()
            times.append(time.perf_counter() - started)
            lm.trim(len(prompt) - 1)
    return times[3:]


def measure_costs(methods, prompt: list[int], k: int, *, samples: int = TIMING_SAMPLES) -> dict:
    """c = draft / target one-token forward (medians); also the target's verify-cost curve (1..16 new tokens,
    and K+1 if more), whose K+1 point is the (K+1)-token verify forward's cost. methods: the run's
    `specui.bench.run.Methods` (its pair, its sync and its drafter)."""
    pair, sync = methods.pair, methods.sync
    target_1, draft_1 = [], []
    chunks = min(5, samples)
    for _ in range(chunks):  # interleaved in chunks, so a slow spell of a shared machine hits both
        n = max(1, samples // chunks)
        target_1 += forward_seconds(pair.target, prompt, tokens=1, samples=n, sync=sync)
        if pair.draft is not None and methods.s.drafter in MODEL_DRAFTERS:  # as this run drafts: natively
            draft_1 += forward_seconds(pair.draft, prompt, tokens=1, samples=n, sync=sync, chain=True)
    t1 = metrics.median(target_1)
    d1 = metrics.median(draft_1) if draft_1 else 0.0  # prompt lookup: no model forward to draft
    method = (f"median of {len(target_1)} timed KV-cached forwards of each model (specui.kv.CachedLM, the engine's "
              f"own forward; a draft model's as its rounds run it, specui.native_chain) after the first "
              f"prompt, interleaved in {chunks} chunks")
    curve = measure_verify_cost(pair.target, cache_length=len(prompt), max_tokens=max(16, k + 1),
                                repeats=max(3, samples // 4), floor=True)
    return {"cost_method": method, "target_forward_ms": 1e3 * t1, "draft_forward_ms": 1e3 * d1,
            "draft_cost_ratio": metrics.draft_cost_ratio(d1, t1),
            "verify_cost_ratio": curve.ratio(k + 1), "verify_cost_curve": curve.as_dict()}

