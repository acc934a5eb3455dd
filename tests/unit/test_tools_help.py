"""The scripts under tools/, as a contributor first meets them: every `python -m tools.NAME --help` answers with its
usage, every name a tool imports from specui or tools (inside its functions too, where most import after parsing
their flags) still exists where the tool looks for it, and docs/layout.md names every tool. Nothing here loads a
model: a library module moved or renamed under a tool fails here in seconds, where it failed only on the tool's
first real run before."""

from __future__ import annotations

import ast
import importlib
import runpy
import sys

import pytest

from tests.helpers import ROOT

TOOLS = sorted(p.stem for p in (ROOT / "tools").glob("*.py") if p.stem != "__init__")
LIBRARIES = {"race"}  # imported by the side-by-side tools, with no command line of its own


def has_main_block(name: str) -> bool:
    source = (ROOT / "tools" / f"{name}.py").read_text(encoding="utf-8")
    return 'if __name__ == "__main__":' in source


def imported_names(name: str) -> list[tuple[int, str, str | None]]:
    """(line, module, name or None) of every import of specui or tools in tools/NAME.py, anywhere in the file."""
    found = []
    for node in ast.walk(ast.parse((ROOT / "tools" / f"{name}.py").read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name, None) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            found += [(node.lineno, node.module, a.name) for a in node.names]
    return [f for f in found if f[1].split(".")[0] in ("specui", "tools")]


def test_every_tool_has_a_command_line_but_the_libraries():
    assert {name for name in TOOLS if not has_main_block(name)} == LIBRARIES


@pytest.mark.parametrize("name", TOOLS)
def test_every_name_a_tool_imports_exists(name):
    missing = []
    for line, module, attr in imported_names(name):
        try:
            found = importlib.import_module(module)
        except ImportError as e:
            missing.append(f"tools/{name}.py:{line}: {module} ({e})")
            continue
        if attr is not None and not hasattr(found, attr):
            try:  # `from specui import heads`: a submodule not yet imported
                importlib.import_module(f"{module}.{attr}")
            except ImportError:
                missing.append(f"tools/{name}.py:{line}: {module} has no {attr}")
    assert not missing, missing


@pytest.mark.filterwarnings("ignore:.*found in sys.modules:RuntimeWarning")  # a tool another tool imported
@pytest.mark.parametrize("name", sorted(set(TOOLS) - LIBRARIES))
def test_every_tool_answers_help(name, capsys, monkeypatch):
    monkeypatch.setattr(sys, "argv", [f"tools/{name}.py", "--help"])
    with pytest.raises(SystemExit) as exit_:
        runpy.run_module(f"tools.{name}", run_name="__main__")  # what python -m tools.NAME --help runs
    assert exit_.value.code in (0, None)
    out = capsys.readouterr().out
    assert out.startswith("usage:"), out[:300]


def test_the_layout_names_every_tool():
    layout = (ROOT / "docs" / "layout.md").read_text(encoding="utf-8")
    assert [name for name in TOOLS if f"{name}.py" not in layout] == []


def test_the_import_reader_sees_imports_inside_functions():
    assert ("specui.presets", "load_config") in {(m, a) for _, m, a in imported_names("cold_products")}  # in main()
