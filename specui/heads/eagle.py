"""EAGLE: a one-layer head that drafts in the target's feature space (Li et al., EAGLE 1-3).

At a position t whose target states are known, the head reads u_t, the target's states fused
(EAGLE-3: a low, a middle and the top layer, side by side, through one linear map), and the embedding
of the token that follows, x_{t+1}:

    a_t = fc([u_t, embed(x_{t+1})])    h_t = layer(a_t)    q(x_{t+2}) = softmax(out(norm(h_t)))

`layer` is one pre-norm decoder layer (attention with rotary positions over the head's own KV cache,
SwiGLU MLP: `specui.heads.eagle_layer`). h_t stands in for the target's state at t+1, so the next step
feeds u_{t+1} = h_t with the token just drafted: the head runs K steps autoregressively, and after the
verify forward it takes the target's fresh states of the accepted tokens instead (`observe`), at no extra
target work.

Training (EAGLE-3's "training-time test"): step 1 reads the target's states; step s reads the head's
own step s-1 outputs, attending to real keys before the block and its own earlier steps inside it,
exactly as drafting will. The loss is the cross-entropy to the target's distributions at each step.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from specui import native
from specui.drafters.base import Confidence, Draft
from specui.drafters.tree import DraftTree, ancestry, frontier_seen, grow, on_vocabulary
from specui.heads import common
from specui.heads.eagle_layer import HeadLayer, rms_norm
from specui.native_chain import HeadChain, picks, uniforms
from specui.products import linear
from specui.sampling import Generators, Sampling, choose, logits_to_probs, mark, penalize_seen, seen_mask


class EagleHead(nn.Module):
    kind = "eagle"

    def __init__(self, target, *, token_ids, fuse_layers: list[int], heads: int, ffn: int, train_steps: int = 3,
                 target_shape: dict | None = None):
        super().__init__()
        config = target.config
        width = config.hidden_size
        self.fuse_layers = tuple(int(i) for i in fuse_layers)
        self.train_steps = train_steps
        self.arguments = {"fuse_layers": list(self.fuse_layers), "heads": heads, "ffn": ffn, "train_steps": train_steps,
                          "target_shape": target_shape or common.target_shape(target)}
        self.fuse = nn.Linear(len(self.fuse_layers) * width, width, bias=False)
        self.fc = nn.Linear(2 * width, width, bias=False)
        theta = (getattr(config, "rope_parameters", None) or {}).get("rope_theta", 10000.0)
        eps = getattr(config, "rms_norm_eps", 1e-6)
        self.layer = HeadLayer(width, heads=heads, ffn=ffn, theta=theta, eps=eps)
        self.norm = nn.Parameter(target.model.norm.weight.detach().clone().float())
        self.eps = eps
        self.output = common.VocabOutput(target, token_ids)
        object.__setattr__(self, "_embed", target.get_input_embeddings())  # borrowed, never saved

    @property
    def feature_layers(self) -> tuple[int, ...]:
        return self.fuse_layers

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.output.forward(rms_norm(hidden, self.norm, self.eps), normed=True)

    def inputs(self, fused: torch.Tensor, next_ids: torch.Tensor) -> torch.Tensor:
        """a = fc([u, embed(next)]) for fused states u [.., T, D] and the tokens that follow [.., T]."""
        embedded = F.embedding(next_ids, self._embed.weight)  # the module's own op, without its call's overhead
        return linear(torch.cat([fused, embedded.to(fused.dtype)], dim=-1), self.fc.weight)

    def make_drafter(self, target_model) -> EagleDrafter:
        return EagleDrafter(self)

    # -- training ---------------------------------------------------------------------------------------

    def training_loss(self, batch: dict) -> torch.Tensor:
        """Cross-entropy to the target (its distributions, or its greedy tokens) over `train_steps` unrolled steps
        (weights 0.8^(s-1))."""
        ids, logp, mask = batch["ids"], common.targets(batch), batch["mask"]
        T = ids.shape[1] - 1  # position t reads x_{t+1}; its step-s output predicts x_{t+2}
        fused = self.fuse(torch.cat([batch["hidden"][i] for i in self.fuse_layers], dim=-1))[:, :T]
        a = self.inputs(fused, ids[:, 1:])  # [B, T, D]
        positions = torch.arange(T, device=ids.device)
        keys, values, total, weight_sum, h = [], [], 0.0, 0.0, None  # h: the previous step's output
        for s in range(1, self.train_steps + 1):
            if s > 1:  # the head's own output at t-1 stands in for the target's state at t
                u = torch.cat([torch.zeros_like(h[:, :1]), h[:, :-1]], dim=1)
                a = self.inputs(u, ids[:, 1:])
            q, k, v = self.layer.project(a, positions)
            keys.append(k)
            values.append(v)
            attended = F.scaled_dot_product_attention(q, torch.cat(keys, dim=-2), torch.cat(values, dim=-2),
                                                      attn_mask=_unrolled_mask(T, s, ids.device))
            h = self.layer.finish(a, attended)
            valid = mask[:, 1:T + 1].clone()  # target row t+1: the target's distribution of x_{t+2}
            valid[:, : s - 1] = False  # step s at t needs s-1 real positions before it
            # the output layer on valid rows only
            loss = common.soft_loss(self.logits(h[valid]), logp[:, 1:T + 1][valid])
            total, weight_sum = total + 0.8 ** (s - 1) * loss, weight_sum + 0.8 ** (s - 1)
        return total / weight_sum


def _unrolled_mask(T: int, s: int, device) -> torch.Tensor:
    """[T, s*T] bool: the step-s query at position t sees step-1 keys at positions <= t-s+1 and the
    step-j key at position t-s+j (2 <= j <= s), the keys drafting would have cached."""
    t = torch.arange(T, device=device)[:, None]
    p = torch.arange(T, device=device)[None, :]
    blocks = [p <= t - s + 1] + [p == t - s + j for j in range(2, s + 1)]
    mask = torch.cat(blocks, dim=1)
    mask[:, 0] |= ~mask.any(dim=1)  # a row that sees nothing (t < s-1, never in the loss) sees one key
    return mask


class EagleDrafter:
    """Drafts K tokens with an `EagleHead`, reading the target's states of every verified token."""

    name = "EAGLE"
    trusted_q = True  # its q is a softmax it drew from: the engine skips its per-round check of q
    stop_below = 0.0  # a round stops drafting once the head's confidence falls below this (`Confidence`)

    def __init__(self, head: EagleHead):
        self.head = head
        self.target_features = head.fuse_layers
        self.device = head.fc.weight.device

    def start(self, prompt: list[int], *, sampling: Sampling, seed: int, features: torch.Tensor | None = None,
              resume: dict | None = None) -> None:
        """resume: a conversation's cache's `keep()` of an earlier turn, with "pairs": how many of its real pairs
        still hold (`specui.prompt_cache`): the head reads only the states after them."""
        self.sampling = sampling
        self.generators = Generators(seed ^ 0xEA61E, home=self.device)
        self.cache = None  # the head's keys [heads, head_dim, capacity] and values [heads, capacity, head_dim]
        kernel = native.kernel() if self.device.type == "cpu" and self.head.fc.weight.dtype == torch.float32 else None
        # float32 on a CPU: the rotary step, the cache writes and attention in native code (`_step`)
        self.native = kernel if kernel is not None and kernel.attends(self.head.layer.head_dim) else None
        # a round in one native call (`specui.native_chain`): greedy, or sampled (temperature, top-k, top-p)
        self.chain = HeadChain(self.head, kernel) if self.native is not None and picks(sampling) and \
            HeadChain.serves(self.head) else None
        self.filled = 0  # cached positions in use: real pairs, then the draft steps of this round
        self.length = 0  # cached positions that hold real (target-state) pairs
        self.pending = features  # target states not yet fed to the head; the tokens after them end the context
        if resume is not None and resume.get("head") is self.head and features is not None and len(features) > 1:
            pairs = min(resume["pairs"], resume["length"], len(features) - 1)  # the last is fed again: it drafts
            self.cache, self.filled, self.length = resume["cache"], pairs, pairs
            self.pending = features[pairs:]

    def keep(self) -> dict | None:
        """The head's cache of real pairs, for a conversation's next turn (`start(resume=)`)."""
        return None if self.cache is None else {"head": self.head, "cache": self.cache, "length": self.length}

    def propose(self, context: list[int], k: int) -> Draft:
        if k == 0 or self.pending is None or len(self.pending) == 0:
            return Draft.empty(self.device)
        head = self.head
        ids = head.output.token_ids.to(self.device)
        draws = uniforms(self.sampling, k, self.generators.on(self.device))  # a sampled round's k draws
        seen = seen_mask(self.sampling, context, head.output.vocab_size)  # with a repetition penalty
        if self._native_rounds:  # the round in one native call
            n = len(self.pending)
            self._reserve(self.filled + n + k, like=self.pending)  # the feed's n slots, then k - 1 steps at most
            index, probs = self.chain.run(self.pending, torch.tensor(context[-n:]), self.filled, k, self.stop_below,
                                          self.cache, self.sampling, draws, seen)
            self.length, self.filled, self.pending = self.length + n, self.filled + n + len(index) - 1, None
            return self._draft(ids[index], probs, ids)
        h, _ = self._feed_pending(context)  # [1, D]: predicts the first draft token
        tokens, probs, confident = [], [], Confidence(self.stop_below)
        for i in range(k):
            logits = penalize_seen(head.logits(h[-1]), self.sampling, seen, ids)
            index, q = choose(logits, self.sampling, None, None if draws is None else draws[i])  # the head's ids
            token = ids[index]
            mark(seen, token)
            tokens.append(token)
            probs.append(q)
            if i + 1 == k or not confident.goes_on(logits):
                break
            h = self._step(head.inputs(h[-1:], token.view(1)))
        return self._draft(torch.stack(tokens), torch.stack(probs), ids)

    def _draft(self, tokens: torch.Tensor, probs: torch.Tensor, ids: torch.Tensor) -> Draft:
        """The proposal with q on the target's vocabulary: zero outside the head's ids."""
        return Draft(tokens, on_vocabulary(probs, ids, self.head.output.vocab_size))

    def observe(self, num_accepted: int, *, features: torch.Tensor | None = None) -> None:
        self._trim(self.length)  # forget the draft steps; the accepted tokens' real states come instead
        self.pending = features

    def propose_tree(self, context: list[int], k: int, *, width: int, nodes: int) -> DraftTree:
        """A tree to depth <= k (`specui.drafters.tree`): each expanded node's children are the head's top
        `width` tokens after it; one head step per depth over the nodes expanded, each seeing the head's
        cache and its ancestors' steps (dropped by `observe_tree`, which feeds the target's real states). With a
        repetition penalty each node's children are picked as the target's row there sees: the context and the path."""
        if k == 0 or self.pending is None or len(self.pending) == 0:
            return DraftTree(torch.empty(0, dtype=torch.long, device=self.device), [], None)
        head = self.head
        ids = head.output.token_ids.to(self.device)
        seen = seen_mask(self.sampling, context, head.output.vocab_size)
        fed, first = self._feed_pending(context)  # predicts the tree's first depth
        root = fed[-1]
        states, slots, base = {}, {}, self.length

        def expand(frontier, tokens, parents):
            if frontier == [-1]:
                logits = head.logits(fed) if first is None else first
                return logits_to_probs(penalize_seen(logits, self.sampling, seen, ids), self.sampling)
            above = [ancestry(i, parents) for i in frontier]
            for i in frontier:
                slots[i] = len(slots)
            visible = torch.zeros(len(frontier), base + len(slots), dtype=torch.bool, device=self.device)
            visible[:, :base] = True
            for row, (i, ancestors) in enumerate(zip(frontier, above)):
                visible[row, [base + slots[j] for j in [i, *ancestors]]] = True
            parent_states = torch.stack([root if parents[i] < 0 else states[parents[i]] for i in frontier])
            fed_ids = torch.tensor([tokens[i] for i in frontier], device=self.device)
            positions = torch.tensor([base + len(x) for x in above], device=self.device)
            h, logits = self._depth(parent_states, fed_ids, positions, visible)
            states.update(zip(frontier, h))
            paths = frontier_seen(seen, frontier, tokens, parents, above)
            return logits_to_probs(penalize_seen(logits, self.sampling, paths, ids), self.sampling)  # grow maps ids

        output = head.output
        return grow(expand, depth=k, width=width, nodes=nodes, floor=self.stop_below, token_ids=output.token_ids,
                    vocab_size=output.vocab_size)[0]

    def observe_tree(self, path: list[int], *, features: torch.Tensor | None = None) -> None:
        self.observe(len(path), features=features)

    @property
    def _native_rounds(self) -> bool:
        """Whether drafting runs in native calls (`specui.native_chain.HeadChain`): a chain's round in one, a tree's
        feed and each of its depths in one."""
        return self.chain is not None and torch.is_inference_mode_enabled()

    def _feed_pending(self, context: list[int]) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Feed the target states not yet fed, each with the token after it (the context's last ones), into
        the head's cache; returns the last row's output [1, D], which predicts the token after the context, and
        its logits [1, vocabulary] where a native call computed them (else None)."""
        head, n = self.head, len(self.pending)
        follow = torch.tensor(context[-n:], device=self.device)
        if self._native_rounds:
            self._reserve(self.filled + n, like=self.pending)
            h, logits = self.chain.tree_step(self.pending, follow, self.filled, self.cache)
            self.filled += n
        else:
            fused = linear(self.pending.to(head.fc.weight.dtype), head.fuse.weight)
            h, logits = self._step(head.inputs(fused, follow)), None
        self.length += n
        self.pending = None
        return h[-1:], logits

    def _depth(self, parent_states: torch.Tensor, ids: torch.Tensor, positions: torch.Tensor,
               visible: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """A tree depth's rows (their parents' states and their tokens, each at its position seeing `visible`) at the
        next slots of the head's cache: (their states [m, D], their logits [m, vocabulary])."""
        if self._native_rounds:  # `_step` and the logits below in one native call
            start = self.filled
            self._reserve(start + len(ids), like=parent_states)
            self.filled = start + len(ids)
            return self.chain.tree_step(parent_states, ids, start, self.cache, (positions, native.tree_seen(visible)))
        h = self._step(self.head.inputs(parent_states, ids), positions=positions, visible=visible)
        return h, self.head.logits(h)

    def _step(self, a: torch.Tensor, *, positions: torch.Tensor | None = None,
              visible: torch.Tensor | None = None) -> torch.Tensor:
        """Run rows a [n, D] at the next positions of the head's cache (kept), causally."""
        layer = self.head.layer
        start, n = self.filled, a.shape[0]
        self._reserve(start + n, like=a)
        keys, values = self.cache
        self.filled = start + n
        if self.native is not None and torch.is_inference_mode_enabled():
            # the torch ops below in two native calls: the rotary step writing the cache, then attention
            # (row i sees the cache and rows <= i, or a tree row the cache before the tree, its ancestors
            # and itself); the same math, rounded alike but for attention's sums
            cos, sin = layer._rotation(range(start, start + n) if positions is None else positions, a.dtype, a.device)
            q = self.native.rope(layer.qkv_rows(a), n, layer.heads, layer.heads, cos, sin, keys, values, start)
            seen = native.tree_seen(visible) if visible is not None else \
                native.Seen(torch.arange(start + 1, start + n + 1, dtype=torch.int32), None, None, start + n)
            return layer.finish(a, self.native.attend(q, keys, values, seen, layer.head_dim ** -0.5), flat=True)
        q, k, v = layer.project(a, range(start, start + n) if positions is None else positions)
        keys[:, :, start:start + n], values[:, start:start + n] = k.transpose(-1, -2), v
        keys, values = self.keys, self.values
        if n == 1 and visible is None:  # one row sees the whole cache: three products, not sdpa's general path
            scores = torch.softmax((q @ keys.transpose(-1, -2)) * layer.head_dim ** -0.5, dim=-1)
            return layer.finish(a, scores @ values)
        mask = visible  # tree rows: the cache before the tree and their ancestors (and themselves)
        if n > 1 and visible is None:  # row i sees the cache and rows <= i
            mask = torch.ones(n, start + n, dtype=torch.bool, device=a.device).tril(diagonal=start)
        attended = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask)
        return layer.finish(a, attended)

    @property
    def keys(self) -> torch.Tensor | None:
        """[heads, filled, head_dim]"""
        return None if self.cache is None else self.cache[0][:, :, :self.filled].transpose(1, 2)

    @property
    def values(self) -> torch.Tensor | None:
        return None if self.cache is None else self.cache[1][:, :self.filled]

    def _reserve(self, length: int, *, like: torch.Tensor) -> None:
        if self.cache is None or self.cache[1].shape[1] < length:
            layer = self.head.layer
            capacity = -(-max(2 * length, 256) // 16) * 16  # native attention reads whole blocks of 16
            grown = (like.new_zeros(layer.heads, layer.head_dim, capacity),
                     like.new_zeros(layer.heads, capacity, layer.head_dim))
            if self.cache is not None:
                grown[0][:, :, :self.filled] = self.cache[0][:, :, :self.filled]
                grown[1][:, :self.filled] = self.cache[1][:, :self.filled]
            self.cache = grown

    def _trim(self, length: int) -> None:
        self.filled = min(self.filled, length)


def build(target, *, token_ids, fuse_layers=None, heads: int | None = None, ffn: int | None = None,
          train_steps: int = 3) -> EagleHead:
    """A fresh head for `target`: by default it fuses layer 2's input, the middle layer's and the final
    normed state, with the target's head count and MLP width, and its output reads `token_ids`."""
    config = target.config
    layers = config.num_hidden_layers
    fuse_layers = fuse_layers or sorted({min(2, layers), layers // 2, layers})
    heads = heads or config.num_attention_heads
    ffn = ffn or config.intermediate_size
    head = EagleHead(target, token_ids=token_ids, fuse_layers=fuse_layers, heads=heads, ffn=ffn,
                     train_steps=train_steps)
    return head.to(target.get_input_embeddings().weight.device)


def load(folder, target, meta: dict) -> EagleHead:
    """The head saved in `folder` (`specui.heads.common.save`), rebuilt around the loaded `target`."""
    return common.load_head(EagleHead, folder, target, meta)
