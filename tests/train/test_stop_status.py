"""A training run stopped by Ctrl-C or SIGTERM ends with the shell's status for the signal (130, 143), not a failure's
1, so a script or a scheduler (slurm, systemd, `timeout`) tells a stop it can resume from a failure: the heads trainer
as a real process under SIGTERM (the in-process tests of each trainer: test_heads_mistakes.py, test_chat_mistakes.py,
test_exit_training.py)."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time

import pytest

from tests.helpers import ROOT
from tests.train.test_heads_mistakes import TOKENIZER, _tiny


@pytest.mark.slow
@pytest.mark.skipif(not (TOKENIZER / "tokenizer.json").exists(), reason="the bundled tokenizer is absent")
def test_sigterm_to_the_heads_command_saves_and_exits_143(tmp_path):
    _tiny(tmp_path / "tiny", 32)
    config = tmp_path / "models.yaml"
    config.write_text(f"default: mine\npresets:\n  mine:\n    target: {tmp_path / 'tiny'}\n")
    out = tmp_path / "run"
    run = subprocess.Popen([sys.executable, "-m", "specui.train", "heads", "--config", str(config), "--out", str(out),
                            "--windows", "12", "--seq", "32", "--batch", "2", "--vocab", "64", "--threads", "1",
                            "--head", "medusa", "--checkpoint-every", "1", "--minutes", "10"],
                           cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 240
        while not (out / "checkpoint.pt").exists() and run.poll() is None and time.time() < deadline:
            time.sleep(0.2)  # the first checkpoint: the training loop runs
        run.send_signal(signal.SIGTERM)
        _, err = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 143, err
    assert re.fullmatch(rf"terminated at step \d+: checkpoint saved in {re.escape(str(out / 'checkpoint.pt'))}; the "
                        "same command with --resume goes on from it", err.strip().splitlines()[-1])

