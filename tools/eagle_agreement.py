"""How often an EAGLE head's first draft step agrees with the target, on held-out chat prompts.

`python -m tools.eagle_agreement [--head FOLDER] [--prompts 8] [--tokens 64]` decodes the first held-out
prompts of `specui.chat_prompts` greedily with the preset's target, then runs the head's step 1
teacher-forced over each answer (the target's real states at t and the real token t+1, as drafting
reads them after a verify) and counts how often its top token for t+2 is the target's. That is the
acceptance of the first drafted token at K = 1, measured without timing anything, so two heads can be
compared on a busy machine; the engine's own K = 1 acceptance with the preset's head is printed beside it.
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F

from specui import chat_prompts, heads, load_engine
from specui.bench.cli import tokenize_prompts
from specui.settings import DecodeSettings


def step_one_agreement(head, target, prompt: list[int], answer: list[int]) -> tuple[int, int]:
    """(agreements, positions) of the head's step-1 guesses for every answer token after the first."""
    seq = torch.tensor([prompt + answer])
    with torch.no_grad():
        out = target(input_ids=seq, output_hidden_states=True)
        fused = head.fuse(torch.cat([out.hidden_states[i][0] for i in head.fuse_layers], dim=-1))
        T = seq.shape[1] - 1
        a = head.inputs(fused[:T], seq[0, 1:])  # state at t and token t+1 -> a guess for t+2
        q, k, v = head.layer.project(a, torch.arange(T))
        h = head.layer.finish(a, F.scaled_dot_product_attention(q, k, v, is_causal=True))
        guess = head.output.token_ids[head.logits(h).argmax(-1)]
        wanted = out.logits[0].argmax(-1)[1:]  # the target's choice for t+2, at row t+1
    span = slice(len(prompt) - 1, T - 1)  # guesses of answer tokens 2.. (token 1 is the target's own)
    return int((guess[span] == wanted[span]).sum()), len(range(*span.indices(T - 1)))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m tools.eagle_agreement", description=__doc__.split("\n")[0])
    ap.add_argument("--preset", default=None)
    ap.add_argument("--head", default=None, help="an EAGLE head folder (default: the preset's)")
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=64)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    engine = load_engine(args.preset)
    target = engine.target_model
    head = heads.load(args.head or engine.preset.head_folders["eagle"], target)
    hits = total = accepted = drafted = 0
    for prompt in tokenize_prompts(chat_prompts.HELD_OUT[: args.prompts], engine.tokenizer, chat=True):
        settings = DecodeSettings(max_new_tokens=args.tokens, ignore_eos=True, seed=0)
        answer = engine.generate(prompt, settings.but(speculative=False)).token_ids
        h, n = step_one_agreement(head, target, prompt, answer)
        hits, total = hits + h, total + n
        run = engine.generate(prompt, settings.but(num_draft_tokens=1, drafter="eagle"))
        accepted += sum(r.num_accepted for r in run.rounds if r.num_draft_tokens)
        drafted += sum(1 for r in run.rounds if r.num_draft_tokens)
    print(f"step-1 agreement of {args.head or 'the preset head'}: {hits / total:.3f} over {total} positions; "
          f"the preset's EAGLE in the engine at K=1: acceptance {accepted / max(drafted, 1):.3f} over {drafted} rounds")


if __name__ == "__main__":
    main()
