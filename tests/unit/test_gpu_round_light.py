"""`python -m tools.gpu_round`'s argument mistakes answer before torch loads: it imported torch and transformers at
start (seconds, on a borrowed GPU's clock), as its draft-shape checks (specui.train.chat_shape) loaded the package's
`__init__`, which imported its command line and common code; the package's names are now imported on first use."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.helpers import ROOT

PROBE = ("import runpy, sys\nsys.argv = ['gpu_round', *sys.argv[1:]]\ntry:\n"
         "    runpy.run_module('tools.gpu_round', run_name='__main__', alter_sys=True)\nexcept SystemExit as e:\n"
         "    heavy = sorted({'torch', 'transformers'} & set(sys.modules))\n"
         "    print(e.code if isinstance(e.code, str) else '', file=sys.stderr)\n"  # SystemExit(message): exit 1
         "    print('exit', e.code if isinstance(e.code, int) else 1, heavy, file=sys.stderr)")


@pytest.mark.parametrize("argv, status, said", [
    (["--help"], 0, "--new-draft"),
    (["--out", "OUT", "--new-draft", "3"], 2, "--new-draft 3: expected LAYERS:TARGET_LAYERS"),
    (["--out", "OUT", "--draft-share", "2"], 2, "gpu_round.py: error: --draft-share must be in (0, 1], got 2.0"),
    (["--out", "OUT", "--no-draft", "--no-eagle", "--heads", "none"], 2,
     "gpu_round.py: error: --no-draft, --no-eagle and --heads none together leave nothing to train"),
    (["--out", "OUT", "--grow-draft", "2", "--new-draft", "2:0,1"], 2,
     "gpu_round.py: error: --grow-draft grows --init-draft; --new-draft starts another: say one of them"),
])
def test_the_gpu_rounds_argument_mistakes_answer_before_torch_loads(argv, status, said):
    out = subprocess.run([sys.executable, "-c", PROBE, *argv], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert said in out.stdout + out.stderr, out.stderr
    assert out.stderr.strip().splitlines()[-1] == f"exit {status} []", out.stderr


def test_the_train_packages_names_are_still_there():
    import specui.train as train
    from specui.train import TrainConfig, main, parse_args, train_tokenizer

    assert (train.TrainConfig, train.main, train.parse_args, train.train_tokenizer) == \
        (TrainConfig, main, parse_args, train_tokenizer)
    assert sorted(train.__all__) == ["TrainConfig", "main", "parse_args", "train_tokenizer"]
    assert set(train.__all__) <= set(dir(train))  # dir(), help() and completion list them too
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        train.nope  # noqa: B018
