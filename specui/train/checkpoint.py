"""Files a training run leaves behind and reads back: written whole or not at all, read back or refused in one line.

`save` writes to a temporary file beside the target and renames it over the old one, so a run killed mid-write
(kill -9, a full disk, a preempted machine) leaves the previous checkpoint or cache intact, never a truncated one.
`check_resume` refuses a `--resume` with no checkpoint to go on from, as the arguments are parsed; `load_checkpoint`
reads a `--resume` checkpoint and refuses, in one line naming the flag and the file, one that
cannot be read (truncated, another program's, a torch too old). `read_cache` reads a cache (the target's states,
its continuations) and returns None for one that cannot be read, so the run recomputes it. `stop_requests` lets a
training loop end its step and save its checkpoint on Ctrl-C or SIGTERM, and `stopped` says so and ends the
process with the shell's status for the signal (130, 143), not a failure's 1; `another_shape` refuses a checkpoint
whose tensors do not fit the run's. `refuse_overwrite` refuses a run whose --out already holds what it would write
(trained weights, a checkpoint) unless --resume or --overwrite says so, and `refuse_other_heads` one whose checkpoint
holds other heads than the run trains; `save_folder` writes a model or head folder
whole into a folder beside it and renames it into place, so a run killed mid-save never leaves a folder that looks
complete but mixes two runs' files or lacks some.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
from contextlib import contextmanager
from pathlib import Path

import torch


def save(obj, path) -> None:
    """torch.save(obj, path), atomically: to PATH.tmp, then renamed over PATH."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    torch.save(obj, tmp)
    os.replace(tmp, path)


def save_folder(folder, write) -> Path:
    """write(place) into a fresh folder beside `folder` (.NAME.partial), then renamed to `folder`: the earlier one, if
    any, renamed aside first (.NAME.old) and deleted after. A failure in `write` or in a rename leaves the earlier
    folder as it was; a kill leaves it whole, or (between the two renames) .NAME.old and no `folder`, which the next
    save puts back before anything else: never a folder that looks complete but holds some files of each run, or
    some files of one."""
    folder = Path(folder)
    partial, old = (folder.with_name(f".{folder.name}.{end}") for end in ("partial", "old"))
    if old.is_dir() and not folder.exists():  # a save killed between its renames: the earlier folder, put back
        os.replace(old, folder)
    for leftover in (partial, old):  # a killed save's
        shutil.rmtree(leftover, ignore_errors=True)
    partial.mkdir(parents=True)
    try:
        write(partial)
        if folder.exists():
            os.replace(folder, old)
        os.replace(partial, folder)
    except BaseException:
        if old.is_dir() and not folder.exists():  # renamed aside, the new one not in its place: back it goes
            os.replace(old, folder)
        shutil.rmtree(partial, ignore_errors=True)
        raise
    shutil.rmtree(old, ignore_errors=True)
    return folder


def refuse_overwrite(ap, args, outputs) -> None:
    """A parser's check: a run whose --out already holds any of `outputs` (its trained weights, its checkpoint) is
    refused in one line before any work, unless --resume goes on from them or --overwrite replaces them: a command
    repeated by mistake would otherwise lose hours of training without a word."""
    if getattr(args, "resume", False) or args.overwrite:
        return
    found = next((Path(p) for p in outputs if Path(p).exists()), None)
    if found is not None:
        resumable = hasattr(args, "resume") and (Path(args.out) / "checkpoint.pt").is_file()
        ap.error(f"--out {args.out} already holds {found} from an earlier run: "
                 f"{'--resume goes on from its checkpoint, ' if resumable else ''}--overwrite replaces it, or give "
                 "another --out")


def refuse_other_heads(ap, args) -> None:
    """A parser's check for `specui.train heads`: a checkpoint in --out of other heads than --head names is refused in
    one line before the target loads, with the --head that goes on from it: with --resume (which could not), and
    without (where refuse_overwrite's --resume alone would fail after the target loaded). One that cannot be read
    is left to --resume's refusal."""
    path = Path(args.out) / "checkpoint.pt"
    if args.overwrite or not path.is_file():
        return
    try:  # mapped, not read: only the names of its heads are wanted
        saved = list(torch.load(path, map_location="cpu", mmap=True, weights_only=False).get("heads", {}))
    except Exception:
        return
    if not saved or saved == args.heads:
        return
    holds, trains, head = ", ".join(saved), ", ".join(args.heads), ",".join(saved)
    if args.resume:
        ap.error(f"--resume: {path} holds the heads {holds}, this run trains {trains}: give --head {head}, "
                 "or another --out")
    ap.error(f"--out {args.out} already holds {path} of the heads {holds} from an earlier run: --resume --head "
             f"{head} goes on from it, --overwrite replaces it (the head folders it does not train stay), or give "
             "another --out")


def check_resume(ap, args) -> None:
    """A parser's check: --resume with no checkpoint in --out is refused in one line, before the target loads."""
    path = Path(args.out) / "checkpoint.pt"
    if args.resume and not path.is_file():
        ap.error(f"--resume: no checkpoint in {args.out} (expected {path}); drop --resume to start afresh")


def load_checkpoint(path, *, map_location=None, flag: str = "--resume", key: str = "step") -> dict:
    """The checkpoint in `path` (a dict holding `key`), or SystemExit with one line saying it cannot be read and what
    to do."""
    try:
        state = torch.load(path, map_location=map_location, weights_only=False)
    except Exception as e:  # a truncated zip, a pickle of something else, an unreadable file: the cause, in short
        reason = (str(e).strip().splitlines() or [type(e).__name__])[0].split(". ")[0].rstrip(".")
        raise SystemExit(f"{flag}: {path} cannot be read ({reason[:160]}); it is not a whole checkpoint of this "
                         f"command: delete it to start afresh, or drop {flag}") from None
    if not isinstance(state, dict) or key not in state:
        raise SystemExit(f"{flag}: {path} is not a checkpoint of this command (no {key} in it); delete it to start "
                         f"afresh, or drop {flag}")
    return state


def another_shape(path, error: Exception, *, what: str, fix: str) -> SystemExit:
    """The one line for a --resume checkpoint whose tensors do not fit this run's (load_state_dict's `error`: another
    vocabulary, width or layer count): what it was written for, torch's own first words on why, and `fix`."""
    lines = str(error).strip().splitlines()
    detail = ((lines[1].strip() if len(lines) > 1 else lines[0]) if lines else type(error).__name__).rstrip(".")
    return SystemExit(f"--resume: {path} was written for {what} of another shape ({detail[:200]}); {fix}")


def stopped(stop: _Stop, step: int, path) -> SystemExit:
    """After `stop_requests` asked a training loop to stop and it saved `path`: says so on stderr, with how to go on,
    and returns the SystemExit to raise, whose status is the shell's for the signal (128 + its number: 130 after
    Ctrl-C, 143 after SIGTERM), so a script or a scheduler (slurm, systemd, `timeout`) tells a stop it can resume
    from a failure (1)."""
    print(f"{stop.asked} at step {step}: checkpoint saved in {path}; the same command with --resume goes on from it",
          file=sys.stderr, flush=True)
    return SystemExit(128 + stop.signum)


def read_cache(path, *, log=print):
    """What `path` holds, or None when there is none (no path, no file) or it cannot be read (said in the log): the
    caller computes it."""
    if path is None or not Path(path).exists():
        return None
    try:
        return torch.load(path, weights_only=False)
    except Exception as e:
        log(f"{path} cannot be read ({type(e).__name__}); computing it again")
        return None


class _Stop:
    asked = ""  # what asked the loop to stop ("interrupted", "terminated"), or ""
    signum = 0  # the signal that asked it


@contextmanager
def stop_requests():
    """Within the block, Ctrl-C (SIGINT) and SIGTERM (`kill`, a job scheduler, a container's stop) set `.asked` on
    the object it yields instead of stopping the process, so a training loop finishes its step and saves a
    checkpoint that matches its step count; a second Ctrl-C stops at once. Handlers put back after; outside the
    main thread, nothing changes."""
    stop = _Stop()

    def ask(signum, frame):
        if stop.asked and signum == signal.SIGINT:
            raise KeyboardInterrupt
        stop.asked, stop.signum = "interrupted" if signum == signal.SIGINT else "terminated", int(signum)

    try:
        before = {s: signal.signal(s, ask) for s in (signal.SIGINT, signal.SIGTERM)}
    except ValueError:  # not the main thread
        yield stop
        return
    try:
        yield stop
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)
