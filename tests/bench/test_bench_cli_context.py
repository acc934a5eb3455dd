"""python -m specui.bench's command line and the target's context: prompts that with --max-new-tokens overflow it are
refused in one line that names the flag to change, before torch loads where the flags give their length (the built-in
stdlib prompts), else once they are tokenized; the engine and the early refusal say it from one place."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.helpers import ROOT

BUNDLED = ROOT / "assets" / "specui-target" / "config.json"


def test_prompts_longer_than_the_context_are_one_line_before_torch_loads():
    """The built-in stdlib prompts are --prompt-tokens long: with --max-new-tokens they overflow the target's context
    (its config.json's), refused in the engine's words before torch and the pair load (it was after both, and after
    the prompts' scan and the cost measure: minutes), with the flag that shortens them (it said 'shorten the prompt'
    of prompts the user did not write)."""
    watch = ("import atexit, runpy, sys; atexit.register(lambda: print('torch loaded:', 'torch' in sys.modules, "
             "file=sys.stderr)); runpy.run_module('specui.bench', run_name='__main__')")
    out = subprocess.run([sys.executable, "-c", watch, "--preset", "bundled", "--num-prompts", "1", "--repeats", "1",
                          "--warmup", "0", "--max-new-tokens", "5000"], cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr  # as python -m specui's (it was 1)
    assert "python -m specui.bench: error: the prompt (128 tokens) plus --max-new-tokens (5000) is 5128 tokens, " \
           "more than the target model's context of 1024; lower --prompt-tokens or lower --max-new-tokens" in out.stderr
    assert "torch loaded: False" in out.stderr


@pytest.mark.skipif(not BUNDLED.exists(), reason="the bundled pair")
def test_a_prompts_files_prompt_too_long_is_refused_in_the_flags_words(tmp_path, capsys):
    """A --prompts file's prompt is tokenized after the pair loads, then checked against the context: refused in one
    line naming --max-new-tokens, as the early refusal and python -m specui say it (it said max_new_tokens)."""
    from specui.bench.cli import main

    prompts = tmp_path / "long.jsonl"
    prompts.write_text(json.dumps({"prompt": "def f(x):\n    return x\n" * 40}) + "\n", encoding="utf-8")
    with pytest.raises(SystemExit) as exit_:
        main(["--preset", "bundled", "--prompts", str(prompts), "--max-new-tokens", "1000", "--threads", "1"])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert exit_.value.code == 2 and err.startswith("python -m specui.bench: error: the prompt ("), err
    assert err.endswith("tokens, more than the target model's context of 1024; shorten the prompt or lower "
                        "--max-new-tokens") and " plus --max-new-tokens (1000) is " in err, err


def test_a_prompt_the_context_cannot_take_is_refused_only_where_the_flags_say_its_length(tmp_path):
    """The early refusal reads a folder's config.json, and only for the built-in stdlib prompts, whose length the
    flags give: a chat preset's prompts, a --prompts file's and --turns' are tokenized first (checked after loading,
    before the costs are measured), and a Hub id or a config without a context is left to the engine."""
    from specui.bench.flags import parse_args
    from specui.bench.preflight import checked_preset, folder_context
    from tests.helpers import BUNDLED_TARGET

    assert folder_context(str(BUNDLED_TARGET.parent)) == 1024
    assert folder_context("HuggingFaceTB/SmolLM2-135M-Instruct") is None and folder_context(None) is None
    (tmp_path / "config.json").write_text('{"n_positions": 64}')
    assert folder_context(str(tmp_path)) is None
    assert checked_preset(parse_args(["--preset", "bundled", "--max-new-tokens", "896"])).name == "bundled"  # 1024
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"prompt": "a"}\n', encoding="utf-8")
    assert checked_preset(parse_args(["--preset", "bundled", "--max-new-tokens", "5000", "--prompts", str(prompts)]))
    with pytest.raises(SystemExit, match="^2$"):
        checked_preset(parse_args(["--preset", "bundled", "--max-new-tokens", "897"]))
    with pytest.raises(SystemExit, match="^2$"):
        checked_preset(parse_args(["--preset", "bundled", "--max-new-tokens", "1000", "--prompt-tokens", "25"]))


def test_the_engine_and_the_early_refusal_say_an_overflow_from_one_place(monkeypatch, capsys):
    """The overflow's words are written once, torch-free (specui.settings.context_overflow): the engine's
    check_context and the benchmark's refusal before torch both say what it says, so they cannot drift apart."""
    from types import SimpleNamespace

    from specui import settings
    from specui.bench.flags import parse_args
    from specui.bench.preflight import checked_preset
    from specui.engine_checks import ContextLengthError, check_context

    monkeypatch.setattr(settings, "context_overflow", lambda *a: f"one place {a}")
    model = SimpleNamespace(config=SimpleNamespace(max_position_embeddings=1024))
    with pytest.raises(ContextLengthError, match=r"^one place \(128, 5000, 1024, 'target'\)$"):
        check_context(128, 5000, target=model)
    with pytest.raises(SystemExit, match="^2$"):
        checked_preset(parse_args(["--preset", "bundled", "--max-new-tokens", "5000"]))
    assert "error: one place (128, 5000, 1024" in capsys.readouterr().err

