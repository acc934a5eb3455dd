"""What a heads run (`python -m specui.train heads`) reads and writes besides the target's states: heads warm-started
from --init, a checkpoint to resume, the trained heads saved as head folders with their held-out loss."""

from __future__ import annotations

import json
import time
from pathlib import Path

import torch

from specui.heads import common
from specui.train import checkpoint as files


def log(msg: str) -> None:
    """A line of a heads run's log, with the time."""
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def init_heads(args, target) -> dict:
    """The heads saved under --init, one subfolder per name, sharing one draft vocabulary."""
    from specui import heads as saved

    try:
        heads = {n: saved.load(Path(args.init) / n, target).float() for n in args.heads}
    except ValueError as e:  # a head trained for another target (width, layers, vocabulary) or of an unknown kind
        raise SystemExit(f"--init: {e}") from None
    ids = [h.output.token_ids.cpu() for h in heads.values()]
    if any(not torch.equal(i, ids[0]) for i in ids):
        raise SystemExit(f"--init {args.init}: the heads draft over different vocabularies; "
                         "warm-start them one at a time")
    if args.eagle_steps and "eagle" in heads:  # a training setting, not the head's shape
        heads["eagle"].train_steps = heads["eagle"].arguments["train_steps"] = args.eagle_steps
    return heads


def resume(checkpoint: Path, heads: dict, opt, gen, *, device) -> tuple[int, float]:
    """Load `checkpoint` into the heads, the optimiser and the batch generator; returns (step, seconds spent).
    Refuses in one line a checkpoint that cannot be read, or of other heads or another draft vocabulary."""
    state = files.load_checkpoint(checkpoint, map_location=device)
    saved = list(state.get("heads", {}))
    if saved != list(heads):
        raise SystemExit(f"--resume: {checkpoint} holds the heads {', '.join(saved) or '(none)'}, this run trains "
                         f"{', '.join(heads)}: give --head {','.join(saved)}, or another --out")
    try:
        for name, h in heads.items():
            h.load_state_dict(state["heads"][name])
        opt.load_state_dict(state["optimizer"])
    except (RuntimeError, ValueError, KeyError) as e:  # another vocabulary, width or head setting
        raise files.another_shape(checkpoint, e, what="heads", fix="give the first run's --vocab, --seq, --init and "
                                  "head settings, or another --out") from None
    if "generator" in state:  # the batches go on where they stopped (older checkpoints drew the first ones again)
        gen.set_state(state["generator"])
    return state["step"], state["seconds"]


def save_heads(heads: dict, out: Path, *, facts: dict, held_loss: dict) -> None:
    """Each head as a folder under `out` (its facts and held-out loss in specui_head.json), and run.json."""
    for name, h in heads.items():  # each folder whole or absent, never half of one run's files over another's
        files.save_folder(out / name, lambda place: common.save(h.eval(), place, facts={
            **facts, "held_out_loss": round(held_loss[name], 4)}))
        log(f"{name}: saved to {out / name} (held-out loss {held_loss[name]:.3f})")
    (out / "run.json").write_text(json.dumps({"steps": facts["steps"], "minutes": facts["minutes"],
                                              "held_out_loss": held_loss}, indent=2))


@torch.no_grad()
def held_out_loss(heads: dict, cache, held: list[int], *, token_ids, rows, device, batch: int,
                  hard: bool = False) -> dict:
    sums = {n: 0.0 for n in heads}
    count = 0
    for b in range(0, len(held), batch):
        data = cache.batch(held[b:b + batch], token_ids=token_ids, rows=rows, device=device, hard=hard)
        for name, h in heads.items():
            h.eval()
            sums[name] += float(h.training_loss(data))
        count += 1
    return {n: s / max(count, 1) for n, s in sums.items()}
