"""One sampling transform, shared by the target and every drafter.

Temperature, top-k and top-p follow transformers' `TemperatureLogitsWarper`, `TopKLogitsWarper`
and `TopPLogitsWarper` exactly (but for equal scores at top-p's edge, all kept: `_outside_nucleus`),
applied in that order (the order `generate()` uses). Greedy decoding
(temperature 0) is an explicit case, never a limit of the sampled one.

A repetition penalty (transformers' `RepetitionPenaltyLogitsProcessor`, applied before the three, as
`generate()` does) depends on the tokens before each position, so it is not part of `logits_to_probs`:
`penalize` applies it to the target's logits, row by row, given what each row has seen. Verifying against the
penalised p keeps the output exact whatever a drafter drew from; the draft model and the EAGLE head draft with the
penalty too, in chains and trees (`seen_mask`, `path_seen`, `penalize_seen`: a little more often accepted),
Medusa and early exit without it (with it they were accepted a little less often: docs/showcase.md).
"""

from __future__ import annotations

import functools
import hashlib
import math
import time
from dataclasses import dataclass

import numpy as np
import torch

from specui import native

SMALL_ARGMAX = 16384  # logits of at most this many elements take torch's argmax (measured faster there)


@dataclass(frozen=True)
class Sampling:
    """How tokens are chosen. `temperature == 0` means greedy (argmax)."""

    temperature: float = 0.0
    top_k: int = 0  # 0 keeps every token
    top_p: float = 1.0  # 1.0 keeps every token
    repetition_penalty: float = 1.0  # 1.0 leaves the logits as they are (`penalize`)

    def __post_init__(self):
        if (isinstance(self.temperature, bool) or not isinstance(self.temperature, (int, float))
                or not math.isfinite(self.temperature) or self.temperature < 0):
            raise ValueError(f"temperature must be a finite number >= 0 (0 means greedy), got {self.temperature!r}")
        if not isinstance(self.top_k, int) or isinstance(self.top_k, bool) or self.top_k < 0:
            raise ValueError(f"top_k must be an integer >= 0 (0 disables it), got {self.top_k!r}")
        if isinstance(self.top_p, bool) or not isinstance(self.top_p, (int, float)) or not (0.0 < self.top_p <= 1.0):
            raise ValueError(f"top_p must be in (0, 1] (1 disables it), got {self.top_p!r}")
        r = self.repetition_penalty
        if isinstance(r, bool) or not isinstance(r, (int, float)) or not (math.isfinite(r) and r > 0):
            raise ValueError(f"repetition_penalty must be a finite number > 0 (1 disables it), got {r!r}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


def penalize(logits: torch.Tensor, sampling: Sampling, context: list[int], drafts: list[int] = (),
             parents: list[int] | None = None) -> torch.Tensor:
    """The target's logits [V] or [1 + len(drafts), V] with `sampling`'s repetition penalty, as transformers'
    `RepetitionPenaltyLogitsProcessor` computes it (in float32, as `generate()` holds its scores): every token
    the row has seen is divided by the penalty where its logit is positive and multiplied where negative.
    Row 0 has seen `context` (the prompt and the tokens emitted so far); row i + 1 also draft i and its
    ancestors: `parents` gives each draft's parent (-1: none), None for a chain (each draft's parent the one
    before it). The logits themselves when the penalty is 1."""
    penalty = sampling.repetition_penalty
    if penalty == 1.0:
        return logits
    scores = logits.float()
    rows = scores.reshape(-1, scores.shape[-1])
    seen = torch.zeros(rows.shape, dtype=torch.bool, device=rows.device)
    seen[0, torch.as_tensor(context, dtype=torch.long, device=rows.device)] = True
    for i, token in enumerate(drafts):
        seen[i + 1] = seen[(i - 1 if parents is None else parents[i]) + 1]
        seen[i + 1, token] = True
    return torch.where(seen, _penalised(rows, penalty), rows).reshape(scores.shape)


def _penalised(scores: torch.Tensor, penalty: float) -> torch.Tensor:
    return torch.where(scores < 0, scores * penalty, scores / penalty)


def seen_mask(sampling: Sampling, context: list[int], size: int) -> torch.Tensor | None:
    """What a drafter's round has seen, so that it drafts with the target's repetition penalty (and proposes what the
    penalised target would pick): a bool mask [size] on the CPU of the context's ids (those past `size` left out),
    each draft marked as the round goes on (`mark`; the native rounds mark their own). None without a penalty."""
    if sampling.repetition_penalty == 1.0:
        return None
    seen, ids = torch.zeros(size, dtype=torch.bool), torch.as_tensor(context, dtype=torch.long)
    seen[ids[ids < size]] = True
    return seen


def penalize_seen(logits: torch.Tensor, sampling: Sampling, seen: torch.Tensor | None,
                  ids: torch.Tensor | None = None) -> torch.Tensor:
    """A drafter's logits [..., n] (float32) with the repetition penalty on the entries `seen` marks ([size], or one
    mask a row: `path_seen`), as `penalize` computes it; ids: each entry's id (None: its own index). The logits
    themselves when seen is None."""
    if seen is None:
        return logits
    mask = (seen[..., : logits.shape[-1]] if ids is None else seen[..., ids.cpu()]).to(logits.device)
    scores = logits.float()
    return torch.where(mask, _penalised(scores, sampling.repetition_penalty), scores)


def path_seen(seen: torch.Tensor | None, paths: list[list[int]]) -> torch.Tensor | None:
    """A token tree's masks [F, size]: each row `seen` (the context's) with the ids of its node's path marked too,
    as the target's row at that node sees them (`penalize` with parents). None without a penalty."""
    if seen is None:
        return None
    rows = seen.expand(len(paths), -1).clone()
    for row, path in zip(rows, paths):
        row[torch.as_tensor(path, dtype=torch.long)] = True
    return rows


def mark(seen: torch.Tensor | None, token) -> None:
    """Mark a drafted token (an id, or a one-element tensor) as seen by the round's later steps."""
    if seen is not None:
        seen[int(token)] = True


def logits_to_probs(logits: torch.Tensor, sampling: Sampling) -> torch.Tensor:
    """Turn logits [..., V] into the float32 distribution tokens are sampled from.

    Greedy sampling has no distribution to sample from; for it this returns the plain softmax, which
    specui only reports (the token itself is always the argmax).
    """
    scores = logits.float()  # a new tensor when logits are half precision; never edited in place below
    if sampling.greedy:
        return torch.softmax(scores, dim=-1)
    if sampling.temperature != 1.0:
        scores = scores / sampling.temperature
    if sampling.top_k > 0:
        k = min(sampling.top_k, scores.shape[-1])
        kth_best = torch.topk(scores, k, dim=-1).values[..., -1:]
        scores = scores.masked_fill(scores < kth_best, -math.inf)  # ties with the k-th score are kept
    if sampling.top_p < 1.0:
        scores = scores.masked_fill(_outside_nucleus(scores, sampling.top_p), -math.inf)
    return torch.softmax(scores, dim=-1)


class Rows:
    """`logits_to_probs` of a verify's logits [R, V], each row transformed when it is first read.

    A sampled round's rule reads its rows in order and stops at the first rejection (that row gives the residual)
    or after the last draft (the bonus row): rows past a rejection are never transformed (a tree's walk reads the
    rows of the root and the nodes it accepts, not of the branches it leaves), and with top-p each
    transform sorts the row (0.5 ms over SmolLM2's 49,152 tokens on a CPU, a tenth of a forward). A row alone gets
    the bits it gets in a block: the transform works row by row. Greedy rounds transform every row at once (a plain
    softmax, reported only). `rows[i]` is row i [V]; `rows[i, x]` its p(x); `read` the rows transformed so far."""

    def __init__(self, logits: torch.Tensor, sampling: Sampling, *, every_row: bool = False):
        """every_row: transform the whole block at once, read or not (as verifies did until stop 81)."""
        self.logits, self.sampling = logits, sampling
        self.shape, self.device = logits.shape, logits.device
        self._all = logits_to_probs(logits, sampling) if sampling.greedy or every_row else None
        self._rows: dict[int, torch.Tensor] = {}

    def __getitem__(self, index):
        if isinstance(index, tuple):
            i, x = index
            return self.row(int(i))[x]
        return self.row(int(index))

    def row(self, i: int) -> torch.Tensor:
        if self._all is not None:
            return self._all[i]
        i = range(self.shape[0])[i]  # negative indices as a tensor takes them; out of range raises
        if i not in self._rows:
            self._rows[i] = logits_to_probs(self.logits[i:i + 1], self.sampling)[0]
        return self._rows[i]

    @property
    def read(self) -> list[int]:
        return list(range(self.shape[0])) if self._all is not None else sorted(self._rows)

    def probs(self, rows: list[int], cols: list[int], *, needed: int) -> list[float | None]:
        """p(cols[j]) at rows[j]: rows up to `needed` are transformed if they were not yet (-1: none), later ones
        give None unless read already (every one in greedy mode)."""
        if self._all is not None:
            return self._all[rows, cols].tolist()
        return [float(self.row(i)[c]) if i <= needed or i in self._rows else None for i, c in zip(rows, cols)]


def _outside_nucleus(scores: torch.Tensor, top_p: float) -> torch.Tensor:
    """What `TopPLogitsWarper` removes from float32 scores [..., V]: sorted ascending, the tokens whose cumulative
    probability is at most 1 - top_p, never the most likely one. Those are a prefix of the ascending order (the
    running sum never decreases), so the sorted values alone say where it ends: every score below the smallest
    kept one is removed, with the warper's bits (the same softmax and running sum over the same sorted values).
    Where equal scores straddle that point all of them stay, where the warper's choice among them would follow its
    sort's order of equal values (unspecified). Sorting values alone on a CPU, numpy's sort or native code's
    (`_sorter`), where torch.sort, indices and all, took 3 ms a row (each verified token's p, at top-p < 1)."""
    if scores.device.type == "cpu":
        kernel = _sorter() if scores.dtype == torch.float32 and scores.dim() <= 2 else None
        ascending = kernel.sorted_values(scores) if kernel is not None and scores.stride(-1) == 1 else None
        if ascending is None:  # numpy's, or a NaN
            ascending = torch.from_numpy(np.sort(scores.detach().numpy(), axis=-1))
    else:
        ascending = torch.sort(scores, dim=-1).values
    cumulative = ascending.softmax(dim=-1).cumsum(dim=-1)
    removed = (cumulative <= 1.0 - top_p).sum(-1, keepdim=True).clamp_max(scores.shape[-1] - 1)
    return scores < ascending.gather(-1, removed)


def _sorter() -> native.Kernel | None:
    """The native kernels where they sort a row of scores faster than numpy here, else None (numpy's sort). Both give
    np.sort's values, so the choice changes no bit: numpy's is vectorised on some CPUs (0.09 ms over SmolLM2's 49,152
    scores on an Intel Xeon) and not on others (1 ms on an AMD EPYC of the Zen 4 generation), native code's radix
    sort 0.25 ms there."""
    kernel = native.kernel()
    return kernel if kernel is not None and _sorts_faster(kernel) else None


@functools.cache
def _sorts_faster(kernel: native.Kernel) -> bool:
    """Whether `kernel` sorts a row of SmolLM2's vocabulary size faster than numpy: the best of 5 timings each."""
    row = torch.randn(1, 49152, generator=torch.Generator().manual_seed(0)) * 4

    def best(sort) -> float:
        times = []
        for _ in range(5):
            start = time.perf_counter()
            sort()
            times.append(time.perf_counter() - start)
        return min(times)

    if kernel.sorted_values(row) is None:  # a build without the sort
        return False
    return best(lambda: kernel.sorted_values(row)) < best(lambda: np.sort(row.numpy(), axis=-1))


def sample(probs: torch.Tensor, generator: torch.Generator | None,
           uniforms: torch.Tensor | None = None) -> torch.Tensor:
    """Draw one token per row of probs [..., V] (non-negative, each row summing to anything above 0); returns
    [...] int64.

    By the inverse of each row's distribution function, summed in float64: one uniform u per row, and the
    token is the first whose cumulative probability exceeds u times the row's total (a token of probability
    0 is never drawn). It draws what `torch.multinomial` draws in law, 15x faster on a CPU (48 us against
    750 over 49,152 tokens: multinomial races one exponential draw per token). uniforms: the draws (float64, one
    a row) where they were taken beforehand, as a sampled drafting round takes its K (`specui.native_chain`).
    One float32 row on a CPU is drawn by native code (`native.Kernel.draw`): the same sums and token, the zeros
    outside a top-p nucleus skipped (30 us against 100–150)."""
    kernel = native.kernel() if probs.dim() == 1 and probs.dtype == torch.float32 and probs.device.type == "cpu" \
        and probs.stride(0) == 1 else None
    if kernel is not None and kernel.has_draw:
        u = torch.rand((1, 1), dtype=torch.float64, generator=generator) if uniforms is None else uniforms
        token = kernel.draw(probs, float(u.reshape(())))
        if token is None:
            raise ValueError("cannot sample: a row of probabilities sums to zero or is not finite")
        return torch.tensor(token)
    flat = probs.reshape(-1, probs.shape[-1])
    cumulative = flat.double().cumsum(-1)
    total = cumulative[:, -1:].contiguous()
    if not bool(((total > 0) & (total < math.inf)).all()):  # NaN fails both
        raise ValueError("cannot sample: a row of probabilities sums to zero or is not finite")
    u = torch.rand(total.shape, dtype=torch.float64, device=flat.device, generator=generator) if uniforms is None \
        else uniforms.to(flat.device, torch.float64).reshape(total.shape)
    tokens = torch.searchsorted(cumulative, u * total, right=True)
    # u * total may round up to the total itself: take the row's last token of nonzero probability
    tokens = torch.minimum(tokens, torch.searchsorted(cumulative, total, right=False))
    return tokens.reshape(probs.shape[:-1])


def argmax(logits: torch.Tensor) -> torch.Tensor:
    """`logits.argmax(-1)`, bit for bit (the first of equal maxima), through the native kernel for large
    float32 CPU logits: torch's CPU argmax over a 49,152-token vocabulary takes ~85 us a row. Small ones
    (a draft's reduced vocabulary) stay with torch, whose call costs less than the kernel's."""
    kernel = native.kernel() if logits.numel() > SMALL_ARGMAX else None
    return logits.argmax(-1) if kernel is None else kernel.argmax(logits)


def choose(logits: torch.Tensor, sampling: Sampling, generator: torch.Generator | None,
           uniform: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Pick the next token from logits [V]: returns (token [] int64, probs [V] it came from). uniform: the
    draw, where it was taken beforehand (`sample`)."""
    probs = logits_to_probs(logits, sampling)
    token = argmax(logits) if sampling.greedy else sample(probs, generator, uniform)
    return token, probs


class Generators:
    """One seeded `torch.Generator` per device, so that every draw happens where its tensor lives.

    A target spread over devices (`device_map`) takes its input on the embeddings' device and may put
    its logits on another; a generator can only draw on its own device. `for_tensor(t)` gives the
    generator of t's device, made on first use: the home device's is seeded with `seed` itself (a
    single-device run draws exactly what one generator would), any other with a seed derived from
    `seed` and the device's name, so that two devices never share a stream.
    """

    def __init__(self, seed: int, *, home: torch.device | str):
        self.seed = seed
        self.home = torch.device(home)
        self._by_device: dict[torch.device, torch.Generator] = {}

    def on(self, device: torch.device | str) -> torch.Generator:
        device = torch.device(device)
        if device.type == "cuda" and device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
        generator = self._by_device.get(device)
        if generator is None:
            home = self.home if not (self.home.type == "cuda" and self.home.index is None) else \
                torch.device("cuda", torch.cuda.current_device())
            seed = self.seed if device == home else derived_seed(self.seed, str(device))
            generator = self._by_device[device] = torch.Generator(device=device).manual_seed(seed)
        return generator

    def for_tensor(self, tensor: torch.Tensor) -> torch.Generator:
        """The generator that draws on `tensor`'s device."""
        return self.on(tensor.device)

    def copy(self) -> Generators:
        """An independent copy in the same state: it draws exactly what this one would draw next."""
        twin = Generators(self.seed, home=self.home)
        for device, generator in self._by_device.items():
            clone = torch.Generator(device=device)
            clone.set_state(generator.get_state())
            twin._by_device[device] = clone
        return twin


def derived_seed(seed: int, label: str) -> int:
    """A seed in [0, 2**64) for `label`'s stream, fixed by `seed` and `label` (no global state)."""
    digest = hashlib.blake2b(f"{seed}/{label}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little")


def own_drafter_seed(seed: int) -> int:
    """The seed a run of `seed` gives a drafter of one's own: in [0, 2**32), which every common generator takes
    (torch's, numpy's `RandomState`, Python's `random`), derived from `seed`, and never equal to it in the low 32
    bits, the only ones torch's CPU generator reads: the drafter never draws the target's stream."""
    derived = derived_seed(seed, "drafter") % 2**32
    return derived if derived != seed % 2**32 else (derived + 1) % 2**32
