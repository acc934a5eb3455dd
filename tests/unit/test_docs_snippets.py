"""The Python and YAML blocks of README.md and docs/*.md are true as written. Every ```python block parses and is
either run as written by a test RUN names (tests/engine/test_library_docs.py and the like: a new block needs one), or
listed in NOT_RUN with the reason it cannot run in a test; every ```yaml block is a piece of models.yaml as
it stands (its presets' keys with the values models.yaml gives them), so a preset changed in the file and not in the
docs is caught."""

import ast
import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

# (page, a phrase the block holds): why the block is not run as written
NOT_RUN = {
    ("README.md", "gradio_client"): "needs the app served (python app.py); tests/app/test_app_client.py asks /generate",
    ("showcase.md", "specui-run-smollm2-chat-seed123.json"): "needs a run's JSON downloaded from the page; "
                                                             "tests/app/test_reproduce_chat_run.py runs its lines",
}
# (page, a phrase the block holds): the test that runs it as written
RUN = {
    ("README.md", "specui.load_engine()"):
        "tests/engine/test_library_docs.py::test_the_readmes_library_example_runs_as_written",
    ("engine.md", "specui.load_engine()"):
        "tests/engine/test_library_docs.py::test_the_chat_example_and_its_conversation_run_as_written",
    ("engine.md", "SpeculativeEngine(target, draft)"):
        "tests/engine/test_library_docs.py::test_the_own_models_example_runs_as_written",
    ("engine.md", "PromptCache()"):
        "tests/engine/test_library_docs.py::test_the_chat_example_and_its_conversation_run_as_written",
    ("drafters.md", "class Bigram"):
        "tests/unit/test_library_own_drafter.py::test_the_documented_bigram_drafter_runs_as_written",
}


def blocks(language):
    """(page name, first line number, text) of every fenced block of that language."""
    for page in PAGES:
        lines, start = page.read_text(encoding="utf-8").splitlines(), None
        for number, line in enumerate(lines, 1):
            if start is None and re.fullmatch(rf"\s*```{language}\s*", line):
                start, body = number, []
            elif start is not None and line.strip() == "```":
                yield page.name, start, "\n".join(body)
                start = None
            elif start is not None:
                body.append(line)


PYTHON = list(blocks("python"))


def known(page, text):
    """The RUN or NOT_RUN entries that name this block."""
    return [key for key in [*RUN, *NOT_RUN] if key[0] == page and key[1] in text]


@pytest.mark.parametrize(("page", "line", "text"), PYTHON, ids=[f"{p}:{n}" for p, n, _ in PYTHON])
def test_a_python_block_parses_and_is_run_or_says_why_not(page, line, text):
    ast.parse(text, filename=f"{page}:{line}")
    assert len(known(page, text)) == 1, (f"{page}:{line}: a ```python block that no test in RUN runs "
                                         f"(RUN) nor lists with a reason (NOT_RUN), or that two entries name")


def test_every_entry_names_a_block():
    named = {key for page, _, text in PYTHON for key in known(page, text)}
    assert named == set(RUN) | set(NOT_RUN)


@pytest.mark.parametrize("test", sorted(set(RUN.values())))
def test_the_tests_that_run_the_blocks_exist(test):
    path, name = test.split("::")
    assert f"\ndef {name}(" in (ROOT / path).read_text(encoding="utf-8"), f"{test} went: RUN names it"


def presets_in(block, presets):
    """The presets a ```yaml block is a piece of: the one it names, or, for keys alone, every preset that has them
    all with those values."""
    piece = yaml.safe_load(block)
    if set(piece) <= set(presets):
        return [(name, piece[name]) for name in piece]
    return [(name, piece) for name, preset in presets.items() if all(preset.get(k) == v for k, v in piece.items())][:1]


YAML = list(blocks("yaml"))


@pytest.mark.parametrize(("page", "line", "text"), YAML, ids=[f"{p}:{n}" for p, n, _ in YAML])
def test_a_yaml_block_is_models_yaml_as_it_stands(page, line, text):
    presets = yaml.safe_load((ROOT / "models.yaml").read_text(encoding="utf-8"))["presets"]
    found = presets_in(text, presets)
    assert found, f"{page}:{line}: no preset of models.yaml has these keys with these values:\n{text}"
    for name, piece in found:
        for key, value in piece.items():
            assert presets[name].get(key) == value, f"{page}:{line}: {name}.{key} is {presets[name].get(key)!r}"


def test_every_fenced_block_is_one_these_tests_read():
    """A block fenced ```py, ```python3 or ```yml is none of PYTHON's or YAML's: it would go unchecked, silently.
    Every fence opens as ```python, ```yaml, ```bash (test_docs_commands reads those) or bare (layout.md's map)."""
    odd = []
    for page in PAGES:
        fenced = False
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            fence = re.fullmatch(r"\s*(```|~~~)\s*(\S*).*", line)
            if fence and not fenced and fence.group(2) not in ("python", "yaml", "bash", ""):
                odd.append(f"{page.name}:{number}: {line.strip()}")
            fenced = fenced != bool(fence)
    assert not odd, "blocks fenced in a language no test reads:\n" + "\n".join(odd)
