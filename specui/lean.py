"""A lean, batch-invariant CPU forward of Llama-style decoders over a static KV cache.

`DecoderStack` runs a Llama/Mistral/Qwen2 decoder (batch 1, full attention) with the model's own
weights and dtype, without transformers' per-module call machinery, mask building and cache
bookkeeping. Every row it returns is *batch-invariant*: a token's logits are the same bits whether
it is computed alone (plain decoding) or among the K+1 tokens of a verify forward, so greedy
speculative decoding emits plain greedy decoding's tokens by construction, in any dtype, ties or not:
- matrix products (`RowLinear`, q/k/v and gate/up joined into one product each) compute every row
  the same way whatever the row count. Large float32 weights take `specui.native`'s kernels (one
  fused multiply-add chain per output, each weight read from memory once for all rows: 8 rows cost
  about 1.15 times one row on SmolLM2), or MKL's packed GEMM where those cannot be built; small ones
  and other dtypes run as x @ W^T with W^T stored. One token runs as two identical rows: a single row
  would take MKL's GEMV, which sums in another order;
- attention over a float32 cache is `specui.native`'s: each row's bits depend only on the sequence of
  keys it sees, so a token tree's row (its ancestors at scattered slots) equals the chain's row too.
  Otherwise (half precision, head sizes it lacks) it reads keys in whole grains of KEY_GRAIN (the
  zero-initialised cache past the end is masked), takes the softmax over them and sums values over
  blocks of KEY_BLOCK keys in order, so a query's bits do not depend on how many queries come with it
  (masked keys add exact zeros), though tree rows then equal the chain's only to float rounding;
- norms (in native code too, for float32: one fixed summation order per row), rotary embeddings, SiLU and
  residual adds work row by row or element by element.
Where every product takes the native kernels as a large matrix (float32 on a CPU with the native build: SmolLM2,
the chat draft), the layers run in one native call (`native_chain.StackLayers`: the same kernels from C, with the
Python steps' bits), and one token runs as one row: some four hundred Python-level calls a forward cost about 13%
of plain decoding's time on SmolLM2. A token tree's rows take them too (each row at its own position, seeing the
prefix and its ancestors), so they equal the chain's, as they do in the Python steps (whose SiLU is `rowswiglu`).
One block may be exempt: a prompt (`forward(prompt=True)`: into an empty cache, or a follow-up turn's new tokens
after a conversation's reused cache, `specui.prompt_cache`), which plain and speculative decoding compute as
the same block, takes MKL's GEMM for its large products where MKL is fast (same bits every time, not
row-invariant): it need only be computed alike in both.
The price: the logits are no longer transformers' own bits (its one-token forward takes the GEMV),
only equal to float32 rounding (tests check that, greedy tokens, and invariance), and the matrices
are held twice (packed or transposed copies beside the model's own parameters; packed at half the bytes
where every weight is exactly a bfloat16 or float16 value, `specui.native`).
Keys and values live in preallocated buffers, so rolling back is just not advancing (gpt-fast).
"""

from __future__ import annotations

import itertools

import torch
import torch.nn.functional as F

from specui import native, native_chain
from specui.decoders import plain_decoder
from specui.products import RowLinear, attention_rows_warning, mkl_fast, rows_invariant
from specui.static_kv import KEY_BLOCK, StaticKV

KEY_GRAIN = 64  # and reads keys up to the next multiple of this many (a divisor of KEY_BLOCK)
PREFILL_SDPA = 128  # without native attention, a first block longer than this (a prompt) takes sdpa's causal
# kernel (native attention reads a prompt in blocks of rows on torch's threads: 1.2-1.7x faster than sdpa's)
PROMPT_ROWS = 16  # a prompt block of at least this many float32 rows takes MKL's products (`forward(prompt=)`)
NATIVE_PROMPT_ROWS = 256  # ... of at least this many where the native layers run the stack: below it they read it
# faster (SmolLM2 on an Intel Xeon: 40 rows 101 against 152 ms, 128 rows 204 against 263; about even at 256-768)
NATIVE_BLOCK = 256  # native layers read a long block in parts of this many rows (bounding attention's scratch)


class DecoderParts:
    """What both lean forwards (this one, `specui.graphs.GraphStack`) read of a Llama-style decoder."""

    def __init__(self, model):
        base = model.model
        # the model's parts, never the model: a GraphStack is kept on its model, and goes with it (no cycle)
        self.embed, self.norm, self.rotary, self.lm_head = base.embed_tokens, base.norm, base.rotary_emb, model.lm_head
        self.layers = list(base.layers)
        first = self.layers[0].self_attn
        self.head_dim, self.groups = first.head_dim, first.q_proj.out_features // first.k_proj.out_features
        self.kv_heads = first.k_proj.out_features // self.head_dim


class DecoderStack(DecoderParts):
    """A lean, batch-invariant forward of a Llama-style decoder over a `StaticKV` (batch 1, CPU).

    It holds references to the model's own parameters (plus packed or transposed copies of its
    matrices) and computes the same model as transformers' sdpa path: RMSNorm in float32, rotary
    embeddings from the model's own `rotary_emb`, grouped-query attention with scores, softmax and
    value sums in float32 (half-precision models too, as sdpa's CPU kernel keeps them).
    drafts: the stack serves a draft model (`products.RowLinear`): every float32 product native where it can be.
    """

    def __init__(self, model, *, drafts: bool = False):
        super().__init__(model)
        first = self.layers[0].self_attn
        # per layer: (norm, q, k, v, o, norm, gate, up, down, attention scale), norms as (weight, eps)
        self.params = []
        built = native.kernel()  # asked once for every product (a float32 product takes it where it builds)

        def linear(*modules):
            return RowLinear(list(modules), drafts=drafts, kernel=built)

        for layer in self.layers:
            attn, mlp = layer.self_attn, layer.mlp
            norms = [(m.weight, m.variance_epsilon) for m in (layer.input_layernorm, layer.post_attention_layernorm)]
            self.params.append((norms[0], linear(attn.q_proj, attn.k_proj, attn.v_proj), linear(attn.o_proj),
                                norms[1], linear(mlp.gate_proj, mlp.up_proj), linear(mlp.down_proj), attn.scaling))
        self.head = linear(model.lm_head)
        # float32 caches: attention in native code (`native.Kernel.attend`); else in torch ops (`_attend`)
        kernel = built if first.k_proj.weight.dtype == torch.float32 else None
        self.native = kernel if kernel is not None and kernel.attends(self.head_dim) else None
        self.norms = kernel  # float32: RMSNorm in native code too (`_norm`)
        # Static rotary embeddings (rope_type "default") are a function of the position alone: a table
        # of the module's own cos and sin, grown with the cache (rows of it are what each position uses).
        rope = getattr(model.config, "rope_parameters", None) or {}
        self.rope_table = rope.get("rope_type") == "default" and self.head_dim % 16 == 0
        self.cos_table = self.sin_table = None  # [positions, head_dim]; sin with its first half negated
        # every product native too: the layers as native structs (a draft model's native rounds); with large
        # matrices the forward runs them in one native call (`_run`), and one token as one row
        serves = kernel is not None and native_chain.StackLayers.serves(self)
        ids = getattr(model, "token_ids", None)  # a draft restricted to a vocabulary: its rows' ids
        self.native_layers = native_chain.StackLayers(self, kernel, ids) if serves else None
        self.native_forward = serves and native_chain.StackLayers.forwards(self)
        # the fewest rows of a prompt that take MKL's products (None: never, a prompt is a block like any other)
        self.prompt_rows = (None if serves and not mkl_fast() else
                            NATIVE_PROMPT_ROWS if self.native_forward else PROMPT_ROWS)

    @classmethod
    def build(cls, model, *, drafts: bool = False) -> DecoderStack | None:
        """A stack for `model`, or None when its architecture or setup is not one this path computes."""
        device = model.get_input_embeddings().weight.device
        if device.type != "cpu":
            return None  # measured and tested on CPUs only; on a GPU, `specui.graphs.GraphStack`
        return cls(model, drafts=drafts) if plain_decoder(model, device) else None

    def _rotary(self, x: torch.Tensor, past: int, end: int) -> tuple[torch.Tensor, torch.Tensor]:
        """cos and sin (first half negated, see the rotation below) at positions past..end-1."""
        if not self.rope_table:
            positions = torch.arange(past, end, device=x.device).unsqueeze(0)
            cos, sin = self.rotary(x, position_ids=positions)  # [1, n, head_dim]
            return cos[0], _signed_sin(sin)[0]
        if self.cos_table is None or end > self.cos_table.shape[0]:
            size = max(end, 256, 2 * (0 if self.cos_table is None else self.cos_table.shape[0]))
            cos, sin = self.rotary(x, position_ids=torch.arange(size, device=x.device).unsqueeze(0))
            self.cos_table, self.sin_table = cos[0], _signed_sin(sin)[0]
        return self.cos_table[past:end], self.sin_table[past:end]

    def new_cache(self) -> StaticKV:
        weight = self.layers[0].self_attn.k_proj.weight
        return StaticKV(len(self.layers), self.kv_heads, self.head_dim, dtype=weight.dtype, device=weight.device)

    def forward(self, ids: torch.Tensor, cache: StaticKV, *, last_only: bool, features: tuple[int, ...] = (),
                early: tuple[int, torch.Tensor] | None = None, tree: tuple[torch.Tensor, torch.Tensor] | None = None,
                prompt: bool = False):
        """ids [1, n] at positions cache.length.. -> logits [n, V] ([1, V] with last_only).

        features: indices into transformers' `hidden_states` (i < layers: the input of layer i, 0 the
                  embeddings; i == layers: the final normed state); with them, returns (logits,
                  features [n, len(features) * D]) (features of every row, last_only or not).
        early: (stop, hidden [m, D]): the first m tokens already ran through layers 0..stop-1 (`run_early`,
               an early-exit draft), their keys and values are in the cache; they start at layer `stop`.
        tree: (positions [n], visible [n, past + n] bool): a token tree's rows at explicit positions, each
              seeing the cached keys marked visible (the prefix and its ancestors; see `CachedLM.extend_tree`).
              Its keys are written at slots past..past+n as usual. With native attention each row is the
              chain's row bit for bit; with torch's (half precision) equal to float rounding, as an
              ancestor's key sits at another slot and masked zeros fall in other places of the sums.
        prompt: the block is a prompt (into an empty cache, or a follow-up turn's new tokens after a reused
              conversation), which plain and speculative decoding both compute in one block: from PROMPT_ROWS
              float32 rows on, its large products take MKL's GEMM over all rows (`RowLinear.whole`, on torch's
              threads), with bits that may depend on the row count (no other block's do); where every product is
              native, only on CPUs where MKL is fast (`mkl_fast`: elsewhere the native kernels were 1.5-3x faster)
              and, where the native layers run the stack, only from NATIVE_PROMPT_ROWS rows on; else the prompt is
              a block like any other.
        Unless the native layers run the stack, one token runs as two identical rows (MKL would take its GEMV for
        one row, which rounds differently from the GEMM that computes a verify block); only the first row is kept.
        """
        if not torch.is_inference_mode_enabled():  # the buffer is an inference tensor, written in place
            with torch.inference_mode():
                return self.forward(ids, cache, last_only=last_only, features=features, early=early, tree=tree,
                                    prompt=prompt)
        n, past, layers = ids.shape[1], cache.length, len(self.layers)
        cache.reserve(past + n)
        found: dict[int, torch.Tensor] = {}
        rows = self._rows
        if tree is not None:
            x = self._run(rows(self.embed(ids[0])), cache, past, n, 0, layers, features, found, tree=tree)
        elif early is None:
            whole = (prompt and self.prompt_rows is not None and n >= self.prompt_rows
                     and self.embed.weight.dtype == torch.float32)
            x = self._run(rows(self.embed(ids[0])), cache, past, n, 0, layers, features, found, whole=whole)
        else:
            stop, hidden = early
            m = hidden.shape[0]
            if m < n:  # the tokens the draft did not feed (its last one) run the early layers now
                rest = self._run(rows(self.embed(ids[0, m:])), cache, past + m, n - m, 0, stop, (), {})
                hidden = torch.cat([hidden, rest[: n - m]])
            x = self._run(rows(hidden), cache, past, n, stop, layers, features, found)
        cache.length = past + n
        x = x[:n]
        kept = x if features else x[n - 1:n] if last_only else x
        normed = self._norm(kept, self.norm.weight, self.norm.variance_epsilon)
        found[layers] = normed
        out = normed[n - 1:n] if (features and last_only) else normed
        logits = self.head(rows(out))[: out.shape[0]]
        if not features:
            return logits
        return logits, torch.cat([found[i][:n] for i in features], dim=-1)

    def run_early(self, ids: torch.Tensor, cache: StaticKV, past: int, stop: int) -> torch.Tensor:
        """ids [1, n] at positions past.. through layers 0..stop-1 only -> their hidden states [n, D]
        entering layer `stop`; their keys and values for those layers go into the cache (an early-exit
        draft writes the target's own cache, which the verify forward then reuses: `forward(early=)`)."""
        if not torch.is_inference_mode_enabled():
            with torch.inference_mode():
                return self.run_early(ids, cache, past, stop)
        n = ids.shape[1]
        cache.reserve(past + n)
        return self._run(self._rows(self.embed(ids[0])), cache, past, n, 0, stop, (), {})[:n]

    def _run(self, x: torch.Tensor, cache: StaticKV, past: int, n: int, start: int, stop: int, features,
             found: dict, tree: tuple[torch.Tensor, torch.Tensor] | None = None, whole: bool = False) -> torch.Tensor:
        """x [rows, D] (n tokens, or one token as two identical rows) at positions past..past+n-1 through
        layers start..stop-1, their keys and values written into the cache; the input of layer i is kept
        in `found` when i is in `features`. whole: a prompt's block (see `forward`): MKL's products."""
        rows, end = x.shape[0], past + n
        if not whole and self.native_forward and (tree is None or n <= NATIVE_BLOCK):
            return self._run_native(x, cache, past, n, start, stop, features, found, tree)
        if tree is None:
            cos, sin = self._rotary(x, past, end)  # [n, head_dim] each
            mask = self._mask(past, n, rows, x.device)
        else:
            positions, visible = tree
            cos, sin = self._rotary(x, 0, int(positions.max()) + 1)
            cos, sin = cos[positions], sin[positions]
            mask = self._tree_mask(visible, rows, x.device)
        cos, sin = cos.expand(rows, -1), sin.expand(rows, -1)  # [rows, head_dim]
        rope = self.native is not None and cos.stride(-1) == 1 and sin.stride(-1) == 1  # in native code
        if not rope:
            cos, sin = cos[:, None], sin[:, None]  # over heads: [rows, 1, head_dim]
        keys_all, values_all = cache.keys, cache.values
        hd, half = self.head_dim, self.head_dim // 2
        q_heads = self.kv_heads * self.groups
        qk_width = (q_heads + self.kv_heads) * hd
        for i in range(start, stop):
            if i in features:
                found[i] = x
            norm1, qkv, wo, norm2, gate_up, down, scaling = self.params[i]
            if whole:  # the same products, through MKL (`RowLinear.whole`)
                qkv, wo, down = qkv.whole, wo.whole, down.whole
            out = qkv(self._norm(x, *norm1))  # [rows, (heads + 2 kv_heads) * hd]
            key_buf, value_buf = keys_all[i], values_all[i]  # [kv_heads, hd, capacity], [kv_heads, capacity, hd]
            if rope:  # the same ops' bits, and the cache writes, in one native call
                q = self.native.rope(out, n, q_heads, self.kv_heads, cos, sin, key_buf, value_buf, past)
            else:
                qk, v = out[:, :qk_width].view(rows, -1, hd), out[:, qk_width:].view(rows, -1, hd)  # [rows, heads, hd]
                # rotary embeddings of q and k at once; rotate_half(t) * sin == cat(t2, t1) * cat(-sin1, sin2)
                # exactly: (-a) * b == a * (-b) in IEEE arithmetic
                qk = (qk * cos) + (torch.cat((qk[..., half:], qk[..., :half]), dim=-1) * sin)
                q, k = qk[:, :q_heads], qk[:, q_heads:]
                key_buf[:, :, past:end] = k[:n].permute(1, 2, 0)
                value_buf[:, past:end] = v[:n].transpose(0, 1)
            x = x + wo(self._attend(q, key_buf, value_buf, scaling, mask))
            x = x + down(self._swiglu((gate_up.whole if whole else gate_up)(self._norm(x, *norm2)), gate_up))
        return x

    def _run_native(self, x: torch.Tensor, cache: StaticKV, past: int, n: int, start: int, stop: int, features,
                    found: dict, tree: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
        """`_run` in native calls (`native_chain.StackLayers`, the same kernels and bits as the Python steps): the
        layers between the requested features in one call each; a tree's rows (at most NATIVE_BLOCK) in one part."""
        x = x[:n].clone()  # computed in place
        if tree is not None:
            positions, visible = tree
            self._rotary(x, 0, int(positions.max()) + 1)  # the table, grown to hold these positions
            rows = native_chain.TreeRows(self.cos_table, self.sin_table, positions, native.tree_seen(visible))
        else:
            self._rotary(x, past, past + n)
            rows = None
        self.native_layers.bind(self, cache)
        cuts = sorted({start, stop, *(i for i in features if start <= i < stop)})
        kept: dict[int, list[torch.Tensor]] = {}
        for first in range(0, n, NATIVE_BLOCK):  # every row's bits are its own: parts change none of them
            part = x[first:first + NATIVE_BLOCK]
            for a, b in itertools.pairwise(cuts):
                if a in features:
                    kept.setdefault(a, []).append(part.clone())
                self.native_layers.run(part, past + first, a, b, rows)
        found.update({a: parts[0] if len(parts) == 1 else torch.cat(parts) for a, parts in kept.items()})
        return x

    @property
    def _rows(self):
        """How a block becomes GEMM rows: as it is where the native layers run the stack (every product native,
        row-invariant whatever the row count), else one token as two identical rows (`_rows`)."""
        return _same if self.native_forward else _rows

    def _swiglu(self, gate_up_out: torch.Tensor, gate_up: RowLinear) -> torch.Tensor:
        """SiLU(gate) * up: `rowswiglu` for float32 with native kernels (the bits of the native layers, so a token
        tree's rows equal the chain's), else torch's ops."""
        if self.norms is not None and gate_up_out.dtype == torch.float32:
            return native_chain.swiglu(self.norms, gate_up_out)
        gate, up = gate_up.split(gate_up_out)
        return F.silu(gate) * up

    def _norm(self, x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
        """RMSNorm of rows x: `specui.native`'s for float32 (one fixed summation order per row, so rows stay
        batch-invariant; equal to transformers' to float32 rounding), else transformers' ops (`_rms_norm`)."""
        if self.norms is not None and self.norms.norms(x, weight):
            return self.norms.rms_norm(x, weight, eps)
        return _rms_norm(x, weight, eps)

    def _attend(self, q: torch.Tensor, key_buf: torch.Tensor, value_buf: torch.Tensor, scaling,
                mask: torch.Tensor | None) -> torch.Tensor:
        """q [rows, heads, hd] over the cached keys -> [rows, heads * hd].

        Batch-invariant (see the module docstring): every product is a GEMM of at least two rows over
        whole grains of keys, values summed block by block in order. Grouped queries share their key
        and value head without copies of the cache.
        `mask` is `_mask`'s additive mask; None for a long prompt without native attention: sdpa's causal kernel.
        """
        rows, heads, hd = q.shape
        kvh, groups = self.kv_heads, self.groups
        if mask is None:  # a long prompt (shared by plain and speculative decoding)
            out = F.scaled_dot_product_attention(q.transpose(0, 1)[None], key_buf[None, :, :, :rows].transpose(2, 3),
                                                 value_buf[None, :, :rows], scale=scaling, is_causal=True,
                                                 enable_gqa=groups > 1)
            return out[0].transpose(0, 1).reshape(rows, -1)
        if isinstance(mask, native.Seen):
            return self.native.attend(q, key_buf, value_buf, mask, scaling)
        dtype, length = q.dtype, mask.shape[1]
        if rows > 2 and not rows_invariant("batched"):  # this machine's bmm rows depend on the row count:
            attention_rows_warning(native.kernel(), dtype, hd)
            per_row = mask.view(groups, rows, length)  # each row as plain decoding computes it, twice over
            return torch.cat([self._attend(q[r:r + 1].repeat(2, 1, 1), key_buf, value_buf, scaling,
                                           per_row[:, r:r + 1].repeat(1, 2, 1).reshape(groups * 2, length))[:1]
                              for r in range(rows)])
        keys, values = key_buf[:, :, :length], value_buf[:, :length]
        if dtype != torch.float32:  # half precision: scores, softmax and sums in float32, as sdpa's kernel keeps them
            q, keys, values = q.float(), keys.float(), values.float()
        q = q.view(rows, kvh, groups, hd).permute(1, 2, 0, 3).reshape(kvh, groups * rows, hd)
        scores = torch.baddbmm(mask, q, keys, alpha=scaling)  # [kvh, groups*rows, length]
        weights = torch.softmax(scores, dim=-1)
        out = torch.bmm(weights[..., :KEY_BLOCK], values[:, :KEY_BLOCK])
        for start in range(KEY_BLOCK, length, KEY_BLOCK):
            out = out + torch.bmm(weights[..., start:start + KEY_BLOCK], values[:, start:start + KEY_BLOCK])
        return out.view(kvh, groups, rows, hd).permute(2, 0, 1, 3).reshape(rows, heads * hd).to(dtype)

    def _mask(self, past: int, n: int, rows: int, device) -> torch.Tensor | None:
        """[groups * rows, length]: 0 where a query row may see a key, -inf where not (keys past its
        position, and the unwritten tail of the last grain); None for a long prompt (sdpa's). With native attention,
        the `native.Seen` that says the same (row r sees keys 0..its position), which `_attend` takes instead, at
        any length (`native.Kernel.attend` reads a long block in bounded blocks of rows)."""
        if self.native is not None:  # row r sees the keys up to its own position (one token: twice)
            prefix = torch.arange(past + 1, past + n + 1, dtype=torch.int32).expand(rows).contiguous()
            return native.Seen(prefix, None, None, past + n)
        if past == 0 and n > PREFILL_SDPA:
            return None
        length = -(-(past + n) // KEY_GRAIN) * KEY_GRAIN
        positions = torch.arange(past, past + n, device=device).expand(rows)  # one token: twice its position
        hidden = torch.arange(length, device=device)[None, :] > positions.repeat(self.groups)[:, None]
        return torch.zeros(hidden.shape, device=device).masked_fill_(hidden, float("-inf"))  # float32

    def _tree_mask(self, visible: torch.Tensor, rows: int, device) -> torch.Tensor:
        """`_mask` for tree rows: 0 where `visible` [n, past + n] marks a key, -inf elsewhere (with native
        attention, the `native.Seen`: the prefix every row sees, then each row's ancestors and itself)."""
        n, width = visible.shape
        if self.native is not None:  # the prefix before the tree, then the row's ancestors and itself
            seen = native.tree_seen(visible)
            return seen if n > 1 else native.Seen(*(t.repeat(rows) for t in seen[:3]), width)
        length = -(-width // KEY_GRAIN) * KEY_GRAIN
        mask = torch.full((n, length), float("-inf"), device=device)
        mask[:, :width].masked_fill_(visible.to(device), 0.0)
        return mask.expand(rows, -1).repeat(self.groups, 1) if n == 1 else mask.repeat(self.groups, 1)


def _rows(x: torch.Tensor) -> torch.Tensor:
    """x [n, D] as GEMM rows: one row becomes two identical rows (see `DecoderStack.forward`)."""
    return x if x.shape[0] > 1 else x.repeat(2, 1)


def _same(x: torch.Tensor) -> torch.Tensor:
    return x


def _signed_sin(sin: torch.Tensor) -> torch.Tensor:
    half = sin.shape[-1] // 2
    return torch.cat((-sin[..., :half], sin[..., half:]), dim=-1)


def _rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """transformers' LlamaRMSNorm, op for op (the casts are skipped when they are no-ops)."""
    dtype = x.dtype
    h = x if dtype == torch.float32 else x.to(torch.float32)
    variance = h.pow(2).mean(-1, keepdim=True)
    h = h * torch.rsqrt(variance + eps)
    return weight * (h if dtype == torch.float32 else h.to(dtype))
