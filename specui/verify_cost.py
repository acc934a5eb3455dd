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

Beside it, on a CPU, the arithmetic floor (`floor=True`): a forward of n tokens does n times the
multiply-adds of one (its matrix products, and attention over the keys each row sees), and no exact
float32 kernel computes them faster than this machine computes float32 multiply-adds at all. That rate
is measured (`fma_rate`: the faster of torch's GEMM and specui's native product on a matrix held in
cache, on the threads the products use), and the floor of n tokens is max(1, n's multiply-adds ÷ that
rate ÷ the one-token forward's time): where one token's forward waits on other work (reading its weights,
rebuilding compressed ones), a few more rows ride along for free; past the point where their arithmetic
outlasts it, every row costs its multiply-adds, whatever the kernel.

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
    multiply_adds: tuple[int, ...] = ()  # of each block's forward (`multiply_adds`); with `floor`
    fma_rate: float | None = None  # float32 multiply-adds a second, the fastest measured here (`fma_rate`)

    @property
    def floor_ratios(self) -> tuple[float, ...] | None:
        """The least each block can cost ÷ the measured one-token forward: its multiply-adds at `fma_rate`, and
        never below one (the weights are read once either way); None where the floor was not measured."""
        if not self.fma_rate or len(self.multiply_adds) != len(self.tokens):
            return None
        return tuple(max(1.0, m / self.fma_rate / self.seconds[0]) for m in self.multiply_adds)

    @property
    def ratios(self) -> tuple[float, ...]:
        """Each block's time ÷ the one-token forward's (1.0 first; a free verify stays at 1.0)."""
        return tuple(s / self.seconds[0] for s in self.seconds)

    def ratio(self, tokens: int) -> float:
        """Time of a `tokens`-token forward ÷ a one-token forward (K+1 tokens: a round's verify)."""
        return self.ratios[self.tokens.index(tokens)]

    def as_dict(self) -> dict:
        floor = self.floor_ratios
        return {**asdict(self), "ratios": list(self.ratios), "floor_ratios": list(floor) if floor else None}

    def table(self) -> str:
        floor = self.floor_ratios
        lines = [f"cache {self.cache_length} tokens, {self.threads} thread(s), median of {self.repeats}",
                 "tokens   ms      ÷ one token" + ("   floor" if floor else "")]
        lines += [f"{n:>6} {1e3 * s:7.2f}   {r:5.2f}" + (f"        {floor[i]:5.2f}" if floor else "")
                  for i, (n, s, r) in enumerate(zip(self.tokens, self.seconds, self.ratios))]
        if floor:
            lines.append(f"floor: each block's multiply-adds ({self.multiply_adds[0] / 1e6:.1f}M a token) at the "
                         f"fastest float32 rate measured here, {2e-9 * self.fma_rate:.0f} GFLOP/s; never below one "
                         "token's forward")
        return "\n".join(lines)


def measure_verify_cost(model, *, cache_length: int = 128, max_tokens: int = 16, repeats: int = 7,
                        warmup: int = 2, seed: int = 0, floor: bool = False) -> VerifyCost:
    """Time KV-cached forwards of 1..max_tokens new tokens after `cache_length` random tokens; floor: also
    count their multiply-adds and measure this CPU's float32 rate (the module docstring; a float32 model on a
    CPU only)."""
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
    arithmetic = {}
    if floor and device.type == "cpu" and next(model.parameters()).dtype == torch.float32:  # the rate is float32's
        arithmetic = {"multiply_adds": tuple(multiply_adds(model, cache_length, n) for n in tokens),
                      "fma_rate": fma_rate()}
    return VerifyCost(cache_length=cache_length, tokens=tokens, seconds=seconds, repeats=repeats,
                      threads=torch.get_num_threads(), **arithmetic)


def multiply_adds(model, cache_length: int, tokens: int) -> int:
    """The multiply-adds of a forward of `tokens` new tokens after `cache_length` cached ones: every row through
    every matrix product (transformers' Linear and Conv1D weights, the output layer included; an embedding
    lookup is free), and each row's attention, a product with the keys and one with the values it sees."""
    from transformers.pytorch_utils import Conv1D

    per_row = sum(m.weight.numel() for m in model.modules() if isinstance(m, (torch.nn.Linear, Conv1D)))
    config = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    heads, layers = config.num_attention_heads, config.num_hidden_layers
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    seen = sum(cache_length + i + 1 for i in range(tokens))  # the keys each new row attends to, itself included
    return tokens * per_row + 2 * layers * heads * head_dim * seen


def fma_rate(size: int = 768, repeats: int = 7) -> float:
    """Float32 multiply-adds a second on this CPU, the fastest of what computes them here: torch's GEMM of two
    size x size matrices, and specui's native product of a cached weight with 12 rows, each on the threads
    the target's products use (the best of `repeats` timings each, after three)."""
    from specui import native

    kernel = native.kernel()
    threads = native.product_threads() if kernel is not None else torch.get_num_threads()
    a, b = torch.randn(size, size), torch.randn(size, size)
    best = _fastest(lambda: torch.mm(a, b), repeats, threads=threads) / size ** 3
    if kernel is not None:
        product, rows = kernel.product(torch.randn(512, 768), half=False), torch.randn(12, 768)
        best = min(best, _fastest(lambda: product(rows), repeats) / (12 * 512 * 768))
    return 1.0 / best


def _fastest(call, repeats: int, *, threads: int | None = None) -> float:
    """The fastest of `repeats` timings of `call()` (after three untimed), on `threads` torch threads if given."""
    saved = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    try:
        times = []
        for i in range(3 + repeats):
            started = time.perf_counter()
            call()
            if i >= 3:
                times.append(time.perf_counter() - started)
        return min(times)
    finally:
        torch.set_num_threads(saved)


def sync_device(device: torch.device) -> None:
    """Wait for `device`'s queued work (CUDA); nothing to wait for on a CPU."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _load_target(args):
    from specui.command_line import check_preset
    from specui.loading import load_pair
    from specui.presets import load_config, with_pair

    config = load_config(args.config)
    preset = with_pair(config, args.target).get(None) if args.target else config.get(args.preset)
    check_preset(PROG, preset)  # a wheel or folder missing: a usage mistake (2), as in every command line
    if args.target:
        from transformers import AutoModelForCausalLM

        dtype = getattr(torch, args.dtype)
        return AutoModelForCausalLM.from_pretrained(args.target, dtype=dtype).eval()
    return load_pair(preset, progress=lambda msg: print(msg, file=sys.stderr)).target


PROG = "python -m specui.verify_cost"


def main(argv: list[str] | None = None) -> None:
    from specui.command_line import refuse_empty

    p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
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
    refuse_empty(p, args, "target", "preset", "config")  # read as left out: the default preset ran without a word
    if min(args.cache_length, args.max_tokens, args.repeats) < 1 or args.threads < 0:
        p.error("--cache-length, --max-tokens and --repeats must be >= 1, --threads >= 0")
    model = _load_target(args)
    if args.threads:
        torch.set_num_threads(args.threads)
    cost = measure_verify_cost(model, cache_length=args.cache_length, max_tokens=args.max_tokens, repeats=args.repeats,
                               floor=True)
    if args.json:
        import json

        print(json.dumps(cost.as_dict()))
    else:
        print(cost.table())


if __name__ == "__main__":
    from specui.command_line import run

    run(main, PROG)
