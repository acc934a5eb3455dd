"""`python -m specui.train exit`: an early-exit head learns the target's greedy tokens from its early states.

A greedy answer of the target is, token by token, the argmax of its own distribution, so on those answers an exit
head can learn greedy agreement (what greedy acceptance counts) from the tokens alone: the cross-entropy from the
head's logits at each answer position to the token the target wrote next, over the head's ids (tokens outside them
it cannot propose: left out of the loss, counted as misses). That needs the target's states at the exit layer
only, not its final distributions: the target's first E layers run once over the answers (truncated, in batches;
about a quarter of a full pass for SmolLM2's exit at 4 of 30 layers), and the states are kept in --states
(float16) for later runs. `specui.train heads` distils every head from the target's soft distributions instead,
which costs a full pass; this is the cheaper, greedy-only recipe, warm-started from such a head (--init). It learns
from greedy answers, and from sampled ones whose greedy tokens `python -m specui.train.greedy_labels` has written
(their text the context, those tokens the labels); other sampled answers are left out (their tokens are draws).

    python -m specui.train exit --answers DIR1,DIR2 --init assets/smollm2-heads/early_exit --mlp-hidden 1024 \
        --out runs/exit --minutes 20

Held-out answers (--held-out, a seeded share of them, whole prompts: `head_data.held_out_split`) give the agreement
reported as it trains; a checkpoint (the head, the optimiser, the step) every --checkpoint-every steps and at the end,
--resume goes on from it; the head is saved as a head folder in --out, which a preset's `heads: {early_exit: ...}`
names.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from specui import heads as saved
from specui.heads import common
from specui.heads.early_exit import EarlyExitHead
from specui.command_line import refuse_empty, refuse_ignored
from specui.train import checkpoint as files
from specui.train import next_step
from specui.train.common import at_least, check_budgets, check_folders, device_name
from specui.train.head_data import data_key, greedy_sequences, held_out_split, target_key
from specui.train.heads import log, lr_at, start_run


def parse_args(argv=None, *, create: bool = False) -> argparse.Namespace:
    """The options, each number in its range and --out writable (with `create`, as a run starts: made now)."""
    ap = argparse.ArgumentParser(prog="python -m specui.train exit", description=__doc__.split("\n")[0])
    ap.add_argument("--preset", default=None, help="the preset whose target the head serves (default: models.yaml's default)")
    ap.add_argument("--config", default=None, help="a models.yaml (default: specui's own, beside its app.py)")
    ap.add_argument("--answers", required=True, help="folders of the target's answers (DIR1,DIR2; "
                    "python -m specui.train.chat --write-answers, or tools/gpu_answers.tar.xz's sets): the greedy "
                    "ones, and the sampled ones labelled by python -m specui.train.greedy_labels")
    ap.add_argument("--init", default=None, help="an early-exit head folder to start from (else a fresh head)")
    ap.add_argument("--exit-layer", type=int, default=0, help="the exit: the head drafts from the state "
                    "entering this layer (0: --init's, or a quarter of the layers for a fresh head; default: "
                    "%(default)s)")
    ap.add_argument("--mlp-hidden", type=int, default=0, help="add a gated MLP of this width after the block "
                    "(starts as the identity; 0: none, or the --init head's own; default: %(default)s)")
    ap.add_argument("--vocab", type=int, default=2048, help="a fresh head's ids: the answers' most used (default: %(default)s)")
    ap.add_argument("--out", default="runs/exit", help="the head folder and its checkpoint (default: %(default)s)")
    ap.add_argument("--states", default=None, help="the cached exit states (default: --out/states.pt)")
    ap.add_argument("--seq", type=int, default=320, help="tokens kept of each conversation (default: %(default)s)")
    ap.add_argument("--minutes", type=float, default=20.0, help="training time (default: %(default)s)")
    ap.add_argument("--steps", type=int, default=1_000_000, help="at most this many steps (default: %(default)s)")
    ap.add_argument("--batch", type=int, default=2048, help="answer positions a step (default: %(default)s)")
    ap.add_argument("--lr", type=float, default=1e-3, help="peak learning rate (default: %(default)s)")
    ap.add_argument("--warmup", type=int, default=50, help="steps of linear warmup (default: %(default)s)")
    ap.add_argument("--held-out", type=float, default=0.05,
                    help="share of answers held out, whole prompts at a time (default: %(default)s)")
    ap.add_argument("--eval-every", type=int, default=200, help="steps between held-out reports (default: %(default)s)")
    ap.add_argument("--checkpoint-every", type=int, default=200, help="steps between checkpoints (default: %(default)s)")
    ap.add_argument("--resume", action="store_true", help="go on from --out/checkpoint.pt")
    ap.add_argument("--overwrite", action="store_true",
                    help="start afresh over the head and checkpoint an earlier run left in --out (default: refused)")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default; default: %(default)s)")
    ap.add_argument("--seed", type=int, default=0,
                    help="seed of the held-out split and the batches (default: %(default)s)")
    args = ap.parse_args(argv)
    refuse_empty(ap, args, "preset", "config", "out")  # read as left out: the default preset trained
    check_budgets(ap, args, exit_layer=at_least(0), mlp_hidden=at_least(0))
    refuse_ignored(ap, args, argv, [("vocab", bool(args.init), f"picks a fresh head's ids; --init {args.init}'s head "
                                                               "keeps its own"),
                                    ("overwrite", args.resume, "starts afresh over an earlier run, --resume goes on "
                                                               "from it: say one")])
    files.check_resume(ap, args)
    check_init(ap, args)
    files.refuse_overwrite(ap, args, [Path(args.out) / common.META, Path(args.out) / "checkpoint.pt"])
    check_folders(ap, args, ["out"], create=create)
    if create:  # as the run starts, before the target loads: a folder mistyped, or one without answers
        from specui.train.chat_data import answers_problem, greedy_problem

        if problem := answers_problem(args.answers) or greedy_problem(args.answers,
                                                                       learner="python -m specui.train exit"):
            ap.error(f"--answers: {problem}")
    return args


def check_init(ap, args) -> None:
    """Refuse, in one line before the target loads, an --init that is no early-exit head folder, and an --mlp-hidden
    other than the width of --init's own MLP (its trained weights keep their shape; a head without one grows one)."""
    if not args.init:
        return
    if not common.is_head_folder(args.init):
        ap.error(f"--init {args.init}: no saved head there (expected {Path(args.init) / common.META})")
    try:
        meta = common.read_meta(args.init)
    except ValueError as e:  # another format
        ap.error(f"--init {e}")
    if meta.get("kind") != "early_exit":
        ap.error(f"--init {args.init}: a {meta.get('kind')} head, not an early-exit head")
    width = meta.get("arguments", {}).get("mlp_hidden", 0)
    if args.mlp_hidden and width and args.mlp_hidden != width:
        ap.error(f"--mlp-hidden {args.mlp_hidden}: --init {args.init}'s head has an MLP {width} wide, which it keeps "
                 "(its trained weights have that shape): drop --mlp-hidden, or train a fresh head (no --init)")


@torch.no_grad()
def exit_states(target, sequences, *, layer: int, path: Path, batch: int = 16, whole: bool = False,
                labels: list[torch.Tensor] | None = None) -> dict:
    """Per sequence (ids, first answer index): the states entering layer `layer` at the positions that predict its
    answer tokens (float16 [n, D]; every position's with `whole`) and those tokens (or `labels`' for them: the
    target's greedy tokens where the answer was sampled); kept in `path` and read back when it holds the same
    settings and target (`target_key`)."""
    key = {"layer": layer, "data": data_key(sequences), "target": target_key(target),
           **({"whole": True} if whole else {}),
           **({"labels": sum(int(x.sum()) for x in labels)} if labels is not None else {})}
    kept = files.read_cache(path, log=log)  # unreadable: computed again
    if kept is not None:
        if kept.get("key") == key:
            log(f"exit states read from {path}")
            return kept
        log(f"{path} holds other settings ({kept.get('key')}); computing them again")
    layers, count, norm = target.model.layers, target.config.num_hidden_layers, target.model.norm
    # the first `layer` layers alone, and the final norm set aside: the model's last state is then the state entering
    # layer `layer` (transformers' hidden_states, asked of a model cut short, end on the normed one instead, and its
    # hooks that collect them would stay on the layers of the cut model)
    target.model.layers, target.config.num_hidden_layers, target.model.norm = layers[:layer], layer, torch.nn.Identity()
    try:
        states, answer_labels = [None] * len(sequences), [None] * len(sequences)
        order = sorted(range(len(sequences)), key=lambda i: len(sequences[i][0]))  # little padding
        started = time.time()
        for b in range(0, len(order), batch):
            picked = order[b:b + batch]
            width = max(len(sequences[i][0]) for i in picked)
            ids = torch.zeros(len(picked), width, dtype=torch.long)  # padding at the end: the causal rows before it keep their values
            for j, i in enumerate(picked):
                ids[j, :len(sequences[i][0])] = sequences[i][0]
            hidden = target.model(input_ids=ids.to(target.device)).last_hidden_state
            for j, i in enumerate(picked):
                seq, first = sequences[i]
                states[i] = hidden[j, 0 if whole else first - 1:len(seq) - 1].to("cpu", torch.float16)
                answer_labels[i] = seq[first:].clone() if labels is None else labels[i]
            if (b // batch) % 25 == 0:
                log(f"exit states: {b + len(picked):,}/{len(order):,} sequences ({time.time() - started:.0f} s)")
    finally:
        target.model.layers, target.config.num_hidden_layers, target.model.norm = layers, count, norm
    kept = {"key": key, "states": states, "labels": answer_labels}
    files.save(kept, path)  # whole or not at all
    return kept


def agreement(head, states: torch.Tensor, labels: torch.Tensor, chunk: int = 8192) -> float:
    """The share of positions whose top token (over the head's ids, as the labels are indexed) is the label."""
    with torch.no_grad():
        hits = sum(int((head(states[i:i + chunk].float()).argmax(-1) == labels[i:i + chunk]).sum())
                   for i in range(0, len(labels), chunk))
    return hits / max(1, len(labels))


def build_head(args, target, answers: list[torch.Tensor]) -> EarlyExitHead:
    """--init's head (with a new identity MLP where --mlp-hidden asks for one it lacks), or a fresh one."""
    if args.init:
        try:
            head = saved.load(args.init, target).float()  # an early-exit head (check_init)
        except ValueError as e:  # a head trained for another target (width, layers, vocabulary)
            raise SystemExit(f"--init: {e}") from None
        layer = args.exit_layer or head.exit_layer
        if (args.mlp_hidden and head.mlp is None) or layer != head.exit_layer:
            # a new identity MLP where asked for one the head lacks, and the adapter moved to another exit (its
            # weights do not depend on the layer: a warm start for the states there)
            mlp = head.arguments.get("mlp_hidden", 0) or args.mlp_hidden
            moved = EarlyExitHead(target, token_ids=head.output.token_ids, exit_layer=layer, mlp_hidden=mlp)
            moved.load_state_dict(head.state_dict(), strict=False)  # the block and norm (and MLP, if it had one)
            head = moved
        return head.to(target.get_input_embeddings().weight.device)
    vocab = target.get_output_embeddings().weight.shape[0]
    ids = common.frequent_ids([torch.cat(answers)], size=args.vocab, vocab_size=vocab)
    layer = args.exit_layer or max(1, target.config.num_hidden_layers // 4)
    return EarlyExitHead(target, token_ids=ids, exit_layer=layer, mlp_hidden=args.mlp_hidden)


def _history(folder) -> dict:
    """What --init's head records of its own training (its shape lives in `arguments`)."""
    return {k: v for k, v in common.read_meta(folder).items() if k not in ("format", "kind", "arguments")}


def _reachable(states: list[torch.Tensor], picked: list[int],
               labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The states of the sequences `picked`, in order, at the positions whose label (an index among the head's ids,
    -1 outside them) the head can propose, with those labels: copied into one tensor sequence by sequence (a cat of
    them all and then a mask kept three copies of the states at once, more than 24 GB for 28k answers)."""
    keep = labels >= 0
    out = torch.empty(int(keep.sum()), states[picked[0]].shape[-1], dtype=states[picked[0]].dtype)
    start = filled = 0
    for i in picked:
        n = len(states[i])
        rows = states[i][keep[start:start + n]]
        out[filled:filled + len(rows)] = rows
        start, filled = start + n, filled + len(rows)
    return out, labels[keep]


def main(argv=None) -> None:
    args = parse_args(argv, create=True)
    out, preset, target, _ = start_run(args)
    sequences, labels = greedy_sequences(args.answers, max_len=args.seq)
    head = build_head(args, target, labels)
    data = exit_states(target, sequences, layer=head.exit_layer, path=Path(args.states or out / "states.pt"),
                       labels=labels)
    where = torch.full((head.output.vocab_size,), -1, dtype=torch.long)  # target id -> index among the head's ids
    where[head.output.token_ids.cpu()] = torch.arange(len(head.output.token_ids))
    held, train = held_out_split(sequences, args.held_out, args.seed)
    held_x = torch.cat([data["states"][i] for i in held])
    held_y = where[torch.cat([data["labels"][i] for i in held])]
    train_y = where[torch.cat([data["labels"][i] for i in train])]
    log(f"{preset.name}: exit at layer {head.exit_layer}, MLP {head.mlp is not None and head.arguments['mlp_hidden']}; "
        f"{len(train_y):,} training positions ({(train_y >= 0).float().mean():.3f} within the head's "
        f"{len(head.output.token_ids)} ids), {len(held_y):,} held out")
    train_x, train_y = _reachable(data["states"], train, train_y)
    del data  # its per-sequence states: a second copy of every position (28k answers: 6.4 GB)
    params = [p for p in head.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=args.lr, weight_decay=0.0)
    step, spent, checkpoint = 0, 0.0, out / "checkpoint.pt"

    def save_checkpoint():
        files.save({"head": head.state_dict(), "optimizer": opt.state_dict(), "step": step, "seconds": spent},
                   checkpoint)  # whole or not at all: a kill mid-write leaves the previous one

    if args.resume:
        state = files.load_checkpoint(checkpoint)
        try:
            head.load_state_dict(state["head"])
            opt.load_state_dict(state["optimizer"])
        except (RuntimeError, ValueError, KeyError) as e:  # another vocabulary, exit layer or MLP
            raise files.another_shape(checkpoint, e, what="a head", fix="give the first run's settings, or another "
                                      "--out") from None
        step, spent = state["step"], state["seconds"]
        log(f"resumed from {checkpoint} at step {step} ({spent / 60:.1f} min in)")
    before = agreement(head, held_x, held_y)
    log(f"held-out greedy agreement at the start: {before:.4f}")
    gen = torch.Generator().manual_seed(args.seed + step)
    started = time.time() - spent
    with files.stop_requests() as stop:  # Ctrl-C or SIGTERM: the step in hand ends, then the checkpoint
        while step < args.steps and spent < args.minutes * 60 and not stop.asked:
            progress = max(step / args.steps, spent / (args.minutes * 60))
            for group in opt.param_groups:
                group["lr"] = lr_at(args, step, progress)
            pick = torch.randint(0, len(train_y), (args.batch,), generator=gen)
            loss = F.cross_entropy(head(train_x[pick].float()), train_y[pick])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            spent = time.time() - started
            if step % args.eval_every == 0:
                log(f"step {step}: loss {float(loss.detach()):.3f}, held-out agreement "
                    f"{agreement(head, held_x, held_y):.4f} ({spent / 60:.1f} min)")
            if step % args.checkpoint_every == 0:
                save_checkpoint()
    save_checkpoint()
    if stop.asked:
        raise files.stopped(stop, step, checkpoint)
    after = agreement(head, held_x, held_y)
    facts = {"preset": preset.name, "target": preset.target, "steps": step, "minutes": round(spent / 60, 1),
             "positions": len(train_y), "device": device_name(target.device),
             "recipe": "greedy tokens as labels over cached exit states (python -m specui.train exit)",
             **({"init": args.init, "continued_from": _history(args.init)} if args.init else {}),
             "held_out_agreement": f"{before:.4f} -> {after:.4f} (teacher-forced, {len(held_y):,} positions of "
                                   f"held-out answers)",
             "command": "python -m specui.train exit " + " ".join(argv or [])}
    save_head(head.eval(), out, facts=facts)
    log(f"saved to {out} (held-out agreement {before:.4f} -> {after:.4f})")
    next_step.say_heads({"early_exit": out}, preset=args.preset, config=args.config)


def save_head(head, out: Path, *, facts: dict) -> None:
    """The head into --out itself (beside its checkpoint and states): written whole beside it first
    (checkpoint.save_folder), so a save that fails (a full disk) leaves the earlier head as it was; then its files
    renamed in, specui_head.json last, so a kill among the renames leaves no folder that looks whole."""
    new = files.save_folder(out / ".head", lambda place: common.save(head, place, facts=facts))
    (out / common.META).unlink(missing_ok=True)
    for old in out.glob("head*.safetensors"):  # an earlier head's shards, which the new one may not all replace
        old.unlink()
    for path in sorted(new.iterdir(), key=lambda p: p.name == common.META):
        os.replace(path, out / path.name)
    new.rmdir()
