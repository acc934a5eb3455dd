"""Would attention pay in an early exit? A Kangaroo-style adapter beside the shipped one, trained on the same data.

    python -m tools.exit_attention --answers DIR1,DIR2 [--arm attention|mlp] [--minutes 12] [--sequences 3000]

The chat preset's early-exit head reads one state: the target's state entering layer E at the position it drafts
from. Kangaroo (Liu et al. 2024) puts attention in its adapter: an RMS norm, grouped-query attention over the
early states of the whole context (the target's heads, head size and rotary base), and a projection added back to
the state. Here that attention goes in front of the shipped head (its own norm, block, MLP and output rows), its
projection starting at zero, so at step 0 it drafts exactly as the shipped head does. Each arm trains from the
shipped head on the target's greedy tokens (the labels of `python -m specui.train exit`): `attention` the
attention and the head together, `mlp` the head alone (the control, the same minutes on the same data). Then the
arm is scored beside the shipped head on the 16 held-out chat prompts: the target answers each greedily (96 tokens),
and the share of answer tokens each one's top token matches, teacher-forced (for a head at K = 1, its greedy α).

The states of whole conversations are kept in `--states` (float16; about 1.7 GB for 3,000 of the GPU rounds'
greedy answers), so a second arm reads them. Nothing here is shipped: drafting with such an adapter would need its
own cache of keys and values beside the target's, and pays only if its agreement covers its extra products
(docs/performance.md, stop 71).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from specui import SpeculativeEngine, chat_prompts
from specui import heads as saved
from specui.bench.prompts import tokenize_prompts
from specui.heads.eagle import HeadLayer
from specui.train.exit_head import exit_states
from specui.train.head_data import answer_sequences
from specui.train.heads import load_target, lr_at


class Attention(nn.Module):
    """x + o(attention(RMSNorm(x))): causal grouped-query attention over a sequence's early states [B, T, D], rotated
    as the EAGLE head's layer rotates (`HeadLayer.rope`, whose table it borrows)."""

    rope, _rotation, _angles = HeadLayer.rope, HeadLayer._rotation, HeadLayer._angles

    def __init__(self, config):
        super().__init__()
        width, heads = config.hidden_size, config.num_attention_heads
        self.heads, self.kv_heads, self.head_dim = heads, config.num_key_value_heads, width // heads
        self.eps = config.rms_norm_eps
        self.theta = (getattr(config, "rope_parameters", None) or {}).get("rope_theta", 10000.0)
        self.norm = nn.Parameter(torch.ones(width))
        self.q = nn.Linear(width, width, bias=False)
        self.kv = nn.Linear(width, 2 * self.kv_heads * self.head_dim, bias=False)
        self.o = nn.Linear(width, width, bias=False)
        nn.init.zeros_(self.o.weight)  # the identity at the start

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, D = x.shape
        y = F.rms_norm(x, (D,), self.norm, self.eps)
        q = self.rope(self.q(y).view(B, T, self.heads, self.head_dim).transpose(1, 2), range(T))
        k, v = self.kv(y).view(B, T, 2, self.kv_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, self.rope(k, range(T)), v, is_causal=True, enable_gqa=True)
        return x + self.o(a.transpose(1, 2).reshape(B, T, D))


def batch_of(data: dict, picked: list[int], where: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Early states [B, T, D] (zero after a sequence's end) and labels [B, T] (-100 outside its answer)."""
    width = max(len(data["states"][i]) for i in picked)
    x = torch.zeros(len(picked), width, data["states"][picked[0]].shape[-1])
    y = torch.full((len(picked), width), -100, dtype=torch.long)
    for j, i in enumerate(picked):
        states, labels = data["states"][i], data["labels"][i]
        x[j, :len(states)] = states.float()
        y[j, len(states) - len(labels):len(states)] = where[labels]
    return x, y


def held_out(target, tokenizer, prompts: int, tokens: int) -> list[tuple[torch.Tensor, int]]:
    """The held-out prompts with the target's greedy answers, as (conversation ids, first answer index)."""
    engine = SpeculativeEngine(target)
    return [(torch.tensor(prompt + engine.generate(prompt, max_new_tokens=tokens, speculative=False).token_ids),
             len(prompt)) for prompt in tokenize_prompts(chat_prompts.HELD_OUT[:prompts], tokenizer, chat=True)]


def agreement(shipped, attention, data: dict, where: torch.Tensor) -> float:
    """The share of answer tokens the head's top token matches, teacher-forced, over `exit_states`' whole
    conversations."""
    hits = total = 0
    with torch.no_grad():
        for states, answer in zip(data["states"], data["labels"]):
            x = states[None].float()
            top = shipped(attention(x) if attention is not None else x)[0, -len(answer):].argmax(-1)
            hits += int((top == where[answer]).sum())
            total += len(answer)
    return hits / total


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m tools.exit_attention", description=__doc__.split("\n")[0])
    ap.add_argument("--answers", required=True, help="folders of the target's greedy answers (DIR1,DIR2)")
    ap.add_argument("--head", default="assets/smollm2-heads/early_exit", help="the early-exit head to start from")
    ap.add_argument("--arm", choices=("attention", "mlp"), default="attention")
    ap.add_argument("--minutes", type=float, default=12.0)
    ap.add_argument("--sequences", type=int, default=3000, help="conversations trained on (a seeded pick)")
    ap.add_argument("--states", default="runs/exit-attention/states.pt")
    ap.add_argument("--batch", type=int, default=8, help="conversations a step")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--warmup", type=int, default=50, help="steps of linear warmup, then cosine decay to a tenth")
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--tokens", type=int, default=96)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    preset, target, tokenizer = load_target(argparse.Namespace(preset=None, config=None))
    shipped = saved.load(args.head, target).float()
    layer = shipped.exit_layer
    sequences, _ = answer_sequences(args.answers, max_len=320)
    order = torch.randperm(len(sequences), generator=torch.Generator().manual_seed(0)).tolist()
    sequences = [sequences[i] for i in order[:args.sequences]]
    Path(args.states).parent.mkdir(parents=True, exist_ok=True)
    data = exit_states(target, sequences, layer=layer, path=Path(args.states), whole=True)
    where = torch.full((shipped.output.vocab_size,), -100, dtype=torch.long)
    where[shipped.output.token_ids] = torch.arange(len(shipped.output.token_ids))
    answers = exit_states(target, held_out(target, tokenizer, args.prompts, args.tokens), layer=layer,
                          path=Path(args.states).with_name("held-out.pt"), whole=True)
    before = agreement(shipped, None, answers, where)

    head = saved.load(args.head, target).float()
    attention = Attention(target.config) if args.arm == "attention" else None
    params = [*head.parameters(), *(attention.parameters() if attention is not None else ())]
    for p in params:
        p.requires_grad_(True)
    opt = torch.optim.AdamW(params, lr=args.lr, weight_decay=0.0)
    gen, step, started = torch.Generator().manual_seed(1), 0, time.time()
    while (spent := time.time() - started) < args.minutes * 60:
        for group in opt.param_groups:
            group["lr"] = lr_at(args, step, spent / (args.minutes * 60))
        x, y = batch_of(data, torch.randint(0, len(sequences), (args.batch,), generator=gen).tolist(), where)
        loss = F.cross_entropy(head(attention(x) if attention is not None else x).flatten(0, 1), y.flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        step += 1
        if step % 200 == 0:
            print(f"step {step}: loss {float(loss.detach()):.3f} ({spent / 60:.1f} min)", flush=True)
    after = agreement(head, attention, answers, where)
    print(f"{preset.name}, exit at layer {layer}, {len(sequences):,} conversations, {args.arm} arm, {step} steps in "
          f"{args.minutes:g} min: held-out greedy agreement ({sum(map(len, answers['labels'])):,} answer tokens of "
          f"{len(answers['labels'])} prompts) shipped head {before:.4f}, this arm {after:.4f}")


if __name__ == "__main__":
    main()
