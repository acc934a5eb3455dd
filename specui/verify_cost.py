"""The verify-cost curve: how long a KV-cached forward of n new tokens takes, for n = 1..16, as a
multiple of a one-token forward.

Speculative decoding's speedup (Leviathan et al. 2023, Theorem 3.8) assumes that checking K+1 tokens
costs one forward; `measure_verify_cost` measures what it really costs on this machine with the
engine's own forward (`specui.kv.CachedLM`): after a cache of `cache_length` tokens, each block size
is timed `repeats` times, block sizes interleaved within each repeat (so a slow spell of a shared
machine hits every size alike), and the median kept. Each timed forward follows an untimed one of the
same size, as decoding's forwards follow each other: timed straight after a larger block, a small model's
one-token forward ran about 12% slower (its weights and the cache's lines displaced), which had put
every ratio of the stdlib target's curve that much too low.

    python -m specui.verify_cost --target assets/specui-target          # a model folder
    python -m specui.verify_cost --preset NAME [--config models.yaml]   # a preset's target
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import asdict, dataclass

import torch

from specui.kv import CachedLM, model_device


@dataclass(frozen=True)
class VerifyCost:
    """Median forward times of blocks of `tokens[i]` new tokens after `cache_length` cached ones."""

    cache_length: int
    tokens: tuple[int, ...]  # block sizes, ascending, starting at 1
    seconds: tuple[float, ...]  # the median time of each
    repeats: int
    threads: int

    @property
    def ratios(self) -> tuple[float, ...]:
        """Each block's time ÷ the one-token forward's (1.0 first; a free verify stays at 1.0)."""
        return tuple(s / self.seconds[0] for s in self.seconds)

    def ratio(self, tokens: int) -> float:
        """Time of a `tokens`-token forward ÷ a one-token forward (K+1 tokens: a round's verify)."""
        return self.ratios[self.tokens.index(tokens)]

    def as_dict(self) -> dict:
        return {**asdict(self), "ratios": list(self.ratios)}

    def table(self) -> str:
        lines = [f"cache {self.cache_length} tokens, {self.threads} thread(s), median of {self.repeats}",
                 "tokens   ms      ÷ one token"]
        lines += [f"{n:>6} {1e3 * s:7.2f}   {r:5.2f}" for n, s, r in zip(self.tokens, self.seconds, self.ratios)]
        return "\n".join(lines)


def measure_verify_cost(model, *, cache_length: int = 128, max_tokens: int = 16, repeats: int = 7,
                        warmup: int = 2, seed: int = 0) -> VerifyCost:
    """Time KV-cached forwards of 1..max_tokens new tokens after `cache_length` random tokens."""
    if cache_length < 1 or max_tokens < 1 or repeats < 1:
        raise ValueError("cache_length, max_tokens and repeats must be at least 1")
    device = model_device(model)
    vocab = model.get_input_embeddings().weight.shape[0]
    ids = torch.randint(0, vocab, (cache_length + max_tokens,), generator=torch.Generator().manual_seed(seed)).tolist()
    tokens = tuple(range(1, max_tokens + 1))
    times: dict[int, list[float]] = {n: [] for n in tokens}
    lm = CachedLM(model)
    with torch.inference_mode():
        lm.extend(ids[:cache_length], last_only=True)
        for rep in range(warmup + repeats):
            for n in tokens:
                lm.extend(ids[cache_length:cache_length + n])  # the same size just before (see the docstring)
                lm.trim(cache_length)
                sync_device(device)
                started = time.perf_counter()
                lm.extend(ids[cache_length:cache_length + n])
                sync_device(device)
                if rep >= warmup:
                    times[n].append(time.perf_counter() - started)
                lm.trim(cache_length)
    seconds = tuple(statistics.median(times[n]) for n in tokens)
    return VerifyCost(cache_length=cache_length, tokens=tokens, seconds=seconds, repeats=repeats,
                      threads=torch.get_num_threads())


def sync_device(device: torch.device) -> None:
    """Wait for `device`'s queued work (CUDA); nothing to wait for on a CPU."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _load_target(args):
    if args.target:
        from transformers import AutoModelForCausalLM

        dtype = getattr(torch, args.dtype)
        return AutoModelForCausalLM.from_pretrained(args.target, dtype=dtype).eval()
    from specui.loading import load_pair
    from specui.presets import load_config

    preset = load_config(args.config).get(args.preset)
    return load_pair(preset, progress=lambda msg: print(msg, file=sys.stderr)).target


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m specui.verify_cost", description=__doc__.split("\n\n")[0])
    which = p.add_mutually_exclusive_group()
    which.add_argument("--target", help="a model folder or hub id (AutoModelForCausalLM)")
    which.add_argument("--preset", help="a preset of models.yaml: its target (default: the default preset)")
    p.add_argument("--config", default=None, help="models.yaml to read presets from")
    p.add_argument("--dtype", default="float32", choices=("float32", "bfloat16", "float16"), help="with --target")
    p.add_argument("--cache-length", type=int, default=128)
    p.add_argument("--max-tokens", type=int, default=16)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--threads", type=int, default=1, help="torch threads (0: leave torch's choice)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    args = p.parse_args(argv)
    model = _load_target(args)
    if args.threads:
        torch.set_num_threads(args.threads)
    cost = measure_verify_cost(model, cache_length=args.cache_length, max_tokens=args.max_tokens, repeats=args.repeats)
    if args.json:
        import json

        print(json.dumps(cost.as_dict()))
    else:
        print(cost.table())


if __name__ == "__main__":
    main()
