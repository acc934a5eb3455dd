"""The scripts under tools/, as a contributor first meets them: every `python -m tools.NAME --help` answers with its
usage, every name a tool imports from specui or tools (inside its functions too, where most import after parsing
their flags), or reads off a module it imported (`native.kernel`), still exists where the tool looks for it, and
docs/layout.md names every tool. Nothing here loads a model: a library module moved or renamed under a tool fails
here in seconds, where it failed only on the tool's first real run before. And every --flag README.md, docs/*.md
and the tools' own docstrings give a `python -m tools.NAME` is one of that tool's options."""

from __future__ import annotations

import argparse
import ast
import importlib
import re
import runpy
import sys
import types

import pytest

from tests.helpers import ROOT
from tests.unit.test_docs_names import resolves

TOOLS = sorted(p.stem for p in (ROOT / "tools").glob("*.py") if p.stem != "__init__")
LIBRARIES = {"race"}  # imported by the side-by-side tools, with no command line of its own
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "tools").glob("*.py"))]
COMMAND = re.compile(r"python -m tools\.(\w+)([^`|#\n]*)")
QUOTED = re.compile(r"\"[^\"]*(?:\"|$)|'[^']*(?:'|$)")  # another command's flags or JSON in a quoted value


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


def attributes_read(name: str) -> list[tuple[int, str]]:
    """(line, dotted name) of every name read off one an import of specui or tools bound in tools/NAME.py:
    `native.kernel()` after `from specui import native` reads `specui.native.kernel`, `specui.lean.X` after
    `import specui` reads it whole. A local that shadows such a name would be read as it (none does today)."""
    tree = ast.parse((ROOT / "tools" / f"{name}.py").read_text(encoding="utf-8"))
    bound = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            bound |= {a.asname: a.name for a in node.names if a.asname}  # import specui.x as y
            bound |= {a.name.split(".")[0]: a.name.split(".")[0] for a in node.names if not a.asname}  # binds specui
        elif isinstance(node, ast.ImportFrom) and not node.level:
            bound |= {a.asname or a.name: f"{node.module}.{a.name}" for a in node.names}
    found = []
    for node in ast.walk(tree):
        chain, inner = [], node
        while isinstance(inner, ast.Attribute):
            chain, inner = [inner.attr, *chain], inner.value
        if chain and isinstance(inner, ast.Name) and bound.get(inner.id, "").split(".")[0] in ("specui", "tools"):
            found.append((node.lineno, ".".join([bound[inner.id], *chain])))
    return found


def lacks(dotted: str) -> str | None:
    """What `specui.a.b.c` lacks, read for as long as each part is a module (an object's attributes are its own
    business: a module's global may be None until a call sets it); None when nothing."""
    parts = dotted.split(".")
    found = importlib.import_module(parts[0])
    for i, part in enumerate(parts[1:], 1):
        if not isinstance(found, types.ModuleType):
            return None
        try:
            found = getattr(found, part) if hasattr(found, part) else importlib.import_module(".".join(parts[:i + 1]))
        except ImportError:
            return f"{'.'.join(parts[:i])} has no {part}"
    return None


def run_help(name: str, monkeypatch) -> None:
    monkeypatch.setattr(sys, "argv", [f"tools/{name}.py", "--help"])
    with pytest.raises(SystemExit) as exit_:
        runpy.run_module(f"tools.{name}", run_name="__main__")  # what python -m tools.NAME --help runs
    assert exit_.value.code in (0, None)


def documented_flags() -> list[tuple[str, str, str]]:
    """(where, tool, --flag) of every flag written after a `python -m tools.NAME` on one line of a page."""
    found = []
    for page in PAGES:
        for i, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            for m in (m for m in COMMAND.finditer(line) if m.group(1) in TOOLS):  # not tools.NAME
                for flag in re.findall(r"(?<![\w-])--[a-z][\w-]*", QUOTED.sub("", m.group(2))):
                    found.append((f"{page.relative_to(ROOT)}:{i}", m.group(1), flag))
    return found


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
    missing += [f"tools/{name}.py:{line}: {lacked}"
                for line, dotted in attributes_read(name) if (lacked := lacks(dotted))]
    assert not missing, missing


@pytest.mark.filterwarnings("ignore:.*found in sys.modules:RuntimeWarning")  # a tool another tool imported
@pytest.mark.parametrize("name", sorted(set(TOOLS) - LIBRARIES))
def test_every_tool_answers_help(name, capsys, monkeypatch):
    run_help(name, monkeypatch)
    out = capsys.readouterr().out
    assert out.startswith("usage:"), out[:300]


def tool_options(name: str, monkeypatch) -> set[str]:
    """Every option string of tools.NAME's parser (`-h`, `--help`, `--runs`...), from the parser its --help prints.
    argparse keeps them in `_option_string_actions`, a private name (there since argparse came into the standard
    library), but the one its own parsing reads: were it renamed, this fails as an AttributeError, never passes."""
    printed = []
    with monkeypatch.context() as patch:
        patch.setattr(argparse.ArgumentParser, "print_help", lambda parser, file=None: printed.append(parser))
        run_help(name, patch)
    assert printed, f"python -m tools.{name} --help printed no parser's help"
    return set(printed[-1]._option_string_actions)


@pytest.mark.filterwarnings("ignore:.*found in sys.modules:RuntimeWarning")
def test_every_documented_flag_of_a_tool_is_one_of_its_options(monkeypatch):
    flags = documented_flags()
    options = {tool: tool_options(tool, monkeypatch) for tool in sorted({tool for _, tool, _ in flags})}
    unknown = [f"{where}: tools.{tool} {flag}" for where, tool, flag in flags if flag not in options[tool]]
    assert len(flags) > 100  # the pages' commands are read at all
    assert not unknown, unknown


def test_every_name_and_path_a_tools_text_gives_exists():
    """`specui.loading.give_back_memory`, `tools/gpu_answers.tar.xz` in a docstring or comment: as the docs' own."""
    missing = []
    for name in TOOLS:
        text = (ROOT / "tools" / f"{name}.py").read_text(encoding="utf-8")
        missing += [f"tools/{name}.py: {d}" for d in sorted(set(re.findall(r"\bspecui(?:\.\w+)+", text)))
                    if not resolves(d)]
        missing += [f"tools/{name}.py: {path}" for path in sorted(set(re.findall(
            r"(?<![\w/.])((?:specui|tools|tests|assets)/[\w./-]*\w)", text))) if not (ROOT / path).exists()]
    assert not missing, missing


def test_the_layout_names_every_tool():
    layout = (ROOT / "docs" / "layout.md").read_text(encoding="utf-8")
    assert [name for name in TOOLS if f"{name}.py" not in layout] == []


def test_the_attribute_reader_reads_a_module_imported_whole():
    read = {dotted for _, dotted in attributes_read("threads_ab")}  # from specui import native; native.kernel()
    assert "specui.native.kernel" in read and lacks("specui.native.kernel") is None
    assert lacks("specui.native.no_such_kernel") == "specui.native has no no_such_kernel"


def test_the_import_reader_sees_imports_inside_functions():
    assert ("specui.presets", "load_config") in {(m, a) for _, m, a in imported_names("cold_products")}  # in main()
