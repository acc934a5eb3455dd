"""What a benchmark report keeps so that a number can be traced back and compared later (specui.bench.record): the
seed, the date, specui's commit, the prompts file's SHA-256 and the command, in the JSON and in the table's header."""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import sys
from datetime import datetime

import pytest

from specui.bench.cli import parse_args
from specui.bench.record import provenance
from specui.bench.report import run_line
from tests.helpers import ROOT


def test_the_report_records_the_seed_date_commit_and_prompts_it_ran(tmp_path):
    prompts = tmp_path / "mine.jsonl"
    prompts.write_text('{"prompt": "def f(x):"}\n', encoding="utf-8")
    argv = ["--prompts", str(prompts), "--temperature", "0.7"]  # sampled: the seed decides the tokens
    record = provenance(parse_args(argv), argv)
    assert record["seed"] == 0  # the default, which the command as typed does not show
    assert datetime.fromisoformat(record["date"]).tzinfo is not None
    assert record["prompts_sha256"] == hashlib.sha256(prompts.read_bytes()).hexdigest()
    assert record["command"] == "python -m specui.bench " + " ".join(argv)
    if (ROOT / ".git").exists():  # a checkout: its commit, and whether tracked files were changed from it
        assert re.fullmatch("[0-9a-f]{40}", record["commit"]) and isinstance(record["commit_modified"], bool)
    assert "prompts_sha256" not in provenance(parse_args([]), [])  # the built-in prompts are the commit's



def test_the_commit_and_date_are_the_runs_start(monkeypatch):
    """The commit was read when the report was written: a commit or checkout made during a long run was recorded as
    the code that ran. (The shared checkout's HEAD cannot move under a test: what the repository says later is
    stood in for.)"""
    from specui.bench import record

    args = parse_args([])
    at_start = provenance(args, [])
    monkeypatch.setattr(record, "commit", lambda: {"commit": "f" * 40, "commit_modified": True})
    later = provenance(args, [])
    assert (later["commit"], later["date"]) == (at_start["commit"], at_start["date"])


def test_the_prompts_hash_is_of_the_prompts_the_run_read(tmp_path):
    """The file was hashed when the report was written, minutes or hours after its prompts were read: one edited
    meanwhile (the next run's prompts) was recorded as the prompts measured, and one moved or deleted ended the run in
    a traceback (FileNotFoundError) before its table and JSON, every figure lost."""
    prompts = tmp_path / "mine.jsonl"
    prompts.write_text('{"prompt": "def f(x):"}\n', encoding="utf-8")
    read = hashlib.sha256(prompts.read_bytes()).hexdigest()
    argv = ["--prompts", str(prompts)]
    args = parse_args(argv)
    prompts.write_text('{"prompt": "def g(y):"}\n', encoding="utf-8")  # edited while the run goes on
    assert provenance(args, argv)["prompts_sha256"] == read
    prompts.unlink()  # or moved away
    assert provenance(args, argv)["prompts_sha256"] == read


def test_the_tables_header_says_the_seed_commit_and_date():
    r = {"seed": 3, "commit": "0123456789abcdef" * 2 + "01234567", "commit_modified": True,
         "date": "2026-12-07T10:00:00+00:00", "specui_version": "0.1.0"}
    assert run_line(r) == "seed 3, commit 0123456789ab with uncommitted changes, 2026-12-07T10:00:00+00:00"
    assert run_line({**r, "commit": None}) == "seed 3, specui 0.1.0 (not a git checkout), 2026-12-07T10:00:00+00:00"


@pytest.mark.slow
def test_a_reader_that_stops_early_ends_the_printing_not_the_report(tmp_path):
    """`python -m specui.bench --json r.json | head -1` with a reader gone before the table: no BrokenPipeError
    traceback, the JSON written (it was lost: the table is printed first), then exit status 141 as every command's
    (specui.command_line.READER_LEFT; it was 0 here, 1 in `python -m specui`)."""
    out = tmp_path / "r.json"
    cmd = [sys.executable, "-m", "specui.bench", "--preset", "bundled", "--num-prompts", "1", "--max-new-tokens", "2",
           "--repeats", "1", "--warmup", "0", "--cost-samples", "1", "--threads", "1", "--json", str(out)]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    proc.stdout.close()  # the reader is gone
    err = proc.stderr.read()
    assert proc.wait(timeout=300) == 141 and "Traceback" not in err and "BrokenPipe" not in err, err[-3000:]
    assert json.loads(out.read_text(encoding="utf-8"))["identical_to_plain"] is True


@pytest.mark.slow
def test_ctrl_c_keeps_the_prompts_measured_so_far(tmp_path, monkeypatch, capsys):
    """Ctrl-C during the second of three prompts: the table and the JSON hold the first (they were lost), both say
    the run was interrupted after 1 of 3 prompts, and the exit is still Ctrl-C's: status 130."""
    from specui.bench import run as bench_run
    from specui.bench.cli import main
    from specui.command_line import run

    prompts = tmp_path / "three.jsonl"
    prompts.write_text("".join(json.dumps({"prompt": f"def {name}(x):\n"}) + "\n" for name in "abc"), encoding="utf-8")
    real, calls = bench_run.Methods.run, []

    def ctrl_c_in_the_second_prompt(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == 5:  # 4 arms x 1 timed pass a prompt: the second prompt's first run
            os.kill(os.getpid(), signal.SIGINT)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(bench_run.Methods, "run", ctrl_c_in_the_second_prompt)
    out = tmp_path / "r.json"
    with pytest.raises(SystemExit) as exit_:
        run(main, "python -m specui.bench", ["--preset", "bundled", "--prompts", str(prompts), "--max-new-tokens", "2",
                                            "--repeats", "1", "--warmup", "0", "--cost-samples", "1", "--threads", "1",
                                            "--json", str(out)])
    assert exit_.value.code == 130 and len(calls) == 5
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["interrupted"] == "after 1 of 3 prompts" and report["num_prompts"] == len(report["rows"]) == 1
    assert report["identical_to_plain"] is True
    captured = capsys.readouterr()
    assert "INTERRUPTED (Ctrl-C) after 1 of 3 prompts" in captured.out and "1 prompt x 1 repeat" in captured.out
    assert captured.err.splitlines()[-1] == "python -m specui.bench: interrupted"
