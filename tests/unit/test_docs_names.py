"""What README.md and docs/*.md name exists under that name: every path of the repository they give in code
(`specui/x.py`, `tools/y.py`, `tests/z/`), every dotted name of specui (`specui.cache_pool.PromptCaches`), every
SPECUI_ environment variable (read by specui, tools/ or app.py), and docs/layout.md, the file-by-file map, names
every module of specui/ (a new one is placed on the map)."""

import importlib
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
PATH = re.compile(r"^(?:specui|tools|tests|assets|\.ci)/[\w./*-]*\w[\w*]*/?$")
DOTTED = re.compile(r"^specui(?:\.\w+)+$")


def spans():
    """(page, inline code span) of every page."""
    for page in PAGES:
        for span in re.findall(r"`([^`\n]+)`", page.read_text(encoding="utf-8")):
            yield page.name, span.strip()


def resolves(dotted):
    """Whether `specui.a.b.C` is a module, or an attribute of the longest importable module it starts with."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            found = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for name in parts[i:]:
            if not hasattr(found, name):
                return False
            found = getattr(found, name)
        return True
    return False


def test_every_path_named_in_code_exists():
    missing = [f"{page}: {span}" for page, span in spans()
               if PATH.match(span) and not any(ROOT.glob(span.rstrip("/")))]
    assert not missing, "\n".join(missing)


def test_every_dotted_name_of_specui_resolves():
    missing = sorted({f"{page}: {span}" for page, span in spans() if DOTTED.match(span) and not resolves(span)})
    assert not missing, "\n".join(missing)


def test_the_layout_names_every_module_of_specui():
    layout = (ROOT / "docs" / "layout.md").read_text(encoding="utf-8")
    modules = [path.name for path in (ROOT / "specui").glob("*") if path.suffix in (".py", ".c", ".h")
               and path.name != "__init__.py"]
    missing = [name for name in sorted(modules) if not re.search(rf"(?<![\w.]){re.escape(name)}\b", layout)]
    assert not missing, f"docs/layout.md does not place {', '.join(missing)}"


def test_every_environment_variable_named_is_read_by_specui():
    code = "\n".join(path.read_text(encoding="utf-8", errors="replace") for folder in ("specui", "tools")
                     for path in (ROOT / folder).rglob("*") if path.suffix in (".py", ".c", ".h"))
    code += (ROOT / "app.py").read_text(encoding="utf-8")
    named = {name for page in PAGES for name in re.findall(r"\bSPECUI_[A-Z0-9_]*[A-Z0-9]", page.read_text("utf-8"))}
    missing = sorted(name for name in named if not re.search(rf"\b{name}\b", code))
    assert not missing, f"named in the docs, read nowhere: {', '.join(missing)}"


def test_the_configuration_page_lists_every_environment_variable_specui_reads():
    """docs/configuration.md's list says it holds every SPECUI_ variable: each one a Python file of specui, tools/ or
    app.py reads by name (a quoted "SPECUI_..."; native.c's -DSPECUI_ macros are no variables) is on it."""
    code = "\n".join(path.read_text(encoding="utf-8") for folder in ("specui", "tools")
                     for path in (ROOT / folder).rglob("*.py"))
    code += (ROOT / "app.py").read_text(encoding="utf-8")
    read = set(re.findall(r"[\"'](SPECUI_[A-Z0-9_]*[A-Z0-9])[\"']", code))
    page = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8").split("## Environment variables")[1]
    assert "SPECUI_PRESET" in read and "SPECUI_STREAMS_BUDGET" in read
    missing = sorted(name for name in read if f"`{name}`" not in page and f"`{name}=" not in page)
    assert not missing, f"docs/configuration.md's environment variables leave out {', '.join(missing)}"


def test_the_configuration_page_gives_every_key_a_preset_takes():
    """docs/configuration.md's keys of a preset hold every field models.yaml can set (specui.presets.Preset's, but the
    name and the file it came from, which the loader sets): a key added to the loader is documented there."""
    from dataclasses import fields

    from specui.presets import Preset

    page = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    keys = page.split("## The keys of a preset")[1].split("\n## ")[0]
    items = {name for line in keys.splitlines() if line.startswith("- ") for name in
             re.findall(r"`(\w+)`", line.split(":")[0])}
    missing = [f.name for f in fields(Preset) if f.name not in items and f.name not in ("name", "config_name")]
    assert not missing, f"docs/configuration.md gives no list item to {', '.join(missing)}"
