"""tools.gpu_round's plan: what the answer writers do in which order, and what comes back from the device."""

from __future__ import annotations

import json

from tools import gpu_round


def test_greedy_answers_first_then_sampled_rounds_with_their_own_seeds():
    jobs = gpu_round.jobs(2)
    names = [name for name, _ in jobs]
    assert names[:5] == list(gpu_round.SETS) and len(names) == len(set(names)) == 15
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
