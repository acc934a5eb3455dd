"""The chat draft's GPU recipe, step 2: distil a draft from the target's saved answers, the target's
distributions recomputed on the fly (so answers need no stored soft labels: `--labels 0`); and the greedy-token
recipe (`--hard-labels`), which needs no target forward at all.

    python -m specui.train.chat --write-answers runs/main --prompt-set main --labels 0 --gen-batch 256  # step 1
    python -m specui.train.chat --answers runs/main,runs/main-s1 --out runs/chat-draft \\
        --init-draft assets/smollm2-draft --batch 32 --lr 3e-4 --max-minutes 4                       # step 2 (CUDA)

`python -m tools.gpu_round` runs both steps (several answer writers side by side on one GPU, EAGLE's
head beside the draft) inside a fixed time budget, for a borrowed GPU.

Each step draws --batch answers (weighted as `--answers FOLDER:WEIGHT` says), runs the frozen target
over them (float32; TF32 products) and the draft (bfloat16 autocast), and minimises the cross-entropy
from the target's next-token distribution, restricted to the draft's vocabulary, to the draft's, at
every answer position: the CPU recipe's loss with the whole distribution instead of its top 32. The
newest --val-answers greedy answers are kept apart (chat_cpu.split); every --eval-every steps the
draft's greedy agreement with the target on them is measured, the best weights kept and a checkpoint
written (--resume goes on from it). The learning rate follows --max-minutes (warmup, cosine decay).

`--hard-labels` learns greedy agreement, what greedy acceptance counts, from the greedy answers alone: a greedy
answer is the target's own argmax token after token, so the cross-entropy from the draft's logits to the answer's
next token (over the draft's ids; a token outside them is a miss the draft cannot mend, left out of the loss) asks
for the draft's argmax to be the target's, where the soft recipe spends the draft's few weights on the whole
distribution too. No target runs, so a CPU takes a step in seconds (the early-exit head's `specui.train exit` is
the same idea). Sampled answers are left out unless `python -m specui.train.greedy_labels` has written the target's
greedy token at each of their positions (one forward over them, once): then their text is the context and those
tokens the labels. The validation agreement is against the kept greedy answers' tokens.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from specui.train.chat_cpu import distil, draft_slots, start, summed_agreement
from specui.train.chat_data import greedy_answers, log, padded, padded_labels
from specui.train.common import device_name


def target_labels(target, ids: torch.Tensor, mask: torch.Tensor, sub: torch.Tensor):
    """At the masked positions: the target's log-probs over the draft's ids `sub` [M, N] and its argmax [M]."""
    with torch.no_grad():
        hidden = target.model(input_ids=ids).last_hidden_state[mask]  # [M, D]
        logits = target.lm_head(hidden).float()  # [M, V]
        return logits[:, sub] - logits.logsumexp(-1, keepdim=True), logits.argmax(-1)


def draft_logits(draft, ids: torch.Tensor, mask: torch.Tensor, *, autocast: bool) -> torch.Tensor:
    with torch.autocast(ids.device.type, dtype=torch.bfloat16, enabled=autocast):
        hidden = draft.model(input_ids=ids).last_hidden_state[mask]
        return draft.lm_head(hidden).float()  # [M, N]


def agreement(target, draft, records: list[dict], *, sub, pad: int, seq: int, device, autocast: bool,
              batch: int = 32) -> float:
    """Teacher-forced greedy agreement of the draft (its ids mapped to the target's) with the target's argmax."""
    hits = total = 0
    for first in range(0, len(records), batch):
        ids, mask = (t.to(device) for t in padded(records[first:first + batch], pad=pad, seq=seq))
        _, t_arg = target_labels(target, ids, mask, sub)
        d_arg = sub[draft_logits(draft, ids, mask, autocast=autocast).argmax(-1)]
        hits, total = hits + int((d_arg == t_arg).sum()), total + len(t_arg)
    return hits / max(1, total)


def answer_rows(records: list[dict], mask: torch.Tensor, slot: torch.Tensor, *, pad: int, seq: int | None = None
                ) -> torch.Tensor:
    """At `padded`'s masked positions, the draft row of the target's greedy next token [M] (-1 outside the draft's
    ids): a greedy answer's own next token, a labelled sampled answer's label (chat_data.next_tokens)."""
    return slot[padded_labels(records, pad=pad, seq=seq).to(mask.device)[mask]]


def train_hard_on_answers(args, target, tok, *, device: str) -> None:
    """The greedy-token recipe (see the module docstring): the greedy answers' next tokens as labels, and the
    labelled sampled answers' greedy tokens (`python -m specui.train.greedy_labels`)."""
    records, val, draft, facts = start(args, target, tok)
    greedy = greedy_answers(records, args.answers, labelled=True)
    labelled = sum(1 for r in greedy if r.get("sampled"))
    log(f"--hard-labels: {len(greedy) - labelled} greedy answers and {labelled} sampled ones with the target's greedy "
        f"tokens (greedy_labels) of {len(records)} (other sampled ones are draws, not the target's argmax)")
    draft = draft.to(device).float()
    slot = draft_slots(draft, target.get_input_embeddings().num_embeddings, device)
    autocast = device.startswith("cuda")
    pad, seq = tok.pad_token_id, args.seq

    def step_loss(batch: list[dict]):
        ids, mask = (t.to(device) for t in padded(batch, pad=pad, seq=seq))
        rows = answer_rows(batch, mask, slot, pad=pad, seq=seq)
        logits = draft_logits(draft, ids, mask, autocast=autocast)
        inside = rows >= 0
        loss = F.cross_entropy(logits[inside], rows[inside])
        return loss, int((logits.argmax(-1) == rows).sum()), len(rows)

    distil(args, target, tok, draft, records=greedy, val=val, device=device, step_loss=step_loss,
           score=lambda kept: summed_agreement(step_loss, kept, 32),
           facts={**facts, "labels": "the target's greedy tokens (its greedy answers" +
                  (", and at its sampled answers' positions: greedy_labels" if labelled else "") + "), hard labels",
                  "device": device_name(device)})


def train_gpu_on_answers(args, target, tok, *, device: str) -> None:
    """GPU recipe, step 2 (see the module docstring). Runs on a CPU too (slowly: tests, toy sizes)."""
    records, val, draft, facts = start(args, target, tok)
    draft = draft.to(device).float()
    sub = draft.token_ids.to(device)
    autocast = device.startswith("cuda")
    pad, seq = tok.pad_token_id, args.seq

    def step_loss(batch: list[dict]):
        ids, mask = (t.to(device) for t in padded(batch, pad=pad, seq=seq))
        t_logp, t_arg = target_labels(target, ids, mask, sub)
        logits = draft_logits(draft, ids, mask, autocast=autocast)
        loss = -(t_logp.exp() * F.log_softmax(logits, dim=-1)).sum(-1).mean()
        return loss, int((sub[logits.argmax(-1)] == t_arg).sum()), len(t_arg)

    distil(args, target, tok, draft, records=records, val=val, device=device, step_loss=step_loss,
           score=lambda kept: agreement(target, draft, kept, sub=sub, pad=pad, seq=seq, device=device,
                                        autocast=autocast),
           facts={**facts, "labels": "the target's whole distribution over the draft vocabulary", "device": device_name(device)})
