"""Every button, control or section the docs name in italics (`*Decode*`, `*Step through this message in the Teach
tab*`: README.md, docs/teaching.md and docs/showcase.md write the page's labels so) is a label specui/ui's code
gives, whole, so a label renamed on the page cannot stay behind in the docs ("*Step through it*" did), even where its
old words begin another label (*Decode* beside 'Decode with a tree'). Bold there names features and code spans name
flags and files: neither is a label. Text only: no model, no server."""

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


SHORT = {  # the docs' short name for a label -> the label on the page
    "Compare": "Compare with plain decoding",
    "Arena": "Arena: plain decoding, then every drafter of the preset",
    "Token trees": "Token trees: a tree round, node by node",
    "Step through this message": "Step through this message in the Teach tab",
}


def page_labels(source: str) -> set[str]:
    """The texts a module's strings may give as labels: each string (an f-string's fixed parts joined) and its HTML's
    texts (`given_pieces`, each ended at its next '<'), with a Markdown heading's #s and emphasis taken off;
    docstrings left out (they quote labels, old ones too)."""
    tree = ast.parse(source)
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr)}
    texts = [node.value for node in ast.walk(tree)
             if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings]
    texts += ["".join(part.value if isinstance(part, ast.Constant) else "\0" for part in node.values)
              for node in ast.walk(tree) if isinstance(node, ast.JoinedStr)]
    return {piece.split("<")[0].lstrip("#* \n").rstrip() for text in texts for piece in given_pieces(text)}


QUOTING = {"b", "strong", "em", "i", "code", "kbd", "q"}  # HTML tags that quote a label ("Press <b>Decode</b>")


def given_pieces(text: str) -> list[str]:
    """`text` and its text after each '>' of its HTML, but for the text a tag of QUOTING opens: a quote of a label in
    the page's own help gives no label (it stays when the label is renamed, as a doc would)."""
    pieces = text.split(">")
    opened = [piece.rsplit("<", 1)[-1].split(" ")[0].lower() if "<" in piece else "" for piece in pieces]
    return [pieces[0]] + [piece for tag, piece in zip(opened, pieces[1:]) if tag not in QUOTING]


def on_page(label: str, given: set[str]) -> bool:
    """Whether the page gives `label` whole: a text of its strings is `label` itself, or `label` and then a note in
    brackets or one symbol ("Seed" for "Seed (-1 = random)", "Next round" for "Next round ▶"). A text that merely
    starts with it is not enough: *Decode* stayed "on the page" as the start of "Decode with a tree" with the Decode
    button renamed."""
    tail = re.compile(re.escape(label) + r" (\([^()]*\)|[^\w\s])")
    return any(text == label or tail.fullmatch(text) for text in given)


def ui_labels() -> set[str]:
    return set().union(*(page_labels(path.read_text(encoding="utf-8"))
                         for path in sorted((ROOT / "specui" / "ui").glob("*.py"))))


def test_every_label_the_docs_name_in_italics_is_on_the_page():
    given = ui_labels()
    named = {doc: italics((ROOT / doc).read_text(encoding="utf-8")) for doc in DOCS}
    assert all(named.values()) and {"Decode", "Next round"} <= named["docs/teaching.md"]  # the spans are read
    missing = {doc: sorted(s for s in spans - NOT_LABELS if not on_page(SHORT.get(s, s), given))
               for doc, spans in named.items()}
    assert not any(missing.values()), f"labels the docs name that specui/ui does not give: {missing}"
    assert NOT_LABELS | SHORT.keys() <= set().union(*named.values()), "an exception no doc names any more: take it out"
    assert on_page("Next round", given) and on_page("Seed", given) and not on_page("Step through it", given)
    assert not on_page("Step through this message", given), "a label's first words are no label: say it in SHORT"


def test_a_label_is_on_the_page_whole_not_as_the_start_of_another():
    """The rename the test missed while a label needed only to start some text: the Teach tab's Decode button renamed
    (here to 'Run') left *Decode* in the docs 'on the page' as the start of 'Decode with a tree', and the page's own
    quote of it ("Press <b>Decode</b>", teach_view.py) is no label either."""
    button = 'gr.Button("Decode",'
    [source] = [text for path in sorted((ROOT / "specui" / "ui").glob("*.py"))
                if button in (text := path.read_text(encoding="utf-8"))]  # teach_layout.py's
    renamed = ui_labels() - page_labels(source) | page_labels(source.replace(button, 'gr.Button("Run",'))
    assert on_page("Decode", ui_labels()) and not on_page("Decode", renamed)
    assert any(text.startswith("Decode with a tree") for text in renamed)  # what the old test took for it


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
    given = set().union(*(page_labels(text) for text in sources.values()))
    assert all(on_page(new, given) for new in RENAMED.values())
    texts = {**{doc: (ROOT / doc).read_text(encoding="utf-8") for doc in DOCS}, **sources}
    stale = {str(where): old for where, text in texts.items() for old in RENAMED if old in " ".join(text.split())}
    assert not stale, f"old labels still said: {stale}"
