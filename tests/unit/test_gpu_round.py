"""tools.gpu_round's plan: what the answer writers do in which order, and what comes back from the device."""

from __future__ import annotations

import json

import pytest

from tools import gpu_round


def test_greedy_answers_first_then_sampled_rounds_with_their_own_seeds():
    jobs = gpu_round.jobs(2)
    names = [name for name, _ in jobs]
    assert names[:7] == list(gpu_round.SETS) and len(names) == len(set(names)) == 21 and names[0] == "asked"
    for name, args in jobs:
        assert args[:2] == ["--prompt-set", name.split("-s")[0]]
        assert ("--sample" in args) == ("-s" in name)
    seeds = {args[args.index("--sample-seed") + 1] for _, args in jobs if "--sample" in args}
    assert seeds == {"1000", "2000"}


def test_the_results_come_back_as_at_most_eight_plain_files(tmp_path):
    work, out = tmp_path / "work", tmp_path / "out"
    for folder in (work / "draft" / "draft", work / "logs"):
        folder.mkdir(parents=True)
        (folder / "x.txt").write_text("x")
    gpu_round.finish({"phases": {}}, work, out)
    names = sorted(p.name for p in out.iterdir())
    assert names == ["draft.tar", "logs.tar", "round.json"] and json.loads((out / "round.json").read_text())


def test_the_answers_come_back_packed_and_go_in_again(tmp_path):
    """answers.tar.xz holds every answer file (not the trainers' checkpoints); unpacked, it is --answers-in."""
    import tarfile

    import torch

    work, out = tmp_path / "work", tmp_path / "out"
    for name in ("main/answers-00000.pt", "main-s1/sampled-00003.pt", "main-s1/argmax-sampled-00003.pt",
                 "draft/checkpoint.pt"):
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        torch.save([{"ids": torch.arange(5, dtype=torch.int32), "prompt_len": 2}], work / name)
    (work / "asked").mkdir()
    (work / "asked" / "prompts.txt").write_text("Why is the sky blue?\n")  # the prompts its writer resumes on
    gpu_round.finish({"phases": {}}, work, out)
    with tarfile.open(out / "answers.tar.xz") as tar:
        assert sorted(tar.getnames()) == ["answers/asked/prompts.txt", "answers/main-s1/argmax-sampled-00003.pt",
                                          "answers/main-s1/sampled-00003.pt", "answers/main/answers-00000.pt"]
        tar.extractall(tmp_path / "carried", filter="data")
    assert torch.load(tmp_path / "carried" / "answers" / "main" / "answers-00000.pt")[0]["prompt_len"] == 2
    (work / "heads" / "medusa").mkdir(parents=True)  # an earlier call's work folder, read as --answers-in
    torch.save({}, work / "heads" / "checkpoint.pt")
    taken = gpu_round.take_answers(work, tmp_path / "next")
    assert taken == {"main": 1, "main-s1": 1} and (tmp_path / "next" / "asked" / "prompts.txt").is_file()
    assert not (tmp_path / "next" / "draft").exists() and not (tmp_path / "next" / "heads").exists()


def test_a_big_archive_comes_back_in_parts_that_join_again(tmp_path):
    whole = tmp_path / "answers.tar.xz"
    data = bytes(range(256)) * 41
    whole.write_bytes(data)
    gpu_round.split(whole, 4096)
    parts = sorted(tmp_path.glob("answers.tar.xz.part*"), key=lambda p: int(p.name.rsplit("part", 1)[1]))
    assert not whole.exists() and len(parts) == 3 and all(p.stat().st_size <= 4096 for p in parts)
    assert b"".join(p.read_bytes() for p in parts) == data
    gpu_round.split(parts[-1], 4096)  # a file within the size stays as it is
    assert parts[-1].exists()


def test_the_draft_is_validated_on_greedy_answers_new_to_the_round(tmp_path):
    """Greedy answers repeat from round to round: the folder with the most new files goes last."""
    folders = []
    for name, files in (("main", 3), ("wide", 2), ("library", 4)):
        (tmp_path / name).mkdir()
        for i in range(files):
            (tmp_path / name / f"answers-{i:05d}.pt").write_bytes(b"")
        folders.append(str(tmp_path / name))
    assert [p.rsplit("/", 1)[1] for p in gpu_round.validation_last(folders, {})] == ["wide", "main", "library"]
    came_in = {"main": 1, "library": 4}  # library's four files all came from the last round
    assert [p.rsplit("/", 1)[1] for p in gpu_round.validation_last(folders, came_in)] == ["library", "wide", "main"]
    (tmp_path / "asked").mkdir()  # the target's own prompts: new to every draft, so they validate while they last
    (tmp_path / "asked" / "answers-00000.pt").write_bytes(b"")
    folders.append(str(tmp_path / "asked"))
    assert gpu_round.validation_last(folders, {})[-1].endswith("/asked")
    assert gpu_round.validation_last(folders, {"asked": 1})[-1].endswith("/library")


def test_writers_start_as_many_as_fit():
    import torch

    if not torch.cuda.is_available():
        assert gpu_round.writers_that_fit(6, 17.5) == 6
    else:
        assert 1 <= gpu_round.writers_that_fit(6, 17.5) <= 6


def test_eagle_reads_as_many_answers_as_the_card_holds():
    import torch

    if not torch.cuda.is_available():
        assert gpu_round.eagle_sequences_that_fit() == 30000
    else:  # 45% of an 80 GB H100 (79.2 GiB) at 250 tokens of 3,456 bytes: about 44,000 answers
        total = torch.cuda.get_device_properties(0).total_memory
        assert gpu_round.eagle_sequences_that_fit() == int(0.45 * total // 864000)
    assert gpu_round.parse_args(["--out", "o"]).eagle_sequences == 0  # the default asks the card


def refused(argv: list[str], capsys) -> str:
    """What `gpu_round.main(argv)` said as argparse refuses it (its form, exit status 2)."""
    with pytest.raises(SystemExit) as exit:
        gpu_round.main(argv)
    assert exit.value.code == 2
    return capsys.readouterr().err


def test_a_round_that_would_train_nothing_is_refused(tmp_path, capsys):
    assert "error: --no-draft, --no-eagle and --heads none together leave nothing to train" in refused(
        ["--out", str(tmp_path / "out"), "--work", str(tmp_path / "work"), "--no-draft", "--no-eagle", "--heads",
         "none"], capsys)
    assert not (tmp_path / "out").exists()


def test_the_medusa_and_early_exit_heads_train_warm_and_come_back_in_one_file(tmp_path):
    """Beside EAGLE, by default: warm from the shipped heads, keeping their draft vocabulary; heads.tar holds both."""
    import tarfile

    args = gpu_round.parse_args(["--out", str(tmp_path)])
    command = gpu_round.heads_command(args, "a,b", tmp_path / "heads", minutes=4.5, batch="32")
    assert command[command.index("--head") + 1] == "medusa,early_exit" and "--vocab" not in command
    assert command[command.index("--init") + 1] == "assets/smollm2-heads" and command[command.index("--answers") + 1] == "a,b"
    assert command[command.index("--minutes") + 1] == "4.50" and command[command.index("--states") + 1] == "none"
    assert gpu_round.parse_args(["--out", str(tmp_path), "--heads", "none"]).heads == "none"
    work, out = tmp_path / "work", tmp_path / "out"
    for head in ("medusa", "early_exit"):
        (work / "heads" / head).mkdir(parents=True)
        (work / "heads" / head / "specui_head.json").write_text("{}")
    (work / "heads" / "checkpoint.pt").write_bytes(b"not carried")
    gpu_round.finish({"phases": {}}, work, out)
    assert sorted(p.name for p in out.iterdir()) == ["heads.tar", "round.json"]
    with tarfile.open(out / "heads.tar") as tar:
        assert sorted(tar.getnames()) == ["early_exit", "early_exit/specui_head.json", "medusa", "medusa/specui_head.json"]


def test_the_draft_trainer_continues_the_shipped_draft_or_starts_a_new_shape(tmp_path, capsys):
    def command(*flags):
        args = gpu_round.parse_args(["--out", str(tmp_path), *flags])
        return gpu_round.draft_command(args, "a,b", tmp_path / "draft", minutes=3.0, batch="32", every="100",
                                       val="128", alpha="128")

    go_on = command()
    assert go_on[go_on.index("--init-draft") + 1] == "assets/smollm2-draft" and "--drafts" not in go_on
    assert go_on[go_on.index("--lr") + 1] == "3e-4" and go_on[go_on.index("--max-minutes") + 1] == "3.00"
    assert "--new-vocab" in go_on and go_on[go_on.index("--vocab") + 1] == "8192"  # the draft's list picked afresh
    assert "--new-vocab" not in command("--draft-vocab", "0") and "--vocab" not in command("--draft-vocab", "0")
    new = command("--new-draft", "3:0,1,2")
    assert new[new.index("--drafts") + 1] == "3:0,1,2" and "--init-draft" not in new
    assert new[new.index("--lr") + 1] == "1e-3" and new[new.index("--answers") + 1] == "a,b"
    grown = command("--grow-draft", "2,3")  # the shipped draft, two layers more
    assert grown[grown.index("--grow") + 1] == "2,3"
    assert grown[grown.index("--init-draft") + 1] == "assets/smollm2-draft"
    assert "--grow" not in go_on
    assert "--hard-labels" in go_on and "--on-the-fly" not in go_on  # the greedy answers' tokens, by default
    assert "--label-sampled" in go_on  # and the target's greedy tokens at the sampled answers' positions
    soft = command("--draft-labels", "soft")
    assert "--on-the-fly" in soft and "--hard-labels" not in soft
    assert "say one of them" in refused(["--out", str(tmp_path), "--grow-draft", "2", "--new-draft", "3:0,1,2"], capsys)


def test_the_draft_may_stop_early_and_leave_the_card_to_eagle():
    assert gpu_round.trainer_minutes(6.0, 1.0) == (5.4, 4.5)  # side by side to the end, as before
    draft, eagle = gpu_round.trainer_minutes(6.0, 0.5)
    assert draft == 2.7 and eagle == 4.5  # then EAGLE alone for the rest
    assert gpu_round.trainer_minutes(0.5, 1.0) == (0.05, 0.05)  # never a negative or zero time


def test_the_carries_split_the_model_so_both_calls_fit():
    """tools.gpu_carry: call 1 takes what room the draft, heads and wheel leave; call 2 the rest, or it refuses."""
    from tools import gpu_carry

    mib = 2**20
    first = gpu_carry.first_part_bytes(tree=2 * mib, held=29 * mib, wheel=mib // 8, total=90 * mib)
    room = gpu_carry.CARRY_BYTES - gpu_carry.MARGIN - 2 * mib
    assert 0 < first and first + 29 * mib + mib // 8 <= room and 90 * mib - first <= room
    with pytest.raises(SystemExit, match="do not fit"):
        gpu_carry.first_part_bytes(tree=20 * mib, held=29 * mib, wheel=0, total=90 * mib)


def test_the_tracked_answers_travel_once_not_in_both_trees():
    """tools/gpu_answers.tar.xz is tracked but counted (and truncated) with the assets: .gpu2 carries its copy."""
    from tools import gpu_carry

    everything = gpu_carry.tracked_bytes(gpu_carry.ROOT, empty=("assets/",))
    assert gpu_carry.tracked_bytes(gpu_carry.ROOT) == everything - gpu_carry.ANSWERS.stat().st_size


def test_the_device_calls_fit_its_command_limit_and_resume_answers_only_when_carried():
    from tools import gpu_carry

    (one, first), (two, second) = gpu_carry.calls("--budget 572 --gen-seconds 200")
    assert (one, two) == (".gpu1", ".gpu2")
    assert "--answers-in" not in second and "--target /tmp/site" in first and "tools.gpu_round --budget 572" in second
    (_, first), (_, second) = gpu_carry.calls("--budget 572 --gen-seconds 200 --new-draft 3:0,1,2", "with-round")
    assert "tar xf .gpu2/answers.tar.xz" in second and "--answers-in /tmp/ain/answers" in second
    assert max(len(first), len(second)) < 2000
    plan = gpu_carry.calls("--budget 572", "own")  # answers too big for .gpu2: a call of their own before the round
    assert [name for name, _ in plan] == [".gpu1", gpu_carry.ANSWERS_CALL, ".gpu2"]
    assert "tar xf .gpua/answers.tar.xz -C /tmp/ain" in plan[1][1]
    assert "answers.tar.xz" not in plan[2][1] and "--answers-in /tmp/ain/answers" in plan[2][1]


def test_a_third_call_continues_the_rounds_heads_from_what_the_round_left_on_the_device():
    """The call after the round carries nothing: it reads the round's --work folder (ignored, kept between calls) and
    /tmp, so it is ready before the round ends; a further one reads that call's folder."""
    from tools import gpu_carry

    command = gpu_carry.continuation(240, timing=0)
    assert "rm -rf assets/smollm2-heads/eagle && cp -r runs/gpu/eagle/eagle assets/smollm2-heads/" in command
    assert "if [ -d runs/gpu/heads/medusa ] && [ -d runs/gpu/heads/early_exit ]" in command
    assert "--budget 240 --gen-seconds 0 --no-draft --heads $H --answers-in runs/gpu --out $OUT --work runs/gpu3" \
        in command
    assert "timeout 252 " in command and " .gpu" not in command and len(command) < 2000  # nothing carried
    assert "--answers-in runs/gpu3 --out $OUT --work runs/gpu4" in gpu_carry.continuation(100, "runs/gpu3", "runs/gpu4")


def test_the_third_call_ends_by_timing_eagle_on_the_gpu(tmp_path):
    """By default the call's last 100 s time EAGLE's chain and a 16-node tree on the GPU (the round's head against
    the one the call trained), after the heads are saved, whatever became of them; the whole call stays in budget."""
    import subprocess

    from tools import gpu_carry

    command = gpu_carry.continuation(240)
    assert "timeout 152 python3 -m tools.gpu_round --budget 140 " in command and len(command) < 2000
    train, timing = command.split("--work runs/gpu3; ", 1)
    assert "timeout 100 python3 -u -m tools.assets_ab --prompts 4 --passes 1 $E" in timing
    assert "> $OUT/gpu-timing.txt 2>&1" in timing
    # what the shell hands the tool, with and without the call's own head (printf stands in for python3)
    for trained in (False, True):
        if trained:
            (tmp_path / "runs/gpu3/eagle/eagle").mkdir(parents=True)
        script = "OUT=out && mkdir -p out && " + timing.replace("python3 -u -m tools.assets_ab", "printf '%s\\n'")
        subprocess.run(["bash", "-c", script], cwd=tmp_path, check=True)
        args = (tmp_path / "out/gpu-timing.txt").read_text().splitlines()
        assert ("--eagle" in args) == trained and args[args.index("--arm") + 1] == '{"drafter": "eagle"}'
        assert json.loads(args[-1]) == {"drafter": "eagle", "k": 6, "tree_width": 4, "tree_nodes": 16, "confidence": 0}
    assert set(gpu_round.RESULTS) >= {"draft", "eagle", "heads", "logs"}  # not read as answer folders


def test_the_rounds_answers_so_far_are_kept_for_the_next_round(tmp_path):
    """tools/gpu_answers.tar.xz, carried in by default: answer folders of token ids that --answers-in reads."""
    import tarfile

    import torch

    from tools import gpu_carry

    assert gpu_carry.parse_args([]).answers == str(gpu_carry.ANSWERS) and gpu_carry.ANSWERS.is_file()
    with tarfile.open(gpu_carry.ANSWERS) as tar:
        names = tar.getnames()
        assert all(n.startswith("answers/") for n in names) and "answers/asked/prompts.txt" in names
        member = next(n for n in names if n.endswith(".pt"))
        tar.extract(member, tmp_path, filter="data")
    records = torch.load(tmp_path / member)
    assert records and records[0]["ids"].dtype in (torch.int16, torch.int32, torch.int64) and records[0]["prompt_len"] > 0


@pytest.mark.parametrize("tiny", [False, True])
def test_every_command_the_round_spawns_passes_its_trainers_checks(tmp_path, tiny):
    """The trainers refuse bad numbers up front (stop 87): each command the round builds must parse (a refusal would
    cost a lent GPU's round, found only on the device)."""
    from specui.train import chat, heads

    args = gpu_round.parse_args(["--out", str(tmp_path), *(["--tiny"] if tiny else [])])
    batch, every, val, alpha = ("4", "2", "2", "8") if tiny else ("32", "100", "128", "128")
    answers = ",".join(str(tmp_path / d) for d in ("a", "b"))  # the answer folders the writers left
    for d in ("a", "b"):
        (tmp_path / d).mkdir()
        (tmp_path / d / "answers-00000.pt").write_bytes(b"")  # parsing looks for them, reading comes later
    for left in ("draft/draft", "draft/checkpoint.pt", "eagle/eagle", "heads/medusa", "heads/checkpoint.pt"):
        (tmp_path / left).parent.mkdir(parents=True, exist_ok=True)  # an earlier call's on a warm machine: replaced
        (tmp_path / left).mkdir() if "." not in left else (tmp_path / left).write_bytes(b"")
    for name, extra in gpu_round.jobs(2):
        command = gpu_round.writer_command(args, tmp_path / name, extra, minutes=0.01)
        chat.parse_args(command[command.index("specui.train.chat") + 1:])
    for flags in ([], ["--new-draft", "3:0,1,2"], ["--grow-draft", "2,3"], ["--draft-labels", "soft"]):
        draft_args = gpu_round.parse_args(["--out", str(tmp_path), *flags])
        command = gpu_round.draft_command(draft_args, answers, tmp_path / "draft", minutes=0.01, batch=batch,
                                          every=every, val=val, alpha=alpha)
        chat.parse_args(command[command.index("specui.train.chat") + 1:])
    for command in (gpu_round.head_command(args, answers, tmp_path / "eagle", head="eagle", sequences=30000,
                                           lr="3e-4", minutes=0.01, batch=batch, vocab=8192),
                    gpu_round.heads_command(args, answers, tmp_path / "heads", minutes=0.01, batch=batch)):
        heads.parse_args(command[command.index("heads") + 1:])
