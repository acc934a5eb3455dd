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

The draft cost ratio c is measured directly: median time of a one-token KV-cached forward of the
draft over that of the target (the engine's own forward, `specui.kv.CachedLM`), at the first
prompt's length; the same for the target's (K+1)-token verify forward gives its cost in target
forwards. Theorem 3.8 of Leviathan et al. then gives the speedup the measured acceptance allows if
nothing but model forwards cost time and verifying costs one forward (`theoretical_speedup`;
`efficiency` = measured / that), and again with the measured verify cost (`..._measured_verify`).
The theorem's alpha is fitted so that its expected tokens per round equal the measured mean
accepted length (accepted / drafted, also reported, undercounts it: see specui.metrics).
Formatting lives in specui.bench_report.
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import torch

from specui import metrics

METHODS = ("plain", "speculative", "hf_assisted", "hf_plain")
DEFAULT_PROMPTS = 8
PROMPT_TOKENS = 128
TIMING_SAMPLES = 50


@dataclass
class Settings:
    max_new_tokens: int
    num_draft_tokens: int
    temperature: float
    drafter: str
    repeats: int
    warmup: int
    seed: int = 0


@dataclass
class PromptRun:
    """Every timed run of one prompt: seconds per method, the tokens, and the engine's rounds."""

    prompt_tokens: int
    preview: str = ""  # the prompt's last characters, for people reading the rows
    seconds: dict[str, list[float]] = field(default_factory=lambda: {m: [] for m in METHODS})
    outputs: dict[str, list[list[int]]] = field(default_factory=lambda: {m: [] for m in METHODS})
    rounds: list = field(default_factory=list)  # the speculative engine's rounds, from the first timed run


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m specui.bench", description=__doc__.split("\n")[0])
    p.add_argument("--preset", default=None, help="a preset of models.yaml (default: its default)")
    p.add_argument("--config", default=None, help="the models.yaml to read (default: the one beside the package)")
    p.add_argument("--prompts", default=None,
                   help='JSON Lines file, one {"prompt": "..."} per line (default: held-out stdlib test code)')
    p.add_argument("--num-prompts", type=int, default=DEFAULT_PROMPTS, help="how many built-in prompts")
    p.add_argument("--prompt-tokens", type=int, default=PROMPT_TOKENS, help="length of each built-in prompt")
    p.add_argument("--max-new-tokens", type=int, default=128)
    p.add_argument("--num-draft-tokens", type=int, default=None, help="K (default: the preset's)")
    p.add_argument("--temperature", type=float, default=0.0, help="0 = greedy")
    p.add_argument("--drafter", choices=("model", "prompt_lookup"), default=None, help="default: the preset's")
    p.add_argument("--repeats", type=int, default=3, help="timed runs of each method per prompt (median kept)")
    p.add_argument("--warmup", type=int, default=1, help="untimed runs of each method per prompt first")
    p.add_argument("--threads", type=int, default=None,
                   help="torch CPU threads (default: the preset's `threads`, else torch's choice)")
    p.add_argument("--cost-samples", type=int, default=TIMING_SAMPLES,
                   help="timed one-token forwards of each model for c (median kept)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", default=None, help="also write the results as one JSON object to this file")
    args = p.parse_args(argv)
    for name in ("num_prompts", "prompt_tokens", "max_new_tokens", "repeats", "cost_samples"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1")
    if args.warmup < 0 or args.temperature < 0:
        p.error("--warmup and --temperature must be >= 0")
    return args


# -- prompts -----------------------------------------------------------------------------------------


def builtin_prompts(tokenizer, *, count: int, length: int) -> list[list[int]]:
    """Held-out prompts: `length` tokens from the middle of stdlib test files (specui.evaluate's set)."""
    from specui import corpus
    from specui.evaluate import held_out_prompts

    _, held_out = corpus.split_sources()
    prompts = held_out_prompts(tokenizer, held_out, count=count, length=length)
    if not prompts:
        raise SystemExit("no held-out stdlib test file is long enough for a built-in prompt; use --prompts")
    return prompts


def read_prompt_texts(path: str) -> list[str]:
    """The prompts of a JSON Lines file, one {"prompt": "..."} per line (checked before any model loads)."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise SystemExit(f"{path}: cannot be read ({e})") from None
    texts = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            text = json.loads(line)["prompt"]
        except (json.JSONDecodeError, KeyError, TypeError):
            text = None
        if not isinstance(text, str) or not text:
            raise SystemExit(f'{path}:{n}: expected a JSON object {{"prompt": "<non-empty text>"}}')
        texts.append(text)
    if not texts:
        raise SystemExit(f"{path}: no prompts")
    return texts


def tokenize_prompts(texts: list[str], tokenizer) -> list[list[int]]:
    prompts = [list(tokenizer(text)["input_ids"]) for text in texts]
    for n, ids in enumerate(prompts, 1):
        if not ids:
            raise SystemExit(f"prompt {n} is empty after tokenization")
    return prompts


# -- the four methods --------------------------------------------------------------------------------


class Methods:
    """Runs each method once on a prompt: returns (seconds, new token ids, engine result or None)."""

    def __init__(self, pair, settings: Settings):
        from specui import SpeculativeEngine

        self.pair, self.s = pair, settings
        self.device = pair.device
        self.engine = SpeculativeEngine(pair.target, pair.draft)
        self.sampled = settings.temperature > 0

    def sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def run(self, method: str, prompt: list[int], seed: int):
        self.sync()
        started = time.perf_counter()
        if method in ("plain", "speculative"):
            result = self.engine.generate(prompt, max_new_tokens=self.s.max_new_tokens,
                                          num_draft_tokens=self.s.num_draft_tokens, temperature=self.s.temperature,
                                          seed=seed, speculative=method == "speculative", ignore_eos=True,
                                          drafter=self.s.drafter if method == "speculative" else None)
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
            kwargs.update(temperature=self.s.temperature, top_k=0, top_p=1.0)
            torch.manual_seed(seed)  # transformers samples from the global generator
        if assisted and self.s.drafter == "prompt_lookup":
            kwargs["prompt_lookup_num_tokens"] = self.s.num_draft_tokens
        elif assisted:
            kwargs["assistant_model"] = self.pair.draft
        with torch.inference_mode():
            out = target.generate(ids, **kwargs)
        return out[0, len(prompt):].tolist()


def _pad_id(model) -> int:
    pad = getattr(model.generation_config, "pad_token_id", None)
    if pad is None:
        pad = getattr(model.config, "pad_token_id", None)
    return 0 if pad is None else int(pad)


@contextmanager
def constant_assistant_schedule(draft, k: int):
    """Inside `with`: transformers' assistant drafts exactly K tokens per round (schedule "constant", no
    confidence threshold), as specui's engine does. The draft's own generation_config is restored after."""
    if draft is None:
        yield
        return
    saved = draft.generation_config
    config = copy.deepcopy(saved)
    config.num_assistant_tokens = k
    config.num_assistant_tokens_schedule = "constant"
    config.assistant_confidence_threshold = 0.0
    draft.generation_config = config
    try:
        yield
    finally:
        draft.generation_config = saved


# -- timing --------------------------------------------------------------------------------------------


def forward_seconds(model, prompt: list[int], *, tokens: int, samples: int, sync) -> list[float]:
    """Times of a KV-cached forward of `tokens` new tokens after `prompt` (the cache rolled back each time)."""
    from specui.kv import CachedLM

    lm = CachedLM(model)
    times = []
    with torch.inference_mode():
        lm.extend(prompt[:-1], last_only=True)
        step = [prompt[-1]] * tokens
        for _ in range(samples + 3):  # three untimed
            sync()
            started = time.perf_counter()
            lm.extend(step)
            sync()
            times.append(time.perf_counter() - started)
            lm.trim(len(prompt) - 1)
    return times[3:]


def measure_costs(methods: Methods, prompt: list[int], k: int, *, samples: int = TIMING_SAMPLES) -> dict:
    """c = draft / target one-token forward (medians); also the target's (K+1)-token verify forward."""
    pair, sync = methods.pair, methods.sync
    target_1, target_k, draft_1 = [], [], []
    chunks = min(5, samples)
    for _ in range(chunks):  # interleaved in chunks, so a slow spell of a shared machine hits all three
        n = max(1, samples // chunks)
        target_1 += forward_seconds(pair.target, prompt, tokens=1, samples=n, sync=sync)
        target_k += forward_seconds(pair.target, prompt, tokens=k + 1, samples=n, sync=sync)
        if pair.draft is not None and methods.s.drafter == "model":
            draft_1 += forward_seconds(pair.draft, prompt, tokens=1, samples=n, sync=sync)
    t1 = statistics.median(target_1)
    d1 = statistics.median(draft_1) if draft_1 else 0.0  # prompt lookup: no model forward to draft
    method = (f"median of {len(target_1)} timed KV-cached forwards of each model (specui.kv.CachedLM, the engine's "
              f"own forward) after the first prompt, interleaved in {chunks} chunks")
    return {"cost_method": method, "target_forward_ms": 1e3 * t1, "draft_forward_ms": 1e3 * d1,
            "draft_cost_ratio": metrics.draft_cost_ratio(d1, t1),
            "verify_cost_ratio": statistics.median(target_k) / t1}


def run_prompts(methods: Methods, prompts: list[list[int]], *, progress=None) -> list[PromptRun]:
    s = methods.s
    runs = []
    for i, prompt in enumerate(prompts):
        run = PromptRun(prompt_tokens=len(prompt), preview=_preview(methods.pair.tokenizer, prompt))
        seed = s.seed + i  # the same seed in every repeat: each repeat does the same work
        for rep in range(s.warmup + s.repeats):
            for method in METHODS:
                seconds, tokens, result = methods.run(method, prompt, seed)
                if rep < s.warmup:
                    continue
                run.seconds[method].append(seconds)
                run.outputs[method].append(tokens)
                if result is not None and method == "speculative" and not run.rounds:
                    run.rounds = list(result.rounds)
        runs.append(run)
        if progress:
            progress(i + 1, len(prompts), run)
    return runs


def _preview(tokenizer, prompt: list[int], chars: int = 60) -> str:
    try:
        return tokenizer.decode(prompt[-32:])[-chars:]
    except Exception:  # noqa: BLE001 - a preview must never stop a benchmark
        return ""


def summarise(runs: list[PromptRun], costs: dict, s: Settings) -> dict:
    """The figures of the issue, from the runs and the measured forward costs."""
    n = s.max_new_tokens
    medians = [{m: statistics.median(r.seconds[m]) for m in METHODS} for r in runs]
    tps = {m: n * len(runs) / sum(md[m] for md in medians) for m in METHODS}
    rounds = [x for r in runs for x in r.rounds]
    alpha = metrics.acceptance_rate(rounds)
    mal = metrics.mean_accepted_length(rounds)
    k = s.num_draft_tokens
    alpha_fit = metrics.alpha_from_mean_accepted_length(min(mal, k + 1), k) if mal else None
    c, verify = costs["draft_cost_ratio"], costs["verify_cost_ratio"]
    theory = metrics.theoretical_speedup(alpha_fit, k, c) if alpha_fit is not None else None
    theory_verify = metrics.theoretical_speedup(alpha_fit, k, c, verify_cost=verify) if alpha_fit is not None else None
    speedup = tps["speculative"] / tps["plain"]
    greedy = s.temperature == 0
    rows = []
    for r, md in zip(runs, medians):
        same = all(o == r.outputs["plain"][0] for o in r.outputs["plain"] + r.outputs["speculative"])
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
        "alpha_per_token": alpha_fit,
        **costs,
        "theoretical_speedup": theory,
        "efficiency": metrics.efficiency(speedup, theory) if theory else None,
        "best_k_theoretical": metrics.best_k(alpha_fit, c) if alpha_fit is not None else None,
        "theoretical_speedup_measured_verify": theory_verify,  # Thm 3.8 with the K+1-token forward's real cost
        "efficiency_measured_verify": metrics.efficiency(speedup, theory_verify) if theory_verify else None,
        "identical_to_plain": all(r["identical_to_plain"] for r in rows) if greedy else None,
        "hf_identical_to_engine": all(r["hf_identical"] for r in rows) if greedy else None,
        "num_draft_tokens": k,
        "rows": rows,
    }


def environment(device: torch.device) -> dict:
    import platform

    import transformers

    name = torch.cuda.get_device_name(device) if device.type == "cuda" else _cpu_name()
    return {"device": f"{device.type}: {name}", "torch_version": torch.__version__,
            "transformers_version": transformers.__version__, "python_version": platform.python_version(),
            "torch_threads": torch.get_num_threads()}


def _cpu_name() -> str:
    import os
    import platform

    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return f"{line.split(':', 1)[1].strip()}, {os.cpu_count()} cores"
    except OSError:
        pass
    return f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores"


def main(argv=None) -> dict:
    from transformers.utils import logging as transformers_logging

    from specui.bench_report import format_table
    from specui.loading import load_pair
    from specui.presets import load_config

    args = parse_args(argv)
    texts = read_prompt_texts(args.prompts) if args.prompts else None
    transformers_logging.set_verbosity_error()  # generate()'s advice about its own arguments is noise here
    preset = load_config(args.config).get(args.preset)
    pair = load_pair(preset, progress=lambda msg: print(msg, file=sys.stderr))  # applies the preset's threads
    if args.threads:
        torch.set_num_threads(args.threads)
    drafter = args.drafter or preset.drafter
    if drafter == "model" and pair.draft is None:
        raise SystemExit(f"preset {preset.name!r} has no draft model; use --drafter prompt_lookup")
    settings = Settings(max_new_tokens=args.max_new_tokens,
                        num_draft_tokens=args.num_draft_tokens or preset.num_draft_tokens,
                        temperature=args.temperature, drafter=drafter, repeats=args.repeats, warmup=args.warmup,
                        seed=args.seed)
    prompts = (tokenize_prompts(texts, pair.tokenizer) if texts
               else builtin_prompts(pair.tokenizer, count=args.num_prompts, length=args.prompt_tokens))
    methods = Methods(pair, settings)
    with constant_assistant_schedule(pair.draft if drafter == "model" else None, settings.num_draft_tokens):
        costs = measure_costs(methods, prompts[0], settings.num_draft_tokens, samples=args.cost_samples)
        runs = run_prompts(methods, prompts, progress=lambda i, total, run: print(
            f"prompt {i}/{total} done", file=sys.stderr))
    report = {"preset": preset.name, "drafter": drafter, "max_new_tokens": settings.max_new_tokens,
              "temperature": settings.temperature, "repeats": settings.repeats, "warmup": settings.warmup,
              "num_prompts": len(prompts), "prompts": args.prompts or "built-in held-out stdlib test code",
              **environment(methods.device), **summarise(runs, costs, settings),
              "command": "python -m specui.bench " + " ".join(argv if argv is not None else sys.argv[1:])}
    print(format_table(report))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return report


if __name__ == "__main__":
    main()
