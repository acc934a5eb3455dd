"""Early exit (self-speculation): the target's first E layers and a small adapter draft for the target.

As in LayerSkip (Elhoushi et al. 2024) and Draft & Verify (Zhang et al. 2024), the draft is the target
itself, cut short: a token runs through layers 0..E-1, and the state entering layer E (transformers'
`hidden_states[E]`) goes through an adapter to the target's own output layer. The adapter is an RMS
norm with its own weight, one `ResBlock`, then the target's final norm and output rows (borrowed
through `VocabOutput`, frozen). Its weight starts at one and the block as the identity, so an untrained
head is the "logit lens" at layer E: the target's final norm and output applied to the early state
(norms are scale-free, so the extra norm changes nothing at the start; it gives the block inputs of a
steady size to learn on). A head may add a gated MLP after the block (`mlp_hidden` > 0: its own norm, SiLU(gate)
x up, down; down starts at zero, so a new MLP starts as the identity too): more to learn from one early state, for
a few more multiply-adds a draft (`python -m specui.train exit` trains it).

The draft runs on the target's own KV cache (`CachedLM.extend_early`, the lean CPU stack): `propose`
feeds cur and then each draft token but the last through the first E layers, whose keys and values
land in the target's cache; the verify forward starts those tokens at layer E, so no layer runs twice.
The last draft token is not fed: the verify forward runs its first layers with the rest of the block.
Where the target's layers run natively (a float32 CPU target), a round is one native call
(`specui.native_adapters.ExitChain`): the same layers, cache and bits, the head's products on the same panels.

`EarlyExitLookupDrafter` (the drafter `early_exit_lookup`) copies where the context repeats and drafts with
the head elsewhere (`specui.drafters.copies`); a copied round feeds nothing through the first layers.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from specui.drafters.base import Confidence, Draft
from specui.drafters.copies import MIN_NGRAM, CopiesFirst
from specui.drafters.registry import EARLY_EXIT, EARLY_EXIT_LOOKUP, LABELS
from specui.heads.common import GatedMLP, ResBlock, VocabOutput, all_ids, check_target, draw, load_head, native_draft
from specui.heads.common import soft_loss, targets
from specui.heads.common import target_shape as shape_of  # the argument `target_shape` takes the plain name
from specui.native import kernel as native_kernel
from specui.native_chain import picks, uniforms
from specui.native_adapters import ExitChain
from specui.sampling import Generators, Sampling

LOOKUP_TOKENS = 3  # a copy's length with early exit (K 1): 3 ran faster than 6 side by side (docs/drafters.md)


class EarlyExitHead(nn.Module):
    """An exit after the target's layer E - 1: own RMS norm, one residual block, the target's output."""

    kind = EARLY_EXIT

    def __init__(self, target, *, token_ids: torch.Tensor, exit_layer: int, target_shape: dict | None = None,
                 mlp_hidden: int = 0):
        super().__init__()
        check_target({"target_shape": target_shape}, target, "early-exit head")
        shape = shape_of(target)
        if not 1 <= exit_layer < shape["num_layers"]:
            raise ValueError(f"exit_layer must be in [1, {shape['num_layers'] - 1}] for a target of "
                             f"{shape['num_layers']} layers (the draft runs layers 0..exit_layer-1), got {exit_layer}")
        if mlp_hidden < 0:
            raise ValueError(f"mlp_hidden must be 0 (no MLP) or a positive width, got {mlp_hidden}")
        width = shape["hidden_size"]
        self.arguments = {"exit_layer": exit_layer, "target_shape": shape, **({"mlp_hidden": mlp_hidden} if mlp_hidden else {})}
        self.exit_layer = exit_layer
        self.feature_layers = (exit_layer,)  # transformers' hidden_states[E]: the input of layer E
        self.eps = float(getattr(target.config, "rms_norm_eps", 1e-6))
        self.norm_weight = nn.Parameter(torch.ones(width))
        self.block = ResBlock(width)
        self.mlp = GatedMLP(width, mlp_hidden, self.eps) if mlp_hidden else None
        self.output = VocabOutput(target, token_ids)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        """States entering layer E [..., D] -> logits [..., N] over the head's token ids."""
        x = hidden.to(self.norm_weight.device, self.norm_weight.dtype)
        x = F.rms_norm(x, x.shape[-1:], self.norm_weight, self.eps)
        x = self.block(x)
        if self.mlp is not None:
            x = self.mlp(x)
        return self.output(x)  # the target's final norm, then its output rows

    def training_loss(self, batch: dict) -> torch.Tensor:
        """At each valid position t, the head learns the target's distribution at t (for token t + 1)."""
        mask = batch["mask"]  # [B, T]
        logits = self(batch["hidden"][self.exit_layer])  # [B, T, N]
        if not mask.any():
            raise ValueError("the batch has no valid position")
        return soft_loss(logits[mask], targets(batch)[mask].to(logits.device))

    def make_drafter(self, target_model, *, copies: bool = False) -> EarlyExitDrafter:
        """The drafter; copies: copy where the context repeats, draft with the head elsewhere."""
        check_target(self.arguments, target_model, "early-exit head")
        return (EarlyExitLookupDrafter if copies else EarlyExitDrafter)(self)


class EarlyExitDrafter:
    """Drafts k tokens one by one through the target's first E layers, on the target's own cache."""

    name = LABELS[EARLY_EXIT]
    trusted_q = True  # its q is a softmax it drew from: the engine skips its per-round check of q
    stop_below = 0.0  # a round stops drafting once the head's confidence falls below this (`Confidence`)
    shares_target = True  # the engine passes its target `CachedLM` to `start`

    def __init__(self, head: EarlyExitHead):
        self.head = head
        self.device = head.norm_weight.device

    def start(self, prompt: list[int], *, sampling: Sampling, seed: int, target) -> None:
        if getattr(target, "stack", None) is None:
            raise ValueError("the early-exit drafter runs the target's first layers on the target's own cache "
                             "through specui's lean forward, which this target does not take (it needs a Llama, "
                             "Mistral or Qwen2 decoder with full sdpa attention, on a CPU or a CUDA GPU); use another drafter")
        self.target = target
        self.sampling = sampling
        self.generators = Generators(seed ^ 0xE417E417, home=self.device)  # its own stream, never the target's
        # a round in one native call (greedy or sampled) where the target's layers run natively
        self.chain = ExitChain(self.head, target, native_kernel()) if picks(sampling) and \
            ExitChain.serves(self.head, target) else None

    def propose(self, context: list[int], k: int) -> Draft:
        if k <= 0:
            return Draft.empty(self.device)
        draws = uniforms(self.sampling, k, self.generators.on(self.device))  # a sampled round's k draws
        if self.chain is not None and torch.is_inference_mode_enabled():
            index, probs, states = self.chain.run(self.target, context[-1], k, self.stop_below, self.sampling, draws)
            draft = native_draft(index, probs, self.head.output)
            self.target.ran_early(self.head.exit_layer, [context[-1], *draft.tokens[:-1].tolist()], states)
            return draft
        feed = context[-1:]  # cur: the target's cache holds every context token before it
        tokens, probs, confident = [], [], Confidence(self.stop_below)
        for i in range(k):
            hidden = self.target.extend_early(feed, stop=self.head.exit_layer)[-1]  # [D] entering layer E
            logits = self.head(hidden)
            token, q = draw(logits, self.head.output, self.sampling, None, None if draws is None else draws[i])
            tokens.append(token)
            probs.append(q)
            if not confident.goes_on(logits):
                break
            feed = [int(token)]  # the last draft is never fed: the verify forward runs its first layers
        return Draft(torch.stack(tokens), torch.stack(probs))

    def observe(self, num_accepted: int) -> None:
        pass  # the engine's trim of the target's cache forgets the rejected tokens' early layers too


class EarlyExitLookupDrafter(CopiesFirst, EarlyExitDrafter):
    """Copies where the context repeats (`specui.drafters.copies`), the head's K tokens elsewhere. A copied
    round feeds nothing through the first layers: the verify forward runs the copy through every layer, and
    the next drafted round starts from the target's cache as the verify left it."""

    name = LABELS[EARLY_EXIT_LOOKUP]

    def __init__(self, head: EarlyExitHead, *, lookup_tokens: int = LOOKUP_TOKENS, min_ngram: int = MIN_NGRAM):
        super().__init__(head)
        self.copies(lookup_tokens, min_ngram)

    def start(self, prompt: list[int], *, sampling: Sampling, seed: int, target) -> None:
        super().start(prompt, sampling=sampling, seed=seed, target=target)
        self.start_copies(prompt, sampling, seed)


def build(target, *, token_ids: torch.Tensor | None = None, **arguments) -> EarlyExitHead:
    """A fresh (untrained) head for `target` (arguments: exit_layer); token_ids None: the whole vocabulary."""
    return EarlyExitHead(target, token_ids=all_ids(target) if token_ids is None else token_ids, **arguments)


def load(folder, target, meta: dict) -> EarlyExitHead:
    """The head saved in `folder` (`specui.heads.common.save`), rebuilt around the loaded `target`."""
    return load_head(EarlyExitHead, folder, target, meta)
