"""Every button, control or section the docs name in italics (`*Decode*`, `*Step through this message in the Teach
tab*`: README.md, docs/teaching.md and docs/showcase.md write the page's labels so) is a label specui/ui's code
gives, so a label renamed on the page cannot stay behind in the docs ("*Step through it*" did). Bold there names
features and code spans name flags and files: neither is a label. Text only: no model, no server."""

from __future__ import annotations

import ast
import re

from tests.helpers import ROOT

DOCS = ("README.md", "docs/teaching.md", "docs/showcase.md")
NOT_LABELS = {  # italics that name something other than specui's page
    "CPU basic",  # a Hugging Face Space's hardware
    "ZeroGPU",  # and another
    "Fast Inference from Transformers via Speculative Decoding",  # the paper's title
    "Settings → Variables → `SPECUI_PRESET` = `qwen2.5-7b-4bit`",  # a Space's settings page
    "vs transformers assisted",  # README's own table's column
}


def italics(text: str) -> set[str]:
    """The `*...*` spans of Markdown `text` (not `**bold**`, not inside code blocks), their line breaks one space."""
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    return {" ".join(span.split()) for span in re.findall(r"(?<![*\w])\*([^*\s][^*]*?)\*(?![*\w])", text)}


def label_starts(source: str) -> list[str]:
    """Where a label may start in a module's strings: each string (an f-string's fixed parts joined), with a Markdown
    heading's #s and emphasis taken off, and the text after each '>' of its HTML; docstrings left out (they quote
    labels, old ones too)."""
    tree = ast.parse(source)
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr)}
    texts = [node.value for node in ast.walk(tree)
             if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings]
    texts += ["".join(part.value if isinstance(part, ast.Constant) else "\0" for part in node.values)
              for node in ast.walk(tree) if isinstance(node, ast.JoinedStr)]
    return [piece.lstrip("#* \n") for text in texts for piece in text.split(">")]


def on_page(label: str, starts: list[str]) -> bool:
    """Whether some string of the page starts with `label` as a whole word or words ("Compare" for "Compare with
    plain decoding", "Next round" for "Next round ▶"; not "Step through it" for "Step through items")."""
    return any(s.startswith(label) and not s[len(label):len(label) + 1].isalnum() for s in starts)


def test_every_label_the_docs_name_in_italics_is_on_the_page():
    starts = [s for path in sorted((ROOT / "specui" / "ui").glob("*.py")) for s in label_starts(path.read_text())]
    named = {doc: italics((ROOT / doc).read_text(encoding="utf-8")) for doc in DOCS}
    assert all(named.values()) and {"Decode", "Next round"} <= named["docs/teaching.md"]  # the spans are read
    missing = {doc: sorted(s for s in spans - NOT_LABELS if not on_page(s, starts)) for doc, spans in named.items()}
    assert not any(missing.values()), f"labels the docs name that specui/ui does not give: {missing}"
    assert NOT_LABELS <= set().union(*named.values()), "an exception no doc names any more: take it out"
    assert on_page("Step through this message", starts) and not on_page("Step through it", starts)


RENAMED = {  # a label as the page once gave it -> as it gives it now
    "Step through it in the Teach tab": "Step through this message in the Teach tab",
    "Token trees, node by node": "Token trees: a tree round, node by node",  # specui/ui/chat_tree.py's SECTION
}


def test_a_renamed_label_is_said_nowhere_in_its_old_words():
    """The italics test reads neither bold nor docstrings: the section README.md and docs/teaching.md named in bold
    "Token trees, node by node" and chat_handlers.to_teach's docstring quoted "Step through it in the Teach tab"
    after the page had renamed both. Each new label is on the page; the old words are in no doc and no module of
    specui/ui, docstrings included."""
    sources = {path: path.read_text(encoding="utf-8") for path in sorted((ROOT / "specui" / "ui").glob("*.py"))}
    starts = [s for text in sources.values() for s in label_starts(text)]
    assert all(on_page(new, starts) for new in RENAMED.values())
    texts = {**{doc: (ROOT / doc).read_text(encoding="utf-8") for doc in DOCS}, **sources}
    stale = {str(where): old for where, text in texts.items() for old in RENAMED if old in " ".join(text.split())}
    assert not stale, f"old labels still said: {stale}"
