"""The layering, read from the source: no module outside specui/ui imports the UI, gradio or plotly,
and no import cycle exists among specui's modules (imports inside functions count)."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.helpers import ROOT

PACKAGE = ROOT / "specui"
UI_ONLY = ("gradio", "gradio_client", "plotly")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path, name: str | None = None) -> set[str]:
    """Every module `path` imports, anywhere in the file (relative imports resolved)."""
    name = name or module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            found.add(base)
            found |= {f"{base}.{a.name}" for a in node.names}  # `from specui import lesson` imports specui.lesson
    return found


def graph() -> dict[str, set[str]]:
    modules = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    edges = {}
    for name, path in modules.items():
        targets = set()
        for imported in imports(path):
            while imported and imported not in modules:  # specui.events.Kind -> specui.events
                imported = imported.rpartition(".")[0]
            if imported and imported != name:
                targets.add(imported)
        edges[name] = targets
    return edges


def test_nothing_outside_the_ui_imports_it_or_gradio_or_plotly():
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        name = module_name(path)
        if name == "specui.ui" or name.startswith("specui.ui."):
            continue
        for imported in imports(path):
            top = imported.split(".")[0]
            if top in UI_ONLY or imported == "specui.ui" or imported.startswith("specui.ui."):
                offenders.append(f"{name} imports {imported}")
    assert not offenders, offenders


def test_no_import_cycles():
    edges = graph()
    state: dict[str, int] = {}  # 1: on the path, 2: done
    cycles = []

    def visit(node, path):
        state[node] = 1
        for nxt in sorted(edges.get(node, ())):
            if nxt == "specui" or nxt.startswith(node + "."):  # a package's __init__ re-exporting its own modules
                continue
            if state.get(nxt) == 1:
                cycles.append(path[path.index(nxt):] + [nxt] if nxt in path else [node, nxt])
            elif state.get(nxt) is None:
                visit(nxt, path + [nxt])
        state[node] = 2

    for node in sorted(edges):
        if state.get(node) is None:
            visit(node, [node])
    assert not cycles, cycles


def test_the_checker_sees_imports_inside_functions(tmp_path):
    source = tmp_path / "m.py"
    source.write_text("def f():\n    import gradio\n    from specui.ui import stats\n")
    assert {"gradio", "specui.ui", "specui.ui.stats"} <= imports(source, "specui.m")
