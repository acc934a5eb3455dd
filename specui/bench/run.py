"""`python -m specui.bench`: specui's engine against transformers' own generation, on the same prompts.

Four methods, each emitting exactly `--max-new-tokens` tokens (EOS ignored) from the same prompts:
    plain        specui's engine, target alone (speculative=False)
    speculative  specui's engine with the drafter
    hf_assisted  transformers `generate(assistant_model=draft)` (or `prompt_lookup_num_tokens`) with
                 K held constant (schedule "constant", no confidence threshold)
    hf_plain     transformers `generate()`, target alone
For each prompt: `--warmup` untimed passes, then `--repeats` interleaved passes (A B C D A B C D ...);
every whole call is timed with `time.perf_counter` (after `torch.cuda.synchronize` on CUDA) and the
per-prompt median kept. Tokens/s = all tokens / the sum of the medians.

The draft cost ratio c is measured directly (specui.bench.costs): median time of a one-token KV-cached
forward of the draft over that of the target (the engine's own forward, `specui.kv.CachedLM`), at the first
prompt's length; the same for the target's (K+1)-token verify forward gives its cost in target
forwards. Theorem 3.8 of Leviathan et al. then gives the speedup the measured acceptance allows if
nothing but model forwards cost time and verifying costs one forward (`theoretical_speedup`;
`efficiency` = measured / that), and again with the measured verify cost (`..._measured_verify`).
The theorem's alpha is fitted so that its expected tokens per round give the measured ones, each round
at the K it was asked (`metrics.fitted_alpha`; accepted / drafted, also reported, undercounts it).
The command line is specui.bench.cli, the table specui.bench.report. `k_speedups` times plain and
speculative greedy decoding over several K with the same harness: the model card's speedup figure.
"""


from __future__ import annotations

import copy
import time
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch

from specui import chat_draft, metrics
from specui.bench.budget import time_budget
from specui.bench.costs import forward_seconds  # noqa: F401 (where specui.lesson_budget imports it from)
from specui.drafters import PROMPT_LOOKUP
from specui.engine import SpeculativeEngine
from specui.settings import DecodeSettings

METHODS = ("plain", "speculative", "hf_assisted", "hf_plain")


@dataclass(frozen=True)
class Plan:
    """What to run: the decode settings every method shares, and how often to time each."""

    decode: DecodeSettings  # max_new_tokens, K, temperature, drafter, seed (the first prompt's), ignore_eos
    repeats: int
    warmup: int


@dataclass(frozen=True)
class Arm:
    """One timed setting: a method of METHODS, with K and the drafter overriding the plan's (None: the plan's)."""

    method: str
    k: int | None = None
    drafter: str | None = None
    chain: bool = False  # a plan that drafts token trees: this arm drafts the chain of K instead (tree_width 1)
    confidence: float | None = None  # its own draft_confidence (None: the plan's)


ARMS = {m: Arm(m) for m in METHODS}  # the benchmark's four arms, keyed by the row labels
CHAIN = "chain"  # with token trees, the fifth arm: the same drafter's chain of K, side by side with the tree


def plan_arms(decode: DecodeSettings) -> dict[str, Arm]:
    """The arms of one drafter's run: the four methods, and with token trees the chain of the same K."""
    return {**ARMS, CHAIN: Arm("speculative", chain=True)} if decode.tree_width > 1 else dict(ARMS)


@dataclass
class PromptRun:
    """Every timed run of one prompt: seconds per arm, the tokens, and the engine's rounds."""

    prompt_tokens: int
    preview: str = ""  # the prompt's last characters, for people reading the rows
    seconds: dict[str, list[float]] = field(default_factory=dict)  # arm label -> seconds of each timed run
    outputs: dict[str, list[list[int]]] = field(default_factory=dict)
    results: dict = field(default_factory=dict)  # arm label -> the engine's GenerationResult of its first timed run

    def matches_plain(self, arm: str) -> bool:
        """Whether every timed output of `arm` equals plain decoding's first (greedy identity)."""
        return all(out == self.outputs["plain"][0] for out in self.outputs[arm])

    @property
    def rounds(self) -> list:
        """The speculative arm's rounds, from its first timed run."""
        result = self.results.get("speculative")
        return list(result.rounds) if result is not None else []


@dataclass(frozen=True)
class ModelPair:
    """A target and its draft outside a preset (e.g. freshly trained): what `Methods` needs of a pair."""

    target: object
    draft: object
    tokenizer: object = None

    @property
    def device(self) -> torch.device:
        return self.target.get_input_embeddings().weight.device

    def engine(self) -> SpeculativeEngine:
        return SpeculativeEngine(self.target, self.draft)


# -- the four methods --------------------------------------------------------------------------------


class Methods:
    """Runs each method once on a prompt: returns (seconds, new token ids, engine result or None)."""

    def __init__(self, pair, plan: Plan, *, engine: SpeculativeEngine | None = None):
        """engine: the pair's engine, built already (the command line read its drafters); None: built here."""
        self.pair, self.plan, self.s = pair, plan, plan.decode
        self.device = pair.device
        self.engine = pair.engine() if engine is None else engine
        self.sampled = not plan.decode.greedy
        # transformers' assistant must score the whole vocabulary: a reduced-vocabulary draft is widened
        reduced = pair.draft is not None and getattr(pair.draft, "token_ids", None) is not None
        self.hf_draft = chat_draft.full_vocabulary(pair.draft) if reduced else pair.draft

    def sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def run(self, method: str, prompt: list[int], seed: int, *, k: int | None = None, drafter: str | None = None,
            chain: bool = False, confidence: float | None = None):
        self.sync()
        started = time.perf_counter()
        if method in ("plain", "speculative"):
            settings = self.s.but(seed=seed, speculative=method == "speculative")
            settings = settings if k is None else settings.but(num_draft_tokens=k)
            settings = settings if confidence is None else settings.but(draft_confidence=confidence)
            settings = settings.but(tree_width=1, tree_nodes=0) if chain else settings
            result = self.engine.generate(prompt, settings if drafter is None else settings.but(drafter=drafter))
            tokens = result.token_ids
        else:
            result = None
            tokens = self._hf(prompt, seed, assisted=method == "hf_assisted")
        self.sync()
        return time.perf_counter() - started, tokens, result

    def _hf(self, prompt: list[int], seed: int, *, assisted: bool) -> list[int]:
        target = self.pair.target
        ids = torch.tensor([prompt], device=self.device)
        kwargs = {"max_new_tokens": self.s.max_new_tokens, "min_new_tokens": self.s.max_new_tokens,
                  "eos_token_id": None,  # never stop early: every method emits exactly N tokens
                  "pad_token_id": _pad_id(target), "attention_mask": torch.ones_like(ids), "do_sample": self.sampled}
        if self.sampled:
            kwargs.update(temperature=self.s.temperature, top_k=self.s.top_k, top_p=self.s.top_p)
            torch.manual_seed(seed)  # transformers samples from the global generator
        if self.s.repetition_penalty != 1.0:
            kwargs["repetition_penalty"] = self.s.repetition_penalty
        if assisted and self.s.drafter == PROMPT_LOOKUP:
            kwargs["prompt_lookup_num_tokens"] = self.s.num_draft_tokens
        elif assisted:
            kwargs["assistant_model"] = self.hf_draft
        with torch.inference_mode():
            out = target.generate(ids, **kwargs)
        return out[0, len(prompt):].tolist()


def _pad_id(model) -> int:
    pad = getattr(model.generation_config, "pad_token_id", None)
    if pad is None:
        pad = getattr(model.config, "pad_token_id", None)
    return 0 if pad is None else int(pad)


@contextmanager
def constant_assistant_schedule(draft, k: int, confidence: float = 0.0):
    """Inside `with`: transformers' assistant drafts K tokens per round (schedule "constant"), as specui's engine
    does, and with a `confidence` (specui's draft_confidence) its own confidence threshold: it stops drafting
    where its top probability falls below it (per token; specui's stop reads their product), else none. The
    draft's own generation_config is restored after."""
    if draft is None:
        yield
        return
    saved = draft.generation_config
    config = copy.deepcopy(saved)
    config.num_assistant_tokens = k
    config.num_assistant_tokens_schedule = "constant"
    config.assistant_confidence_threshold = confidence
    draft.generation_config = config
    try:
        yield
    finally:
        draft.generation_config = saved


def run_prompts(methods: Methods, prompts: list[list[int]], *, arms: dict[str, Arm] = ARMS,
                progress=None) -> list[PromptRun]:
    """The harness: per prompt, `warmup` untimed then `repeats` timed passes, the arms interleaved."""
    s = methods.plan
    runs = []
    for i, prompt in enumerate(prompts):
        run = PromptRun(prompt_tokens=len(prompt), preview=_preview(methods.pair.tokenizer, prompt),
                        seconds={label: [] for label in arms}, outputs={label: [] for label in arms})
        seed = s.decode.seed + i  # the same seed in every repeat: each repeat does the same work
        for rep in range(s.warmup + s.repeats):
            for label, arm in arms.items():
                seconds, tokens, result = methods.run(arm.method, prompt, seed, k=arm.k, drafter=arm.drafter,
                                                      chain=arm.chain, confidence=arm.confidence)
                if rep < s.warmup:
                    continue
                run.seconds[label].append(seconds)
                run.outputs[label].append(tokens)
                if result is not None:
                    run.results.setdefault(label, result)
        runs.append(run)
        if progress:
            progress(i + 1, len(prompts), run)
    return runs


def _preview(tokenizer, prompt: list[int], chars: int = 60) -> str:
    try:
        return tokenizer.decode(prompt[-32:])[-chars:]
    except Exception:  # noqa: BLE001 - a preview must never stop a benchmark
        return ""


def prompt_medians(runs: list[PromptRun]) -> list[dict[str, float]]:
    """Per prompt, the median seconds of each arm."""
    return [{label: metrics.median(times) for label, times in r.seconds.items()} for r in runs]


def tokens_per_s(runs: list[PromptRun], new_tokens: int) -> dict[str, float]:
    """Per arm: all tokens / the sum of the per-prompt medians (every run emits `new_tokens`)."""
    medians = prompt_medians(runs)
    return {label: new_tokens * len(runs) / sum(md[label] for md in medians) for label in medians[0]}


def k_speedups(pair, prompts: list[list[int]], *, ks=range(1, 9), new_tokens: int = 128, warmup: int = 1,
               repeats: int = 1) -> dict:
    """Greedy speculative decoding at each K in `ks` against plain decoding, with the benchmark's harness
    (`run_prompts`: the arms interleaved per prompt, per-prompt medians; EOS ignored).

    Returns {"plain_tps": ..., "tps": {K: ...}, "speedup": {K: ...}, "best_k": K, "best_speedup": x,
    "torch_threads": n, "method": "..."}.
    """
    ks = list(ks)
    decode = DecodeSettings(max_new_tokens=new_tokens, num_draft_tokens=max(ks), temperature=0.0, seed=0,
                            ignore_eos=True)
    arms = {"plain": Arm("plain"), **{f"K={k}": Arm("speculative", k) for k in ks}}
    runs = run_prompts(Methods(pair, Plan(decode, repeats=repeats, warmup=warmup)), prompts, arms=arms)
    tps = tokens_per_s(runs, new_tokens)
    plain_tps = tps["plain"]
    speedup = {k: tps[f"K={k}"] / plain_tps for k in ks}
    best_k = max(speedup, key=speedup.get)
    method = (f"specui.bench's harness: {len(prompts)} prompts, {warmup} untimed and {repeats} timed pass(es) "
              f"each, plain and every K interleaved, {new_tokens} new tokens, greedy")
    return {"plain_tps": plain_tps, "tps": {k: tps[f"K={k}"] for k in ks}, "speedup": speedup, "best_k": best_k,
            "best_speedup": speedup[best_k], "torch_threads": torch.get_num_threads(), "method": method}


def summarise(runs: list[PromptRun], costs: dict, plan: Plan) -> dict:
    """The figures of the issue, from the runs and the measured forward costs."""
    s = plan.decode
    n = s.max_new_tokens
    medians = prompt_medians(runs)
    tps = tokens_per_s(runs, n)
    rounds = [x for r in runs for x in r.rounds]
    alpha = metrics.acceptance_rate(rounds)
    mal = metrics.mean_accepted_length(rounds)
    k = s.num_draft_tokens
    c, verify = costs["draft_cost_ratio"], costs["verify_cost_ratio"]
    fit = metrics.theory(rounds, c=c, k=k)  # the figure the chat and Teach tabs show for a run
    alpha_fit = fit.alpha if fit else None
    theory = fit.speedup if fit else None
    theory_verify = metrics.theoretical_speedup(alpha_fit, k, c, verify_cost=verify) if fit else None
    speedup = tps["speculative"] / tps["plain"]
    greedy = s.greedy
    rows = []
    for r, md in zip(runs, medians):
        same = r.matches_plain("plain") and r.matches_plain("speculative")
        rows.append({
            "prompt_tokens": r.prompt_tokens,
            "prompt_end": r.preview,
            **{f"{m}_tokens_per_s": n / md[m] for m in METHODS},
            "speedup_vs_plain": md["plain"] / md["speculative"],
            "speedup_vs_hf_assisted": md["hf_assisted"] / md["speculative"],
            "acceptance_rate": metrics.acceptance_rate(r.rounds),
            "mean_accepted_length": metrics.mean_accepted_length(r.rounds),
            "identical_to_plain": same if greedy else None,
            "hf_identical": r.outputs["hf_plain"][0] == r.outputs["plain"][0] if greedy else None,
            "tokens": {m: len(r.outputs[m][0]) for m in METHODS},
        })
    budget = None
    if theory and all("plain" in r.results and "speculative" in r.results for r in runs):
        budget = time_budget([r.results["plain"] for r in runs], [r.results["speculative"] for r in runs],
                             target_s=costs["target_forward_ms"] / 1e3, draft_s=costs["draft_forward_ms"] / 1e3,
                             curve=costs["verify_cost_curve"], theory=theory)
    return {
        "plain_tokens_per_s": tps["plain"],
        "speculative_tokens_per_s": tps["speculative"],
        "hf_assisted_tokens_per_s": tps["hf_assisted"],
        "hf_plain_tokens_per_s": tps["hf_plain"],
        "speedup_vs_plain": speedup,
        "speedup_vs_hf_assisted": tps["speculative"] / tps["hf_assisted"],
        "speedup_vs_hf_plain": tps["speculative"] / tps["hf_plain"],
        "acceptance_rate": alpha,
        "mean_accepted_length": mal,
        "rounds": len(rounds),
        "copied_rounds": sum(x.copied for x in rounds),  # the model + lookup drafter's copies
        "alpha_per_token": alpha_fit,
        **costs,
        "theoretical_speedup": theory,
        "efficiency": metrics.efficiency(speedup, theory) if theory else None,
        "best_k_theoretical": fit.best_k if fit else None,
        "theoretical_speedup_measured_verify": theory_verify,  # Thm 3.8 with the K+1-token forward's real cost
        "efficiency_measured_verify": metrics.efficiency(speedup, theory_verify) if theory_verify else None,
        "identical_to_plain": all(r["identical_to_plain"] for r in rows) if greedy else None,
        "hf_identical_to_engine": all(r["hf_identical"] for r in rows) if greedy else None,
        "num_draft_tokens": k,
        "draft_confidence": s.draft_confidence,  # > 0: K is the most a round drafts (`specui.drafters.base.Confidence`)
        "time_budget": budget,
        **(tree_against_chain(runs, tps, "speculative", CHAIN, greedy) if CHAIN in tps else {}),
        "rows": rows,
    }


def tree_over_chain(tree: dict, chain: dict) -> dict:
    """A tree's figures over its chain's, each a dict with mean_accepted_length and tokens_per_s."""
    return {"tree_vs_chain_length": tree["mean_accepted_length"] / chain["mean_accepted_length"],
            "tree_vs_chain_speed": tree["tokens_per_s"] / chain["tokens_per_s"]}


def tree_against_chain(runs: list[PromptRun], tps: dict[str, float], tree: str, chain: str, greedy: bool) -> dict:
    """A tree arm against the chain arm of the same drafter and K, timed side by side: tokens per target forward
    and speed of each, their ratios, and (greedy) whether the chain's outputs equal plain decoding's too."""
    rounds = {arm: [x for r in runs for x in r.results[arm].rounds] for arm in (tree, chain)}
    figures = {arm: {"mean_accepted_length": metrics.mean_accepted_length(rounds[arm]), "tokens_per_s": tps[arm]}
               for arm in (tree, chain)}
    same = all(r.matches_plain(chain) for r in runs) if greedy else None
    return {"chain_tokens_per_s": tps[chain], "chain_mean_accepted_length": figures[chain]["mean_accepted_length"],
            "chain_speedup_vs_plain": tps[chain] / tps["plain"], "chain_identical_to_plain": same,
            **tree_over_chain(figures[tree], figures[chain])}


