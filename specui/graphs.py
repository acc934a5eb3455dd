"""The GPU forward: Llama-style decoders over a static KV cache, every forward one replayed CUDA graph.

On a GPU a small model is launch-bound: transformers' forward of SmolLM2-135M issues hundreds of
kernels, each a few microseconds of work behind more microseconds of Python and launch. `GraphStack`
computes the same model (transformers' Llama layer op for op but for attention, with the model's own
weights in its dtype) as captured CUDA graphs, replayed for every forward, the way gpt-fast and vLLM decode:
- every forward has the same shapes: ROWS rows (a forward of n <= ROWS new tokens pads the rest; longer
  blocks, such as a big tree, run as several forwards of ROWS), attention over the cache's whole
  capacity under a mask, keys and values written with `index_copy_` at slots held in a buffer;
- so it is *batch-invariant by construction*: a token's row runs through exactly the same kernels,
  with exactly the same shapes, whether it is decoded alone (plain decoding) or among the K+1 tokens
  of a verify forward or a tree's nodes. Each output row of a matrix product depends on its own input
  row alone, so greedy speculative decoding emits plain greedy decoding's tokens bit for bit; the
  bits are not transformers' own (other kernels), only equal to rounding;
- and a verify of up to ROWS tokens costs what a one-token forward costs (the padding's arithmetic is
  free on a memory-bound GPU).
Padded rows repeat the last real row's position, see what it sees, and write their keys into scratch
slots past the capacity that no row ever sees. Attention: scores, softmax and value sums in float32
over a float32 cache (keys and values are exact there), the output back in the model's dtype.

One block is exempt: a prompt read into an empty cache, which plain and speculative decoding both read
as one block, runs eagerly in blocks of up to PROMPT_ROWS rows (a chat's history is read in a few forwards,
not in replays of ROWS). An early-exit draft runs the first layers on the target's own cache (`run_early`)
and the verify goes on from there, each layer range its own graph. With SPECUI_COMPILE=1 each layer goes
through torch.compile before capture (inductor fuses its small ops: fewer kernels per replay).
Without CUDA (the tests on a CPU) the same forward runs eagerly, with the same buffers.
"""

from __future__ import annotations

import logging
import os

import torch
import torch.nn.functional as F

from specui.decoders import plain_decoder
from specui.lean import KEY_BLOCK, DecoderParts, _rms_norm

ROWS = 16  # rows of every forward: K+1 up to 16 verifies in one
PROMPT_ROWS = 512  # a prompt read into an empty cache runs eagerly, in blocks of up to this many rows
COMPILE = "SPECUI_COMPILE"  # =1: each decoder layer through torch.compile before capture (fewer, fused kernels)
_ATTRIBUTE = "_specui_graph_stack"  # where a model keeps its stack (built once, reused by every CachedLM)
log = logging.getLogger(__name__)


class GraphKV:
    """One cache's buffers: keys and values [layers, kv_heads, capacity + ROWS, head_dim] in float32 (the
    last ROWS slots are scratch for padded rows), rotary tables, the inputs (ids, positions, slots, the
    visibility mask) and outputs (logits, states) a captured graph reads and writes, and its graphs."""

    def __init__(self, stack: GraphStack, capacity: int):
        device, dtype = stack.device, stack.dtype
        shape = (len(stack.layers), stack.kv_heads, capacity + ROWS, stack.head_dim)
        self.keys = torch.zeros(shape, dtype=torch.float32, device=device)
        self.values = torch.zeros(shape, dtype=torch.float32, device=device)
        self.capacity, self.length = capacity, 0
        positions = torch.arange(capacity, device=device)
        cos, sin = stack.rotary(torch.zeros(1, dtype=dtype, device=device), position_ids=positions[None])
        half = stack.head_dim // 2
        self.cos = cos[0].to(dtype)  # [capacity, head_dim]
        self.sin = torch.cat((-sin[0, :, :half], sin[0, :, half:]), dim=-1).to(dtype)  # first half negated
        self.ids = torch.zeros(ROWS, dtype=torch.long, device=device)
        self.meta = torch.zeros(2 * ROWS, dtype=torch.long, device=device)  # each row's slot, then its position
        self.slots, self.positions = self.meta[:ROWS], self.meta[ROWS:]
        self.columns = torch.arange(capacity + ROWS, device=device)  # a slot's index (scratch: never visible)
        self.columns[capacity:] = 1 << 40
        self.visible = torch.zeros(ROWS, capacity + ROWS, dtype=torch.bool, device=device)
        self.logits = torch.zeros(ROWS, stack.vocab_size, dtype=dtype, device=device)
        self.states = torch.zeros(len(stack.layers) + 1, ROWS, stack.width, dtype=dtype, device=device)
        self.hidden = torch.zeros(ROWS, stack.width, dtype=dtype, device=device)  # states between layer ranges
        self.graphs: dict[tuple, torch.cuda.CUDAGraph] = {}  # (with states, first layer, stop) -> its graph

    def get_seq_length(self) -> int:
        return self.length

    def move(self, start: int, slots: list[int]) -> None:
        """Move the keys and values at `slots` to start..start+len(slots) (a tree's accepted path)."""
        index = torch.tensor(slots, dtype=torch.long, device=self.keys.device)
        end = start + len(slots)
        self.keys[:, :, start:end] = self.keys.index_select(2, index)
        self.values[:, :, start:end] = self.values.index_select(2, index)


class GraphStack(DecoderParts):
    """The forward of a Llama/Mistral/Qwen2 decoder (batch 1) as replayed CUDA graphs (see the module).

    `forward(ids, cache, ...)` and `run_early` keep `specui.lean.DecoderStack`'s contract: chains, trees,
    features, and an early-exit draft's partial runs on the target's own cache."""

    def __init__(self, model, *, graphs: bool = True, compile: bool | None = None):
        """graphs: capture CUDA graphs (on a GPU); compile: each layer through torch.compile (None: SPECUI_COMPILE)."""
        super().__init__(model)
        self.width = self.embed.weight.shape[1]
        self.vocab_size = model.lm_head.out_features
        self.device, self.dtype = self.embed.weight.device, self.embed.weight.dtype
        self.graphed = graphs and self.device.type == "cuda"
        self.sizes = (self.kv_heads, self.groups, self.head_dim)
        self.weights = [_layer_weights(layer) for layer in self.layers]
        # compiled (SPECUI_COMPILE=1): inductor fuses each layer's small elementwise ops, fewer kernels a replay
        self.layer = (torch.compile(decoder_layer, fullgraph=True, dynamic=False)
                      if self.graphed and (os.environ.get(COMPILE) == "1" if compile is None else compile)
                      else decoder_layer)
        self.spare: list[GraphKV] = []  # caches of finished generations, graphs and all, for the next ones

    def __deepcopy__(self, memo):
        return None  # a copied model (a draft made from a target) builds its own stack when it first runs

    def __reduce__(self):
        return _nothing, ()  # a pickled model (torch.save) leaves its captured graphs behind

    @classmethod
    def shared(cls, model) -> GraphStack | None:
        """The model's stack when it runs on a CUDA device and is a decoder this path computes, else None;
        built once per model, so graphs captured for one generation serve the next."""
        stack = model.__dict__.get(_ATTRIBUTE)
        device = model.get_input_embeddings().weight.device
        if stack is not None and stack.device == device:
            return stack
        rope = getattr(model.config, "rope_parameters", None) or {}
        if rope.get("rope_type", "default") in ("dynamic", "longrope"):
            return None  # rotary embeddings that change with the sequence's length: no fixed table
        if device.type != "cuda" or not plain_decoder(model, device):
            return None
        return cls.attach(model)

    @classmethod
    def attach(cls, model, *, graphs: bool = True, compile: bool | None = None) -> GraphStack:
        """Make `model` use a GraphStack from now on (on a CPU: eagerly, for tests)."""
        stack = cls(model, graphs=graphs, compile=compile)
        object.__setattr__(model, _ATTRIBUTE, stack)  # not a submodule: the model's state dict stays its own
        return stack

    def new_cache(self) -> GraphKV:
        return self.spare.pop() if self.spare else GraphKV(self, KEY_BLOCK)

    def release(self, cache: GraphKV) -> None:
        """A generation is done with `cache`: keep it (and its captured graphs) for the next one."""
        cache.length = 0
        if len(self.spare) < 2:
            self.spare.append(cache)

    def run_early(self, ids: torch.Tensor, cache: GraphKV, past: int, stop: int) -> torch.Tensor:
        """ids [1, n] at slots past.. through layers 0..stop-1 only -> their hidden states [n, D] entering layer
        `stop`, their keys and values for those layers cached (an early-exit draft: `DecoderStack.run_early`)."""
        if not torch.is_inference_mode_enabled():
            with torch.inference_mode():
                return self.run_early(ids, cache, past, stop)
        n = ids.shape[1]
        self._reserve(cache, past + n)
        out = []
        for a in range(0, n, ROWS):
            b = min(n, a + ROWS)
            self._step(cache, ids[0, a:b], past + a, None, layers=(0, stop))
            out.append(cache.hidden[: b - a].clone())
        return torch.cat(out)

    def forward(self, ids: torch.Tensor, cache: GraphKV, *, last_only: bool, features: tuple[int, ...] = (),
                early: tuple[int, torch.Tensor] | None = None, tree: tuple[torch.Tensor, torch.Tensor] | None = None,
                prompt: bool = False):
        """ids [1, n] at slots cache.length.. -> logits [n, V] ([1, V] with last_only), with features
        (logits, states [n, len(features) * D]) as `DecoderStack.forward`. early: (stop, hidden [m, D]), the
        first m tokens already through layers < stop (`run_early`). tree: (positions [n], visible [n, past + n]
        bool), each row's position and the cached keys it sees. prompt: the block is a prompt into an empty
        cache, which plain and speculative decoding both read as one block: longer than ROWS, it runs eagerly
        in blocks of PROMPT_ROWS (`_prompt`), far fewer forwards than replays of ROWS rows."""
        if not torch.is_inference_mode_enabled():
            with torch.inference_mode():
                return self.forward(ids, cache, last_only=last_only, features=features, early=early, tree=tree)
        n, past, start, hidden = ids.shape[1], cache.length, 0, None
        if prompt and past == 0 and n > ROWS and early is None and tree is None:
            self._reserve(cache, n)
            return self._prompt(ids[0], cache, last_only=last_only, features=features)
        if tree is not None:
            tree = (tree[0].tolist(), tree[1].cpu())
        self._reserve(cache, past + n)
        if early is not None:  # the tokens the draft did not feed (its last one) run the early layers now
            start, hidden = early
            if hidden.shape[0] < n:
                hidden = torch.cat([hidden, self.run_early(ids[:, hidden.shape[0]:], cache, past + hidden.shape[0],
                                                           start)])
        logits, states = [], []
        for a in range(0, n, ROWS):
            b = min(n, a + ROWS)
            chunk = None if hidden is None else hidden[a:b]
            wanted = not last_only or features or b == n  # an earlier chunk's logits are not wanted
            self._step(cache, ids[0, a:b], past + a, None if tree is None else (tree[0][a:b], tree[1][a:b]), hidden=chunk,
                       layers=(start, len(self.layers)), with_states=bool(features))
            if wanted:
                logits.append(cache.logits[: b - a].clone())
            if features:
                states.append(torch.cat([cache.states[i, : b - a] for i in features], dim=-1))
        cache.length = past + n
        logits = torch.cat(logits)
        if last_only:
            logits = logits[-1:]
        return (logits, torch.cat(states)) if features else logits

    def _prompt(self, ids: torch.Tensor, cache: GraphKV, *, last_only: bool, features: tuple[int, ...]):
        """A prompt [n] into an empty cache, eagerly in blocks of up to PROMPT_ROWS rows (`forward(prompt=True)`):
        the same layers over wider blocks; the output layer only for the rows wanted."""
        n, layers, logits, states = ids.shape[0], len(self.layers), [], []
        for a in range(0, n, PROMPT_ROWS):
            b = min(n, a + PROMPT_ROWS)
            positions = torch.arange(a, b, device=self.device)
            cos, sin, mask = self._rows(cache, positions, cache.columns[None] <= positions[:, None])  # sees 0..a+i
            x, found = self.embed(ids[a:b]), {}
            for i in range(layers):
                found[i] = x
                x = decoder_layer(x, cos, sin, mask, cache.keys[i], cache.values[i], positions, self.weights[i],
                                  *self.sizes)
            if last_only and not features and b < n:
                continue  # this block's logits are not wanted
            normed = _rms_norm(x if features or not last_only else x[-1:], self.norm.weight, self.norm.variance_epsilon)
            found[layers] = normed
            out = normed[-1:] if last_only else normed
            if b == n or not last_only:
                logits.append(F.linear(out, self.lm_head.weight, self.lm_head.bias))
            if features:
                states.append(torch.cat([found[i] for i in features], dim=-1))
        cache.length = n
        logits = torch.cat(logits)
        return (logits, torch.cat(states)) if features else logits

    def _step(self, cache: GraphKV, ids: torch.Tensor, first: int, tree, *, layers: tuple[int, int],
              hidden: torch.Tensor | None = None, with_states: bool = False) -> None:
        """m rows at slots first..first+m-1 through `layers` (start, stop): fill the inputs (`hidden`, the rows'
        states entering layer start, when start > 0), then replay that forward's graph (or run it)."""
        m = ids.shape[0]
        cache.ids[:m] = ids
        cache.ids[m:] = ids[-1]
        if hidden is not None:
            cache.hidden[:m] = hidden
            cache.hidden[m:] = hidden[-1]
        slots = list(range(first, first + m)) + list(range(cache.capacity + m, cache.capacity + ROWS))  # pads: scratch
        positions = slots[:m] if tree is None else tree[0]
        positions = positions + [positions[-1]] * (ROWS - m)  # padded rows: the last real row's position and sight
        cache.meta.copy_(torch.tensor(slots + positions))
        if tree is None:  # row i sees slots 0..its own position (never a scratch slot)
            torch.le(cache.columns[None], cache.positions[:, None], out=cache.visible)
        else:
            visible = torch.zeros(ROWS, cache.capacity + ROWS, dtype=torch.bool)
            width = min(tree[1].shape[1], first + m)
            visible[:m, :width] = tree[1][:, :width]
            visible[m:] = visible[m - 1]
            cache.visible.copy_(visible)
        key = (with_states, *layers)
        if not self.graphed:
            self._compute(cache, *key)
            return
        graph = cache.graphs.get(key)
        if graph is None:
            graph = cache.graphs[key] = self._capture(cache, key)
        graph.replay()

    def _capture(self, cache: GraphKV, key: tuple[bool, int, int]) -> torch.cuda.CUDAGraph:
        """Capture the forward over `cache`'s buffers (its inputs already filled: warm-up runs compute the
        same keys and values the replay writes)."""
        stream = torch.cuda.Stream(self.device)
        stream.wait_stream(torch.cuda.current_stream(self.device))
        try:
            with torch.cuda.stream(stream):
                for _ in range(2):  # the first compiles the layer, when asked to
                    self._compute(cache, *key)
        except Exception as e:  # torch.compile needs Triton and a C compiler: without them, the plain layer
            if self.layer is decoder_layer:
                raise
            log.warning("torch.compile failed (%s); the GPU forward runs uncompiled", str(e).splitlines()[0][:200])
            self.layer = decoder_layer
            return self._capture(cache, key)
        torch.cuda.current_stream(self.device).wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, capture_error_mode="thread_local"):
            self._compute(cache, *key)
        return graph

    def _compute(self, cache: GraphKV, with_states: bool, start: int, stop: int) -> None:
        """Layers start..stop-1 over the ROWS input rows (from the embeddings, or cache.hidden when start > 0):
        through the last layer, cache.logits [ROWS, V] (and cache.states) written; else cache.hidden."""
        x = self.embed(cache.ids) if start == 0 else cache.hidden.clone()  # [ROWS, D]
        cos, sin, mask = self._rows(cache, cache.positions, cache.visible)
        for i in range(start, stop):
            if with_states:
                cache.states[i].copy_(x)
            x = self.layer(x, cos, sin, mask, cache.keys[i], cache.values[i], cache.slots, self.weights[i], *self.sizes)
        if stop < len(self.layers):
            cache.hidden.copy_(x)
            return
        normed = _rms_norm(x, self.norm.weight, self.norm.variance_epsilon)
        if with_states:
            cache.states[stop].copy_(normed)
        cache.logits.copy_(F.linear(normed, self.lm_head.weight, self.lm_head.bias))

    def _rows(self, cache: GraphKV, positions: torch.Tensor, visible: torch.Tensor):
        """What attention reads per row: cos and sin [rows, 1, hd] at `positions`, and the additive mask
        [kv_heads, groups * rows, slots] (row (g, r): 0 where `visible` [rows, slots] marks a key, else -inf)."""
        mask = torch.zeros(visible.shape, device=visible.device).masked_fill_(~visible, float("-inf"))
        mask = mask.repeat(self.groups, 1)[None].expand(self.kv_heads, -1, -1)
        return cache.cos[positions][:, None], cache.sin[positions][:, None], mask

    def _reserve(self, cache: GraphKV, length: int) -> None:
        """Grow `cache` to hold `length` tokens (capacity doubled, a multiple of KEY_BLOCK; graphs recaptured)."""
        if length <= cache.capacity:
            return
        size = -(-max(length, 2 * cache.capacity) // KEY_BLOCK) * KEY_BLOCK
        grown = GraphKV(self, size)
        grown.keys[:, :, : cache.capacity] = cache.keys[:, :, : cache.capacity]
        grown.values[:, :, : cache.capacity] = cache.values[:, :, : cache.capacity]
        length = cache.length
        cache.__dict__.update(grown.__dict__)  # new buffers: graphs captured over the old ones are dropped
        cache.length = length


def _nothing() -> None:
    return None


def _layer_weights(layer) -> tuple:
    """A layer's tensors and constants in `decoder_layer`'s order (the model's own parameters)."""
    attn, mlp = layer.self_attn, layer.mlp
    norms = [(m.weight, m.variance_epsilon) for m in (layer.input_layernorm, layer.post_attention_layernorm)]
    attention = [(m.weight, m.bias) for m in (attn.q_proj, attn.k_proj, attn.v_proj, attn.o_proj)]
    feed = [(m.weight, m.bias) for m in (mlp.gate_proj, mlp.up_proj, mlp.down_proj)]
    return (norms[0], *attention, norms[1], *feed, attn.scaling)


def decoder_layer(x, cos, sin, mask, keys, values, slots, weights, kv_heads: int, groups: int, head_dim: int):
    """One decoder layer over ROWS rows (transformers' Llama layer, op for op but for attention): its keys and
    values written into `keys`/`values` [kv_heads, slots, head_dim] at `slots`; returns the layer's output.
    A plain function of tensors, so one `torch.compile` of it serves every layer of a model."""
    (norm1, eps1), (wq, bq), (wk, bk), (wv, bv), (wo, bo), (norm2, eps2), (wg, bg), (wu, bu), (wd, bd), scaling = weights
    rows, half = x.shape[0], head_dim // 2
    h = _rms_norm(x, norm1, eps1)
    q = F.linear(h, wq, bq).view(rows, kv_heads * groups, head_dim)
    k, v = F.linear(h, wk, bk).view(rows, kv_heads, head_dim), F.linear(h, wv, bv).view(rows, kv_heads, head_dim)
    q = q * cos + torch.cat((q[..., half:], q[..., :half]), dim=-1) * sin  # transformers' rotate_half, sin signed
    k = k * cos + torch.cat((k[..., half:], k[..., :half]), dim=-1) * sin
    keys.index_copy_(1, slots, k.transpose(0, 1).float())
    values.index_copy_(1, slots, v.transpose(0, 1).float())
    q = q.float().view(rows, kv_heads, groups, head_dim).permute(1, 2, 0, 3).reshape(kv_heads, groups * rows, head_dim)
    scores = torch.baddbmm(mask, q, keys.transpose(1, 2), alpha=scaling)  # [kvh, groups * rows, slots]
    out = torch.bmm(torch.softmax(scores, dim=-1), values)  # [kvh, groups * rows, hd]
    out = out.view(kv_heads, groups, rows, head_dim).permute(2, 0, 1, 3).reshape(rows, -1).to(x.dtype)
    x = x + F.linear(out, wo, bo)
    h = _rms_norm(x, norm2, eps2)
    return x + F.linear(F.silu(F.linear(h, wg, bg)) * F.linear(h, wu, bu), wd, bd)
