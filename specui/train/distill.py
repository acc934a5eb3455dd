"""Distil the draft from the target, so the draft agrees with the target as often as possible.

Loss per position: KL(target || draft) over the full vocabulary (Hinton et al. 2015, temperature 1),
plus a small weight of plain cross-entropy on the data. The target runs without gradients on the
same sequences. Half of each batch is random windows of training code, half is the target's own
greedy continuations of training prompts: speculation feeds the draft exactly such text, and
greedy acceptance counts agreement on it. The draft starts from the target's token embeddings
(and tied output head) and final norm, so its layers only have to learn the map between them.
"""

import torch
import torch.nn.functional as F
from tqdm import tqdm

from specui.train.common import autocast, greedy_continuation, lr_at, make_optimizer, random_windows, window_shape


def copy_shared_weights(draft, target) -> None:
    """Initialise the draft's embeddings (tied to its lm_head) and final norm from the target's."""
    with torch.no_grad():
        draft.get_input_embeddings().weight.copy_(target.get_input_embeddings().weight)
        draft.model.norm.weight.copy_(target.model.norm.weight)


def distill_loss(draft_logits, target_logits, labels, *, ce_weight: float) -> torch.Tensor:
    """KL(target || draft) per position, averaged, plus `ce_weight` x cross-entropy to `labels`.

    draft_logits, target_logits: (N, V); labels: (N,).
    """
    draft_logp = F.log_softmax(draft_logits, dim=-1)
    target_logp = F.log_softmax(target_logits, dim=-1)
    kl = F.kl_div(draft_logp, target_logp, log_target=True, reduction="batchmean")
    if ce_weight == 0:
        return kl
    return kl + ce_weight * F.nll_loss(draft_logp, labels)


def target_continuations(target, stream: torch.Tensor, *, count: int, prompt_len: int, total_len: int,
                         generator) -> torch.Tensor:
    """`count` sequences of `total_len` tokens: a training prompt, then the target's greedy tokens."""
    starts = torch.randint(0, len(stream) - prompt_len, (count,), generator=generator).tolist()
    sequences = []
    for s in starts:
        prompt = stream[s : s + prompt_len].tolist()
        sequences.append(prompt + greedy_continuation(target, prompt, new_tokens=total_len - prompt_len))
    return torch.tensor(sequences, dtype=torch.long)  # (count, total_len)


def distill_draft(draft, target, stream: torch.Tensor, *, cfg, device: str):
    """Train `draft` to match `target`'s next-token distributions on real and target-written code."""
    same_width = draft.config.hidden_size == target.config.hidden_size
    if same_width:
        copy_shared_weights(draft, target)
    draft.to(device).train()
    target.to(device).eval()
    optimizer = make_optimizer(draft, lr=cfg.draft_lr, weight_decay=cfg.weight_decay)
    generator = torch.Generator().manual_seed(cfg.seed + 1)  # other windows than the target saw first
    written = target_continuations(target, stream, count=cfg.distill_sequences, prompt_len=cfg.seq_len // 4,
                                   total_len=cfg.seq_len + 1, generator=generator)
    bar = tqdm(range(cfg.draft_steps), desc="draft", dynamic_ncols=True)
    for step in bar:
        for group in optimizer.param_groups:
            group["lr"] = lr_at(step, steps=cfg.draft_steps, lr=cfg.draft_lr, warmup=cfg.warmup_steps)
        batch_size, seq_len = window_shape(step, steps=cfg.draft_steps, cfg=cfg)
        real = random_windows(stream, batch_size=batch_size - batch_size // 2, seq_len=seq_len, generator=generator)
        picks = torch.randint(0, len(written), (batch_size // 2,), generator=generator)
        offset = int(torch.randint(0, written.shape[1] - seq_len, (1,), generator=generator))
        batch = torch.cat([real, written[picks, offset : offset + seq_len + 1]]).to(device)  # (B, T+1)
        inputs, labels = batch[:, :-1], batch[:, 1:].flatten()
        with torch.no_grad(), autocast(device, cfg.bf16):
            target_logits = target(input_ids=inputs).logits.float().flatten(0, 1)  # (B*T, V)
        with autocast(device, cfg.bf16):
            draft_logits = draft(input_ids=inputs).logits.float().flatten(0, 1)  # (B*T, V)
        loss = distill_loss(draft_logits, target_logits, labels, ce_weight=cfg.distill_ce_weight)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(draft.parameters(), cfg.grad_clip)
        optimizer.step()
        with torch.no_grad():
            agree = (draft_logits.argmax(-1) == target_logits.argmax(-1)).float().mean().item()
        bar.set_postfix(loss=f"{loss.item():.3f}", agree=f"{agree:.3f}")
    return draft.eval()
