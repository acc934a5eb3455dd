"""How often EAGLE heads and chat drafts agree with the target, teacher-forced on held-out chat prompts.

    python -m tools.eagle_agreement [--head FOLDER ...] [--draft FOLDER ...] [--exit FOLDER ...] [--prompts 8]
                                    [--tokens 64]
                                    [--temperature 0.7 [--draft-scales 0.85,1,1.15]] [--engine]

The preset's target answers the first held-out prompts of `specui.chat_prompts` greedily; then each EAGLE
head runs its step 1 over every answer (the target's real states at t and the real token t+1, as drafting
reads them after a verify), each early-exit head reads the target's states entering its exit layer, and each chat
draft reads the answer as a prompt, and the tool counts how often their top token is the target's. For an EAGLE
head that is the acceptance of the first drafted token at K = 1; for an early-exit head its acceptance at K = 1;
for a draft, the held-out α of its model card. With `--temperature T` the target also answers by sampling at T
(seed: the prompt's index), and each is given the expected acceptance of its first drafted token at T,
Σ_x min(p_T(x), q_T(x)), averaged over the answer (`--draft-scales`: also with the drafts at multiples of T, which
verification allows: a draft may draw from any q it reports). Nothing is timed and nothing drawn twice, so two assets
compare on a busy machine without the noise of sampled runs. Without `--head` or `--draft`: the preset's
head. `--engine` adds the preset's EAGLE in the engine at K = 1, greedy: the same acceptance, measured.
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F

from specui import chat_draft, chat_prompts, heads, load_engine
from specui.bench.prompts import tokenize_prompts
from specui.settings import DecodeSettings


def head_rows(head, target_out, seq: torch.Tensor) -> torch.Tensor:
    """A head's step-1 logits [T, draft vocabulary]: row t guesses token t+2 from the state at t and token t+1."""
    fused = head.fuse(torch.cat([target_out.hidden_states[i][0] for i in head.fuse_layers], dim=-1))
    T = seq.shape[1] - 1
    a = head.inputs(fused[:T], seq[0, 1:])
    q, k, v = head.layer.project(a, torch.arange(T))
    return head.logits(head.layer.finish(a, F.scaled_dot_product_attention(q, k, v, is_causal=True)))


def scores(rows: torch.Tensor, token_ids: torch.Tensor, wanted: torch.Tensor, temperature: float,
           scale: float = 1.0) -> float:
    """Summed over rows: agreement of the top token with the target's (temperature 0), else Σ min(p_T, q_sT), the
    draft at `scale` times the target's temperature (any q it draws from keeps verification exact)."""
    if temperature == 0:
        return float((token_ids[rows.argmax(-1)] == wanted.argmax(-1)).sum())
    p = torch.softmax(wanted.float() / temperature, dim=-1)
    q = torch.zeros_like(p)
    q[:, token_ids] = torch.softmax(rows.float() / (scale * temperature), dim=-1)
    return float(torch.minimum(p, q).sum())


def agreements(target, assets: dict, prompt: list[int], answer: list[int], temperature: float,
               scales: tuple[float, ...] = (1.0,)) -> dict:
    """{name: ([score at each of `scales`], positions)} over one answer, for heads (step 1) and drafts alike."""
    seq = torch.tensor([prompt + answer])
    out = target(input_ids=seq, output_hidden_states=True)
    logits, first = out.logits[0], len(prompt) - 1  # row first + j: the target's choice of answer token j
    result = {}
    for name, (kind, model) in assets.items():
        if kind == "head":  # row t of the head guesses t+2: answer tokens 1.. (token 0 is the target's own)
            rows, wanted = head_rows(model, out, seq)[first:-1], logits[first + 1:-1]
        elif kind == "exit":  # row t guesses t+1 from the state entering the exit layer at t
            rows, wanted = model(out.hidden_states[model.exit_layer][0])[first:-1], logits[first:-1]
        else:
            rows, wanted = model(input_ids=seq).logits[0][first:-1], logits[first:-1]
        ids = model.token_ids if kind == "draft" else model.output.token_ids
        result[name] = ([scores(rows, ids, wanted, temperature, s) for s in scales], rows.shape[0])
    return result


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m tools.eagle_agreement", description=__doc__.split("\n")[0])
    ap.add_argument("--preset", default=None)
    ap.add_argument("--head", action="append", default=None, help="an EAGLE head folder (repeatable)")
    ap.add_argument("--draft", action="append", default=None, help="a chat draft folder (repeatable)")
    ap.add_argument("--exit", action="append", default=None, help="an early-exit head folder (repeatable)")
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--temperature", type=float, default=0.0, help="also score sampled answers at this temperature")
    ap.add_argument("--engine", action="store_true", help="the preset's EAGLE in the engine at K=1 beside it")
    ap.add_argument("--draft-scales", default="1",
                    help="with --temperature: also score each drafting at these multiples of it (e.g. 0.85,1,1.15)")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    engine = load_engine(args.preset)
    target = engine.target_model
    folders = args.head or ([] if args.draft or args.exit else [engine.preset.head_folders["eagle"]])
    assets = {f: ("head", heads.load(f, target).eval()) for f in folders}
    assets |= {f: ("draft", chat_draft.load(f, target).eval()) for f in args.draft or []}
    assets |= {f: ("exit", heads.load(f, target).eval()) for f in args.exit or []}
    temperatures = [0.0] + ([args.temperature] if args.temperature > 0 else [])
    scales = (1.0, *(x for x in map(float, args.draft_scales.split(",")) if x != 1.0))  # the draft's own T first
    totals = {(name, t): [[0.0] * len(scales), 0] for name in assets for t in temperatures}
    accepted = drafted = 0
    prompts = tokenize_prompts(chat_prompts.HELD_OUT[: args.prompts], engine.tokenizer, chat=True)
    for i, prompt in enumerate(prompts):
        for t in temperatures:
            settings = DecodeSettings(max_new_tokens=args.tokens, ignore_eos=True, seed=i, temperature=t)
            answer = engine.generate(prompt, settings.but(speculative=False)).token_ids
            with torch.no_grad():
                for name, (score, n) in agreements(target, assets, prompt, answer, t, scales if t else (1.0,)).items():
                    totals[name, t][0] = [a + b for a, b in zip(totals[name, t][0], score)]
                    totals[name, t][1] += n
            if args.engine and t == 0:
                run = engine.generate(prompt, settings.but(num_draft_tokens=1, drafter="eagle"))
                accepted += sum(r.num_accepted for r in run.rounds if r.num_draft_tokens)
                drafted += sum(1 for r in run.rounds if r.num_draft_tokens)
    for name, (kind, _) in assets.items():
        what = {"head": "step-1 agreement", "exit": "agreement (K = 1)"}.get(kind, "held-out α")
        score, n = totals[name, 0.0]
        line = f"{kind} {name}: {what} {score[0] / n:.3f} over {n} positions"
        if args.temperature > 0:
            score, n = totals[name, args.temperature]
            line += (f"; at temperature {args.temperature:g}, expected acceptance {score[0] / n:.3f} over {n} sampled "
                     "positions")
            if len(scales) > 1:
                line += "; drafting at " + ", ".join(f"{s:g}x: {v / n:.3f}" for s, v in sorted(zip(scales, score)))
        print(line)
    if args.engine:
        print(f"the preset's EAGLE in the engine at K=1: acceptance {accepted / max(drafted, 1):.3f} over {drafted} rounds")


if __name__ == "__main__":
    main()
