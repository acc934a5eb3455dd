"""The chat draft's CPU recipe, step 2: distil a draft from the target's saved answers; and the
training loop it shares with the GPU recipe (`start`, `distil`; chat_gpu.py).

    python -m specui.train.chat --write-answers runs/answers --minutes 60     # step 1 (chat_data.write_answers)
    python -m specui.train.chat --answers runs/answers,runs/answers-extra --out runs/chat-draft --max-minutes 45

Every answer position carries the target's top-32 log-probabilities, so no target forward runs here:
the loss is the cross-entropy from those probabilities (restricted to the draft's vocabulary) to the
draft's. `--answers` takes one folder or several separated by commas, each optionally FOLDER:WEIGHT
(drawn WEIGHT times as often as a folder of weight 1). The newest `--val-answers` greedy
answers (of training prompts, in the last folder) are kept apart; every `--eval-every`
steps the draft's greedy agreement with the target on them is measured and the best weights are kept,
so a long run on little data cannot overfit past its best. The held-out prompts of
`specui.chat_prompts` only give the final figure. `--init-draft FOLDER` starts from a saved draft (its
vocabulary kept) instead of target layers; `--resume` continues from `OUT/checkpoint.pt` (weights,
optimiser, step, time spent, best so far) after an interruption: Ctrl-C or SIGTERM ends the step in hand and
writes it (`specui.train.checkpoint`, whole or not at all).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from specui import chat_draft
from specui.train import checkpoint as files
from specui.train import model_card, next_step
from specui.train.chat_data import (
    TARGET,
    TARGET_NAME,
    code_stream,
    held_out_alpha,
    load_answers,
    log,
    lr_at,
    padded,
    pick_vocab,
)


def answers_loss(draft, records: list[dict], *, slot: torch.Tensor, pad: int) -> tuple[torch.Tensor, int, int]:
    """Soft cross-entropy to the target's top-k next-token probabilities at every answer position, and
    how many of those positions the draft's greedy token matches the target's (hits, positions).

    slot: [V] the draft row of each target id (-1 outside the draft vocabulary)."""
    logits = draft(input_ids=padded(records, pad=pad)[0]).logits  # [B, T, N]
    losses, hits, count = [], 0, 0
    for i, r in enumerate(records):
        start, n = r["prompt_len"] - 1, len(r["top_ids"])  # position start + j predicts answer token j
        logq = F.log_softmax(logits[i, start:start + n].float(), dim=-1)  # [n, N]
        rows = slot[r["top_ids"].long()]  # [n, top]
        p = r["top_logp"].float().exp() * (rows >= 0)
        losses.append(-(p * logq.gather(1, rows.clamp_min(0))).sum(-1))
        hits += int((logq.argmax(-1) == rows[:, 0]).sum())
        count += n
    return torch.cat(losses).mean(), hits, count


def agreement(draft, records: list[dict], *, slot: torch.Tensor, pad: int, batch: int = 16) -> float:
    """Teacher-forced greedy agreement of the draft with the target (its top-1) on `records`."""
    return summed_agreement(lambda part: answers_loss(draft, part, slot=slot, pad=pad), records, batch)


def summed_agreement(step_loss, records: list[dict], batch: int) -> float:
    """The hits over the positions of step_loss(part) -> (loss, hits, positions), `batch` records a part."""
    hits = total = 0
    for first in range(0, len(records), batch):
        _, h, n = step_loss(records[first:first + batch])
        hits, total = hits + h, total + n
    return hits / max(1, total)


def draft_slots(draft, vocab_size: int, device="cpu") -> torch.Tensor:
    """[vocab_size] the draft's row of each target id, -1 outside its vocabulary."""
    slot = torch.full((vocab_size,), -1, dtype=torch.long, device=device)
    slot[draft.token_ids.to(device)] = torch.arange(len(draft.token_ids), device=device)
    return slot


def split(records: list[dict], val: int) -> tuple[list[dict], list[dict]]:
    """(training, validation): the last `val` greedy answers (of the newest files) are kept apart, and
    sampled answers to their prompts are left out of training."""
    greedy = [r for r in records if not r.get("sampled")]
    val = min(val, len(greedy) // 2)
    if not val:
        return records, []
    kept = greedy[-val:]
    prompts = {_prompt(r) for r in kept}  # the kept answers themselves included
    return [r for r in records if _prompt(r) not in prompts], kept


def _prompt(record: dict) -> tuple[int, ...]:
    return tuple(record["ids"][: record["prompt_len"]].tolist())


def start(args, target, tok):
    """What both recipes start from: the --answers split into training and validation (`split`), and the
    draft to train: --init-draft's (its vocabulary kept, or with --new-vocab picked afresh), else a new one of
    --drafts' shape over the most frequent tokens. Returns (training answers, validation answers, draft,
    facts for its card)."""
    layers, init = args.drafts.split(":")
    if not args.init_draft and max(map(int, init.split(","))) >= target.config.num_hidden_layers:  # said first
        raise SystemExit(f"--drafts {args.drafts}: the target has layers 0 to {target.config.num_hidden_layers - 1}")
    records, val = split(load_answers(args.answers), args.val_answers)
    chat = torch.cat([r["ids"].long() for r in records])
    answer_tokens = sum(len(r["ids"]) - int(r["prompt_len"]) for r in records)
    log(f"{len(records)} answers for training ({answer_tokens:,} answer tokens), {len(val)} kept apart for validation")
    facts = {"answer_tokens": answer_tokens, "started_from": None}
    vocab = target.get_input_embeddings().num_embeddings
    if args.vocab > vocab and (not args.init_draft or getattr(args, "new_vocab", False)):
        raise SystemExit(f"--vocab {args.vocab}: the target has {vocab:,} tokens; give at most {vocab}")
    if not args.init_draft:
        token_ids, covered = pick_vocab([chat, code_stream(tok)], size=args.vocab, tok=tok)
        draft = chat_draft.build(target, num_layers=int(layers), token_ids=token_ids,
                                 init_layers=[int(i) for i in init.split(",")])
        return records, val, draft, {**facts, "init_layers": init, "vocab_coverage": round(covered, 4)}
    draft = chat_draft.load(args.init_draft, target)
    meta = json.loads((Path(args.init_draft) / chat_draft.META).read_text())
    kept = ("init_layers", "steps", "steps_run", "batch", "answers", "answer_tokens", "minutes", "device",
            "held_out_greedy_alpha_teacher_forced", "started_from")
    covered = float(torch.isin(chat, draft.token_ids.cpu()).float().mean())
    log(f"starting from {args.init_draft}: {len(draft.token_ids)} tokens cover {covered:.4f} of the answer tokens")
    if getattr(args, "new_vocab", False):  # --new-vocab: the answers' most frequent ids instead of the saved list
        token_ids, covered = pick_vocab([chat, code_stream(tok)], size=args.vocab, tok=tok)
        chat_draft.repick(draft, target, token_ids)
    if grow := getattr(args, "grow", None):  # --grow: new layers that add nothing yet, from these target layers
        layers = [int(i) for i in grow.split(",")]
        if max(layers) >= target.config.num_hidden_layers:
            raise SystemExit(f"--grow {grow}: the target has layers 0 to {target.config.num_hidden_layers - 1}")
        draft = chat_draft.grow(draft, target, layers)
        log(f"grown to {draft.config.num_hidden_layers} layers (new ones from target layers {grow})")
        facts["grown_from_target_layers"] = grow
    earlier = {k: meta[k] for k in kept if k in meta}
    return records, val, draft, {**facts, "init_layers": f"draft {args.init_draft}",
                                 "vocab_coverage": round(covered, 4), "started_from": earlier}


def train_on_answers(args, target, tok) -> None:
    """CPU recipe, step 2 (see the module docstring)."""
    records, val, draft, facts = start(args, target, tok)
    if bare := sum("top_ids" not in r for r in records + val):  # written with --labels 0: the GPU recipe's
        raise SystemExit(f"--answers: {bare} of the {len(records) + len(val)} answers hold ids alone (written with "
                         "--labels 0), and this recipe learns from the target's stored log-probs: add --on-the-fly "
                         "(the target recomputes them as the draft trains) or --hard-labels")
    slot = draft_slots(draft, target.get_input_embeddings().num_embeddings)
    pad = tok.pad_token_id
    distil(args, target, tok, draft, records=records, val=val, device="cpu",
           step_loss=lambda batch: answers_loss(draft, batch, slot=slot, pad=pad),
           score=lambda kept: agreement(draft, kept, slot=slot, pad=pad),
           facts={**facts, "device": "cpu"})


def distil(args, target, tok, draft, *, records: list[dict], val: list[dict], device: str, step_loss, score,
           facts: dict) -> None:
    """The loop both recipes share: --batch answers drawn by weight, AdamW on the warmup-cosine schedule over
    --max-minutes (else --steps), the validation score every --eval-every steps (the best weights kept) and a
    checkpoint for --resume; then the held-out acceptance, and the draft saved under OUT/draft with `facts`
    and its card. step_loss(answers) -> (loss, hits, positions); score(answers) -> greedy agreement."""
    out = Path(args.out)
    resume = out / "checkpoint.pt"
    draft.train()
    params = [p for p in draft.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=args.lr, betas=(0.9, 0.95), weight_decay=0.0)
    gen = torch.Generator().manual_seed(args.seed)
    state = {"step": 0, "elapsed": 0.0, "best": -1.0, "best_step": 0, "best_weights": None}
    if args.resume:
        state = resumed(resume, draft, opt, gen, device=device)
        log(f"resumed from {resume} at step {state['step']} ({state['elapsed'] / 60:.1f} minutes spent)")
    weights = torch.tensor([float(r.get("weight", 1.0)) for r in records])
    log_every = 25 if device.startswith("cuda") else 10
    saved_at = {"step": None}  # the step of the last checkpoint written

    def evaluate(step: int) -> None:
        if val:
            was_training = draft.training
            draft.eval()
            with torch.no_grad():
                value = score(val)
            draft.train(was_training)
            if value > state["best"]:
                state.update(best=value, best_step=step,
                             best_weights={k: v.detach().clone() for k, v in chat_draft.trained_state(draft).items()})
            best = f"best {state['best']:.4f} at step {state['best_step']}"
            log(f"step {step}: validation agreement {value:.4f} ({best})")
        out.mkdir(parents=True, exist_ok=True)
        files.save({"weights": chat_draft.trained_state(draft), "optimizer": opt.state_dict(),  # whole or not at all
                    "generator": gen.get_state(), "state": state, "token_ids": draft.token_ids.cpu()}, resume)
        saved_at["step"] = step

    if state["step"] == 0:
        evaluate(0)
    started = time.time() - state["elapsed"]
    with files.stop_requests() as stop:  # Ctrl-C or SIGTERM: the step in hand ends, then the checkpoint
        while state["step"] < args.steps and not stop.asked:
            step = state["step"]
            frac = min(1.0, (time.time() - started) / (args.max_minutes * 60)) if args.max_minutes \
                else step / args.steps
            lr = lr_at(args, frac, step)
            for g in opt.param_groups:
                g["lr"] = lr
            picks = torch.multinomial(weights, args.batch, replacement=True, generator=gen).tolist()
            loss, hits, count = step_loss([records[i] for i in picks])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            state["step"] = step = step + 1
            state["elapsed"] = time.time() - started
            if step % log_every == 0:
                log(f"step {step} lr {lr:.2e} loss {loss.item():.3f} agree {hits / max(1, count):.3f} "
                    f"({state['elapsed'] / 60:.1f} min)")
            if step % args.eval_every == 0 or frac >= 1.0 or step == args.steps:
                evaluate(step)
            if frac >= 1.0:
                break
    if stop.asked:
        if saved_at["step"] != state["step"]:
            evaluate(state["step"])  # the checkpoint of the step in hand
        raise files.stopped(stop, state["step"], resume)
    if state["best_weights"] is not None:
        draft.load_state_dict(state["best_weights"], strict=False)
        log(f"keeping the weights of step {state['best_step']} (validation agreement {state['best']:.4f})")
    draft.eval()
    alpha = held_out_alpha(target, {"draft": draft}, tok, device=device, new_tokens=args.alpha_tokens)["draft"]
    facts = {"target": TARGET_NAME, "held_out_greedy_alpha_teacher_forced": round(alpha, 4),
             "validation_agreement": round(state["best"], 4) if val else None,
             "steps": state["best_step"] if val else state["step"], "steps_run": state["step"], "batch": args.batch,
             "lr": args.lr, "answers": sum(not r.get("sampled") for r in records),
             "sampled_answers": sum(bool(r.get("sampled")) for r in records), "validation_answers": len(val),
             "minutes": round(state["elapsed"] / 60, 1), **facts,
             "command": "python -m specui.train.chat " + " ".join(sys.argv[1:])}
    def write(place):  # the weights and their card, whole or not at all (checkpoint.save_folder)
        chat_draft.save(draft, place, facts=facts)
        model_card.write_chat_draft_card(place)

    files.save_folder(out / "draft", write)
    log(f"held-out greedy alpha {alpha:.3f} (on {facts['device']}); saved {out / 'draft'}")
    gguf = getattr(args, "gguf", None)
    print("\n".join(next_step.draft_lines(out / "draft", target=next_step.as_typed(gguf) if gguf else TARGET,
                                          chat=True)), flush=True)


def resumed(path: Path, draft, opt, gen, *, device: str) -> dict:
    """Load the checkpoint `path` into the draft, the optimiser and the batch generator; returns its state (step,
    time spent, best so far). Refuses in one line one that cannot be read, or of a draft of another shape or
    vocabulary."""
    saved = files.load_checkpoint(path, map_location=device, key="state")
    ids = saved.get("token_ids")  # none in checkpoints written before it was kept
    if ids is not None and not torch.equal(ids.cpu(), draft.token_ids.cpu()):
        # the weights would load (the output rows are the target's, not in the checkpoint), but its best-so-far
        # agreement and weights were measured over the first run's ids: a run resumed on others would keep or drop
        # weights by a score of another vocabulary, and the saved draft's card would mix the two
        mine = len(draft.token_ids)
        which = f"{len(ids)} ids, this run's {mine}" if len(ids) != mine else f"{mine} ids, this run as many other ones"
        raise SystemExit(f"--resume: {path} was written for a draft vocabulary of {which} (picked by --vocab, "
                         "--answers, --val-answers, --init-draft and --new-vocab): give the first run's, or another "
                         "--out")
    try:
        expected = chat_draft.trained_state(draft)
        if set(saved["weights"]) != set(expected):  # another layer count: load_state_dict(strict=False) would not say
            raise RuntimeError(f"layers: {_layers(saved['weights'])} in it, {_layers(expected)} in this run's")
        draft.load_state_dict(saved["weights"], strict=False)
        opt.load_state_dict(saved["optimizer"])
        gen.set_state(saved["generator"])
    except (RuntimeError, ValueError, KeyError) as e:
        raise files.another_shape(path, e, what="a draft", fix="give the first run's --drafts, --vocab and "
                                  "--init-draft, or another --out") from None
    return saved["state"]


def _layers(weights: dict) -> int:
    return len({k.split(".")[2] for k in weights if k.startswith("model.layers.")})
