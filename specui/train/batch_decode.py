"""The target's answers for training, many at a time and fast on a CUDA GPU: a batch decoded over a static
KV cache, every step one replayed CUDA graph.

transformers' `generate` of SmolLM2-135M, 256 answers a batch, took about 25 s a batch on an H100 with six
writers side by side (about 100 ms a step each; 11k answer tokens a second in all, 2026-11-28): a step issues
several hundred kernels of a few microseconds of arithmetic each, behind Python and launches. The answers are
what the drafts learn from, and a GPU round's minutes are few, so `answer_batch` decodes a batch the way
`specui.graphs` decodes one sequence (and gpt-fast does):
- the prompts, left-padded to one width, are read eagerly as one block into a static cache of that width plus
  `max_new` columns (the keys and values in the compute dtype, as the writers' autocast kept them);
- then every step is the same computation over the same buffers, captured once as a CUDA graph and replayed:
  the batch's next tokens in, each row's position and the step's cache column advanced, the logits out;
- greedy or sampled (temperature and top-p, transformers' order) outside the graph, on the logits.
Numerics are the writers' autocast: float32 weights and residual stream, products and attention in bfloat16
(`dtype`), norms in float32. Without CUDA the same steps run eagerly (the tests, in float32, compare greedy
answers with `generate`'s). Rows past their end-of-answer token keep decoding and are padded out.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from transformers.models.llama.modeling_llama import rotate_half

from specui.graphs import _layer_weights
from specui.lean import DecoderParts, _rms_norm


class BatchDecoder(DecoderParts):
    """One batch of prompts [B, T] (left-padded, `mask` 1 on real tokens) and its answers of up to `max_new`
    tokens; `run(sample)` returns the new tokens [B, max_new] (padded with `pad` past each row's `eos`)."""

    def __init__(self, model, ids: torch.Tensor, mask: torch.Tensor, *, max_new: int, eos: int, pad: int,
                 dtype: torch.dtype | None = None, graphs: bool = True):
        super().__init__(model)
        self.device = ids.device
        self.dtype = dtype or (torch.bfloat16 if self.device.type == "cuda" else torch.float32)
        self.weights = [_cast(_layer_weights(layer), self.dtype) for layer in self.layers]
        self.head = model.lm_head.weight.to(self.dtype)
        self.graphed = graphs and self.device.type == "cuda"
        (B, T), width = ids.shape, ids.shape[1] + max_new
        self.max_new, self.eos, self.pad = max_new, eos, pad
        shape = (len(self.layers), B, self.kv_heads, width, self.head_dim)
        self.keys = torch.zeros(shape, dtype=self.dtype, device=self.device)
        self.values = torch.zeros(shape, dtype=self.dtype, device=self.device)
        cos, sin = self.rotary(torch.zeros(1, device=self.device), position_ids=torch.arange(width, device=self.device)[None])
        self.cos, self.sin = cos[0].float(), sin[0].float()  # [width, hd] tables: a row's position picks its line
        pads = T - mask.sum(1)  # each row's left padding
        self.valid = torch.arange(width, device=self.device)[None] >= pads[:, None]  # [B, width] keys a row may see
        self.valid[:, T:] = False  # the answer's columns, each opened as its step writes it
        self.prompt = (ids, (torch.arange(T, device=self.device)[None] - pads[:, None]).clamp(min=0))
        self.ids = torch.zeros(B, dtype=torch.long, device=self.device)  # the step's inputs and outputs
        self.positions = T - pads  # each row's next position
        self.column = torch.full((1,), T, dtype=torch.long, device=self.device)  # the step's cache column
        self.logits = torch.zeros(B, self.head.shape[0], dtype=torch.float32, device=self.device)
        self.graph = None

    def run(self, *, sample: dict | None = None) -> torch.Tensor:
        """The answers [B, max_new]: greedy, or drawn with `sample` ({"temperature", "top_p"}, as `generate`)."""
        with torch.inference_mode():
            out = torch.full((self.ids.shape[0], self.max_new), self.pad, dtype=torch.long, device=self.device)
            done = torch.zeros(self.ids.shape[0], dtype=torch.bool, device=self.device)
            logits = self._read_prompt()
            for t in range(self.max_new):
                token = _pick(logits, sample)
                out[:, t] = token.masked_fill(done, self.pad)
                done |= token == self.eos
                if t + 1 == self.max_new or (t % 16 == 15 and bool(done.all())):  # a sync every 16 steps
                    break
                self.ids.copy_(token)
                logits = self._next()
            return out

    def _read_prompt(self) -> torch.Tensor:
        """The prompts as one block into columns 0..T-1; the last column's logits [B, V]."""
        ids, positions = self.prompt
        B, T = ids.shape
        causal = torch.ones(T, T, dtype=torch.bool, device=self.device).tril()
        sees = self.valid[:, None, :T] & causal[None]  # [B, T, T]: real keys up to each row's own column
        sees |= torch.eye(T, dtype=torch.bool, device=self.device)[None]  # a pad row sees itself (no empty softmax)
        mask = torch.zeros(B, 1, T, self.keys.shape[3], dtype=torch.bool, device=self.device)
        mask[:, 0, :, :T] = sees
        columns = torch.arange(T, device=self.device)
        x = self._layers(self.embed(ids).float(), self.cos[positions], self.sin[positions], mask, columns)
        return self._logits(x[:, -1])

    def _next(self) -> torch.Tensor:
        """One step (the batch's tokens in `self.ids`): replayed from its graph on a GPU, else computed."""
        if not self.graphed:
            self._step()
            return self.logits
        if self.graph is None:
            self.graph = self._capture()
        self.graph.replay()
        return self.logits

    def _step(self) -> None:
        self.valid.index_fill_(1, self.column, True)  # the new token sees itself
        mask = self.valid[:, None, None, :]
        x = self._layers(self.embed(self.ids)[:, None].float(), self.cos[self.positions][:, None],
                         self.sin[self.positions][:, None], mask, self.column)
        self.logits.copy_(self._logits(x[:, 0]))
        self.positions += 1
        self.column += 1

    def _capture(self) -> torch.cuda.CUDAGraph:
        """The step as a CUDA graph. The warm-up step on a side stream is a real step: the state it advances
        (positions, the column, the cache) is put back before capture, and the capture computes it again."""
        saved = (self.positions.clone(), self.column.clone(), self.valid.clone())
        stream = torch.cuda.Stream(self.device)
        stream.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(stream):
            self._step()
        torch.cuda.current_stream(self.device).wait_stream(stream)
        for buffer, value in zip((self.positions, self.column, self.valid), saved):
            buffer.copy_(value)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, capture_error_mode="thread_local"):
            self._step()  # recorded, not run: the first replay is the step
        return graph

    def _layers(self, x, cos, sin, mask, columns) -> torch.Tensor:
        mask = mask if x.shape[1] == 1 else mask.repeat(1, 1, self.groups, 1)  # each query head's rows (`_layer`)
        for i, w in enumerate(self.weights):
            x = _layer(x, cos, sin, mask, self.keys[i], self.values[i], columns, w, self.dtype,
                       self.kv_heads, self.groups, self.head_dim)
        return x

    def _logits(self, x: torch.Tensor) -> torch.Tensor:
        normed = _rms_norm(x, self.norm.weight, self.norm.variance_epsilon)
        return F.linear(normed.to(self.dtype), self.head).float()


def _cast(weights: tuple, dtype: torch.dtype) -> tuple:
    """`_layer_weights`' tuple with the products' weights and biases in `dtype` (norms stay as they are)."""
    def cast(t):
        return None if t is None else t.to(dtype)

    norm1, *products, norm2 = weights[:6]
    feed = [(cast(w), cast(b)) for w, b in weights[6:9]]
    return (norm1, *[(cast(w), cast(b)) for w, b in products], norm2, *feed, weights[9])


def _layer(x, cos, sin, mask, keys, values, columns, weights, dtype, kv_heads: int, groups: int, head_dim: int):
    """One decoder layer over x [B, T, D] (float32): keys and values of the T new tokens written at `columns`
    of keys/values [B, kv_heads, width, hd]; attention under `mask` [B, 1, groups * T, width] (True: seen; row
    g * T + t is token t's, for each query head g of a key-value head)."""
    (norm1, eps1), (wq, bq), (wk, bk), (wv, bv), (wo, bo), (norm2, eps2), (wg, bg), (wu, bu), (wd, bd), scaling = weights
    B, T, _ = x.shape
    h = _rms_norm(x, norm1, eps1).to(dtype)
    q = F.linear(h, wq, bq).view(B, T, kv_heads * groups, head_dim).transpose(1, 2)
    k = F.linear(h, wk, bk).view(B, T, kv_heads, head_dim).transpose(1, 2)
    v = F.linear(h, wv, bv).view(B, T, kv_heads, head_dim).transpose(1, 2)
    cos, sin = cos[:, None], sin[:, None]  # [B, 1, T, hd]
    q = (q * cos + rotate_half(q) * sin).to(dtype)
    k = (k * cos + rotate_half(k) * sin).to(dtype)
    keys.index_copy_(2, columns, k)
    values.index_copy_(2, columns, v)
    # a key-value head's query heads as its rows (row g*T + t), so no key or value is copied per query head
    q = q.reshape(B, kv_heads, groups * T, head_dim)
    out = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask, scale=scaling)
    out = out.view(B, kv_heads * groups, T, head_dim).transpose(1, 2).reshape(B, T, -1)
    x = x + F.linear(out, wo, bo).float()
    h = _rms_norm(x, norm2, eps2).to(dtype)
    return x + F.linear(F.silu(F.linear(h, wg, bg)) * F.linear(h, wu, bu), wd, bd).float()


def _pick(logits: torch.Tensor, sample: dict | None) -> torch.Tensor:
    """The next tokens [B]: argmax, or a draw after `generate`'s temperature and top-p (the smallest set of
    tokens whose probability reaches top_p, the most likely always kept)."""
    if not sample:
        return logits.argmax(-1)
    scores = logits / sample.get("temperature", 1.0)
    top_p = sample.get("top_p", 1.0)
    if top_p < 1.0:
        ordered, order = scores.sort(dim=-1, descending=True)
        before = ordered.softmax(-1).cumsum(-1) - ordered.softmax(-1)  # the mass of the tokens ranked above
        ordered[..., 1:].masked_fill_(before[..., 1:] >= top_p, float("-inf"))
        scores = torch.empty_like(scores).scatter_(-1, order, ordered)
    return torch.multinomial(scores.softmax(-1), 1)[:, 0]


def answer_batch(model, ids: torch.Tensor, mask: torch.Tensor, *, max_new: int, eos: int, pad: int,
                 sample: dict | None = None, graphs: bool = True) -> torch.Tensor:
    """generate()'s sequences for left-padded prompts: [B, T + max_new], answers padded with `pad` past `eos`."""
    answers = BatchDecoder(model, ids, mask, max_new=max_new, eos=eos, pad=pad, graphs=graphs).run(sample=sample)
    return torch.cat([ids, answers], dim=1)
