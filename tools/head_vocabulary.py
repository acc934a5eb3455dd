"""Cut a trained head's draft vocabulary to the ids the target's answers use most, keeping its weights.

    python -m tools.head_vocabulary HEAD_FOLDER SIZE --out FOLDER [--answers DIR[,DIR...]]

A head drafts over `output.token_ids` (`specui.heads.common.VocabOutput`): the target's output rows at those ids,
read from the target at load. Its own weights (an adapter, a block) do not depend on which ids are kept, so a head
can be given fewer of them without training again: its draft step reads fewer rows, and a token outside them is
never proposed (q = 0 there, which verification handles exactly). This keeps the SIZE ids of the head's own that
the answers' tokens use most (answer tokens only, every greedy and sampled answer of the folders; default: the GPU
rounds' answers in tools/gpu_answers.tar.xz), writes the head to FOLDER with its record saying so, and prints how
much of the answers' text the kept ids cover. Measure before shipping (`python -m tools.assets_ab`): acceptance
falls where the dropped ids are ones the head would have proposed well.
"""

from __future__ import annotations

import argparse
import collections
import json
import shutil
import tarfile
import tempfile
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from specui.train.chat_data import load_answers
from tools.gpu_carry import ANSWERS


def answer_counts(folders: list[Path]) -> collections.Counter:
    """How often each id appears in the answers (not the prompts) of the folders."""
    counts = collections.Counter()
    for record in load_answers(folders):
        counts.update(record["ids"][int(record["prompt_len"]):].tolist())
    return counts


def cut(head: Path, size: int, out: Path, counts: collections.Counter, source: str) -> tuple[float, float]:
    """Write `head` with its `size` most used ids to `out`; returns the share of answer tokens its ids covered
    before and after."""
    files = {path: load_file(path) for path in sorted(head.glob("head*.safetensors"))}  # one, or shards
    holder = next((path for path, tensors in files.items() if "output.token_ids" in tensors), None)
    if holder is None:
        raise SystemExit(f"{head}: this head has no draft vocabulary of its own (output.token_ids)")
    state = files[holder]
    ids = state["output.token_ids"].tolist()
    if not 0 < size < len(ids):
        raise SystemExit(f"SIZE must be between 1 and the head's {len(ids) - 1} ids (got {size})")
    kept = sorted(sorted(ids, key=lambda i: (-counts[i], i))[:size])
    total = sum(counts.values()) or 1
    before, after = sum(counts[i] for i in ids) / total, sum(counts[i] for i in kept) / total
    state["output.token_ids"] = torch.tensor(kept, dtype=state["output.token_ids"].dtype)
    out.mkdir(parents=True, exist_ok=True)
    for path, tensors in files.items():  # every shard as it was, but the ids
        save_file(tensors, out / path.name)
    meta = json.loads((head / "specui_head.json").read_text())
    meta["vocabulary_cut"] = {"from": len(ids), "to": size, "answers": source,
                              "answer_tokens_covered": {"before": round(before, 4), "after": round(after, 4)},
                              "command": f"python -m tools.head_vocabulary {head} {size} --out {out}"}
    (out / "specui_head.json").write_text(json.dumps(meta, indent=2) + "\n")
    return before, after


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("head", type=Path, help="a head folder (python -m specui.train heads)")
    p.add_argument("size", type=int, help="how many of its ids to keep")
    p.add_argument("--out", type=Path, required=True, help="the folder to write the cut head to")
    p.add_argument("--answers", default=None, help="answer folders, comma-separated (default: tools/gpu_answers.tar.xz)")
    args = p.parse_args(argv)
    if args.out.resolve() == args.head.resolve():
        raise SystemExit("--out must be another folder than the head's (its record is read from there)")
    with tempfile.TemporaryDirectory() as unpacked:
        if args.answers:
            folders, source = [Path(f) for f in args.answers.split(",") if f], args.answers
        else:
            with tarfile.open(ANSWERS) as archive:
                archive.extractall(unpacked, filter="data")
            folders = sorted(d for d in Path(unpacked).glob("*/*") if d.is_dir())
            source = f"tools/gpu_answers.tar.xz ({len(folders)} sets)"
        counts = answer_counts(folders)
    before, after = cut(args.head, args.size, args.out, counts, source)
    if (args.head / "README.md").exists():
        shutil.copy(args.head / "README.md", args.out)
    print(f"wrote {args.out}: {args.size} ids, covering {after:.4f} of the answers' tokens ({before:.4f} before)")


if __name__ == "__main__":
    main()
