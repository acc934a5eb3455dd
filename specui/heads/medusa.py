"""Medusa heads: one small residual block per position ahead, all reading the target's last state.

Medusa (Cai et al. 2024, "Medusa: Simple LLM Inference Acceleration Framework with Multiple Decoding
Heads") puts K heads on the target's final normed hidden state h_t. Head i (1..K) predicts token
t + i + 1: head 1 the token after the target's own next token, head 2 the one after that, and so on.
Each head here is `num_blocks` `ResBlock`s followed by the target's own output rows (borrowed through
`VocabOutput`, frozen), as in Medusa-1.

The final norm is not applied again after the blocks (`normed=True`): h_t is already the target's
normed state, and the blocks start as the identity, so at initialisation every head reproduces the
target's own next-token distribution (Medusa's initialisation, where each head's output layer is a
copy of the target's); training then teaches each block its shift. Re-applying the norm would start
every head from a distorted distribution (the norm's weight applied twice).

Drafting: at a round's start the target has states for c_0..c_{m-2}; the newest, h_{m-2}, already
predicted cur = c_{m-1}. Head i on h_{m-2} proposes x_i (the token at position m - 1 + i). The heads'
proposals do not depend on each other, so each q_i is a proper proposal distribution and verification
(min(1, p/q) with the q each token was sampled from) stays exact; there is no "typical acceptance".
On a CPU in float32 a round is one native call (`specui.native_adapters.MedusaChain`): the first K heads only.
"""

from __future__ import annotations

import torch
from torch import nn

from specui.drafters.base import Confidence, Draft
from specui.drafters.tree import DraftTree, ancestry, grow
from specui.drafters.registry import LABELS, MEDUSA
from specui.heads.common import (ResBlock, VocabOutput, all_ids, check_target, draw, load_head, native_draft, soft_loss,
                                 targets)
from specui.heads.common import target_shape as shape_of  # the argument `target_shape` takes the plain name
from specui.native import kernel as native_kernel
from specui.native_adapters import MedusaChain
from specui.native_chain import picks, uniforms
from specui.sampling import Generators, Sampling, logits_to_probs


class MedusaHeads(nn.Module):
    """`num_heads` heads of `num_blocks` residual blocks each, on the target's final normed state."""

    kind = MEDUSA

    def __init__(self, target, *, token_ids: torch.Tensor, num_heads: int = 4, num_blocks: int = 1,
                 target_shape: dict | None = None):
        super().__init__()
        if num_heads < 1 or num_blocks < 1:
            raise ValueError(f"a Medusa head needs num_heads >= 1 and num_blocks >= 1 (got {num_heads}, {num_blocks})")
        check_target({"target_shape": target_shape}, target, "medusa head")
        shape = shape_of(target)
        width = shape["hidden_size"]
        self.arguments = {"num_heads": num_heads, "num_blocks": num_blocks, "target_shape": shape}
        self.feature_layers = (shape["num_layers"],)  # transformers' hidden_states[-1]: the final normed state
        self.blocks = nn.ModuleList(nn.Sequential(*(ResBlock(width) for _ in range(num_blocks)))
                                    for _ in range(num_heads))
        self.output = VocabOutput(target, token_ids)

    @property
    def num_heads(self) -> int:
        return len(self.blocks)

    def forward(self, hidden: torch.Tensor, count: int | None = None) -> torch.Tensor:
        """Final normed states [..., D] -> logits [..., count, N] over the head's token ids, from the first
        `count` heads (default: all; a draft of k tokens needs only the first k)."""
        x = hidden.to(self.output.token_ids.device, self._dtype())
        heads = range(len(self.blocks))[:count]  # by index: blocks[:count] would build a new ModuleList every draft
        return torch.stack([self.output(self.blocks[i](x), normed=True) for i in heads], dim=-2)

    def training_loss(self, batch: dict) -> torch.Tensor:
        """Head i at position t learns the target's distribution at position t + i (for token t + i + 1),
        over the positions where both t and t + i are valid; the heads' losses are averaged."""
        hidden = batch["hidden"][self.feature_layers[0]]  # [B, T, D]
        target_logp, mask = targets(batch), batch["mask"]  # [B, T, N] (or hard labels [B, T]), [B, T]
        logits = self(hidden)  # [B, T, num_heads, N]
        length = hidden.shape[1]
        losses = []
        for i in range(1, self.num_heads + 1):
            if i >= length:
                break
            valid = mask[:, : length - i] & mask[:, i:]  # [B, T - i]
            if valid.any():
                head_logits = logits[:, : length - i, i - 1][valid]  # [M, N]
                losses.append(soft_loss(head_logits, target_logp[:, i:][valid].to(head_logits.device)))
        if not losses:
            raise ValueError("the batch has no position with a valid target for any Medusa head")
        return torch.stack(losses).mean()

    def make_drafter(self, target_model) -> MedusaDrafter:
        check_target(self.arguments, target_model, "medusa head")
        return MedusaDrafter(self)

    def _dtype(self) -> torch.dtype:
        return self.blocks[0][0].linear.weight.dtype


class MedusaDrafter:
    """Drafts up to min(k, num_heads) tokens at once from the target's newest state (see the module
    docstring). It keeps only that state, which the engine hands over after every verify forward."""

    name = LABELS[MEDUSA]
    trusted_q = True  # its q is a softmax it drew from: the engine skips its per-round check of q
    stop_below = 0.0  # a round stops drafting once the head's confidence falls below this (`Confidence`)

    def __init__(self, heads: MedusaHeads):
        self.heads = heads
        self.target_features = heads.feature_layers
        self.device = heads.output.token_ids.device

    def start(self, prompt: list[int], *, sampling: Sampling, seed: int, features: torch.Tensor | None = None) -> None:
        self.sampling = sampling
        self.generators = Generators(seed ^ 0x3ED05A, home=self.device)  # its own stream, never the target's
        # a round in one native call (greedy or sampled) on a CPU in float32 (`specui.native_adapters`)
        self.chain = MedusaChain(self.heads, native_kernel()) if picks(sampling) and MedusaChain.serves(self.heads) \
            else None
        # the state of c_{m-2} (None for a one-token prompt: round 1 then drafts nothing)
        self.state = None if features is None or features.shape[0] == 0 else features[-1]

    def propose(self, context: list[int], k: int) -> Draft:
        count = min(k, self.heads.num_heads)
        if count <= 0 or self.state is None:
            return Draft.empty(self.device)
        draws = uniforms(self.sampling, count, self.generators.on(self.device))  # a sampled round's draws
        if self.chain is not None and torch.is_inference_mode_enabled():
            return native_draft(*self.chain.run(self.state, count, self.stop_below, self.sampling, draws),
                                 self.heads.output)
        logits = self.heads(self.state, count)  # [count, N]: head i's logits in row i - 1
        tokens, probs, confident = [], [], Confidence(self.stop_below)
        for i, row in enumerate(logits):  # the heads ran at once: a confidence stop saves verify rows only
            token, q = draw(row, self.heads.output, self.sampling, None, None if draws is None else draws[i])
            tokens.append(token)
            probs.append(q)
            if not confident.goes_on(row):
                break
        return Draft(torch.stack(tokens), torch.stack(probs))

    def propose_tree(self, context: list[int], k: int, *, width: int, nodes: int) -> DraftTree:
        """A tree to depth <= min(k, heads) (`specui.drafters.tree`): the children of a node at depth d are
        head d+1's top `width` tokens (the heads do not read the tokens before them)."""
        count = min(k, self.heads.num_heads)
        if count <= 0 or self.state is None:
            return DraftTree(torch.empty(0, dtype=torch.long, device=self.device), [], None)
        output = self.heads.output
        qs = logits_to_probs(self.heads(self.state, count), self.sampling)  # head i's q in row i - 1

        def expand(frontier, tokens, parents):  # over the heads' vocabulary: grow maps the ids
            return torch.stack([qs[0 if i < 0 else len(ancestry(i, parents)) + 1] for i in frontier])

        return grow(expand, depth=count, width=width, nodes=nodes, floor=self.stop_below, token_ids=output.token_ids,
                    vocab_size=output.vocab_size)[0]

    def observe_tree(self, path: list[int], *, features: torch.Tensor) -> None:
        self.observe(len(path), features=features)

    def observe(self, num_accepted: int, *, features: torch.Tensor) -> None:
        # rows: cur and the accepted drafts; the last is the state before next round's cur
        self.state = features[num_accepted]


def build(target, *, token_ids: torch.Tensor | None = None, **arguments) -> MedusaHeads:
    """Fresh (untrained) heads for `target`; token_ids None: the whole vocabulary."""
    return MedusaHeads(target, token_ids=all_ids(target) if token_ids is None else token_ids, **arguments)


def load(folder, target, meta: dict) -> MedusaHeads:
    """The heads saved in `folder` (`specui.heads.common.save`), rebuilt around the loaded `target`."""
    return load_head(MedusaHeads, folder, target, meta)
