"""Every relative link in README.md and docs/*.md leads somewhere: the file exists and, where the link names an
anchor (`docs/x.md#a-heading`, `#a-heading`), a heading of that file makes it, as GitHub spells a heading's anchor."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~)")


def _prose(text, *, code_spans):
    """The lines outside fenced code blocks, with or without their inline code spans (a link inside code is an
    example; a heading's code is part of its anchor)."""
    lines, fenced = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line.lstrip()):
            fenced = not fenced
        elif not fenced:
            lines.append((number, line if code_spans else re.sub(r"`[^`\n]*`", "", line)))
    return lines


def anchor(heading):
    """The anchor GitHub gives a heading: lower case, punctuation but '-' and '_' dropped, each space a '-'."""
    text = re.sub(r"`|\*\*?|\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip()).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path):
    """Every anchor of a page's headings, a repeated heading's anchor numbered -1, -2, ... as GitHub does."""
    seen, found = {}, set()
    for _, line in _prose(path.read_text(encoding="utf-8"), code_spans=True):
        heading = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if heading:
            slug = anchor(heading.group(1))
            found.add(slug if slug not in seen else f"{slug}-{seen[slug]}")
            seen[slug] = seen.get(slug, 0) + 1
    return found


def links(path):
    """(line number, target) of every relative link of a page, outside code."""
    for number, line in _prose(path.read_text(encoding="utf-8"), code_spans=False):
        for match in LINK.finditer(line):
            target = match.group(1) or match.group(2)
            if not re.match(r"[a-z]+:", target):
                yield number, target


def test_anchor_is_spelled_as_github_spells_it():
    assert anchor("Rounds in one native call (`specui/native_chain.py`, `specui/native_head.c`)") == (
        "rounds-in-one-native-call-specuinative_chainpy-specuinative_headc")
    assert anchor("The draft model + lookup") == "the-draft-model--lookup"
    assert anchor("Verifies of 10–12 rows on AVX-512 (stop 78)") == "verifies-of-1012-rows-on-avx-512-stop-78"


@pytest.mark.parametrize("page", PAGES, ids=[page.name for page in PAGES])
def test_every_relative_link_and_anchor_resolves(page):
    broken = []
    for number, target in links(page):
        file_part, _, fragment = target.partition("#")
        linked = (page.parent / file_part).resolve() if file_part else page
        if not linked.exists():
            broken.append(f"{page.name}:{number}: {target} (no file {file_part})")
        elif fragment and linked.suffix == ".md" and fragment not in anchors(linked):
            broken.append(f"{page.name}:{number}: {target} (no heading of {linked.name} makes #{fragment})")
    assert not broken, "\n".join(broken)
