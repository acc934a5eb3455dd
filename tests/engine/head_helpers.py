"""What the Medusa and early-exit head tests share: targets and heads that make every round's outcome
happen, a toy training batch, and a drafter that lies about its q (a broken variant the exactness
test must catch)."""

from __future__ import annotations

import copy

import torch

from specui.drafters.base import Draft
from tests.helpers import make_model

PATHS = ("all rejected", "partly accepted", "all accepted")


def sticky_target(*, seed: int, beta: float = 0.08, **kw):
    """A tiny Llama that often repeats its current token but not always: its output rows are its
    embeddings and its layers are scaled down. An untrained Medusa head proposes the target's last
    prediction again, so it is right on repeats: rounds see all three outcomes."""
    target = make_model("llama", seed=seed, **kw)
    with torch.no_grad():
        target.lm_head.weight.copy_(target.model.embed_tokens.weight * 3)
        for layer in target.model.layers:
            layer.self_attn.o_proj.weight.mul_(beta)
            layer.mlp.down_proj.weight.mul_(beta)
    return target


def halved(head):
    """The head with its weights rounded to half precision, as a saved head holds them."""
    with torch.no_grad():
        for p in head.parameters():
            p.copy_(p.half().float())
    return head


def perturb(head: torch.nn.Module, *, scale: float, seed: int):
    """Random noise on every trained parameter of a head, so drafts are sometimes right, sometimes wrong."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in head.parameters():
            p.add_(torch.randn(p.shape, generator=gen) * scale)
    return head.eval()


def toy_batch(target, ids: torch.Tensor, *, token_ids: torch.Tensor | None = None, mask=None) -> dict:
    """A training batch as the trainer builds it, from a transformers forward of a copy of the target
    (a forward with output_hidden_states installs transformers' capture hooks on the model it runs,
    after which the lean stack refuses that model: the copy keeps the real target lean)."""
    twin = copy.deepcopy(target)
    with torch.no_grad():
        out = twin(ids, output_hidden_states=True)
    logp = out.logits.float().log_softmax(-1)
    if token_ids is not None:
        logp = logp[..., token_ids]
    return {"ids": ids, "hidden": dict(enumerate(out.hidden_states)), "target_logp": logp,
            "mask": torch.ones_like(ids, dtype=torch.bool) if mask is None else mask}


def hidden_states(target, ids: list[int]) -> tuple[torch.Tensor, ...]:
    """transformers' hidden_states [T, D] of one sequence, from a copy of the target (see toy_batch)."""
    with torch.no_grad():
        return tuple(h[0] for h in copy.deepcopy(target)(torch.tensor([ids]), output_hidden_states=True).hidden_states)


def path_of(round_) -> str | None:
    if not round_.num_drafted:
        return None
    if round_.num_accepted == 0:
        return PATHS[0]
    return PATHS[2] if round_.num_accepted == round_.num_drafted else PATHS[1]


class LyingDrafter:
    """Samples from a head's q but reports a flatter one: verification then accepts with the wrong ratio."""

    name = "lying"

    def __init__(self, inner):
        self.inner = inner
        for attribute in ("target_features", "shares_target"):
            if hasattr(inner, attribute):
                setattr(self, attribute, getattr(inner, attribute))

    def start(self, prompt, **kw):
        self.inner.start(prompt, **kw)

    def propose(self, context, k):
        draft = self.inner.propose(context, k)
        if draft.probs is None:
            return draft
        flat = (draft.probs > 0).float()
        return Draft(draft.tokens, 0.5 * draft.probs + 0.5 * flat / flat.sum(-1, keepdim=True))

    def observe(self, num_accepted, **kw):
        self.inner.observe(num_accepted, **kw)
