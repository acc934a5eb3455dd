"""The Chat tab's example prompts: what a visitor would try, shown to everyone (and in the README screenshot).

One was `<img src=x onerror=alert(1)>`, a test's attack string; the tests keep their own. A prompt with markup
stays, the way a user would write one, and the page shows it as text.
"""

from __future__ import annotations

from specui.ui.blocks import EXAMPLES
from specui.ui.render import escape_text


def test_no_example_is_an_attack_string():
    assert not [e for e in EXAMPLES if any(word in e.lower() for word in ("onerror", "<script", "javascript:"))]


def test_an_example_with_markup_is_shown_as_text():
    (markup,) = [e for e in EXAMPLES if "<button>" in e]
    assert "&lt;button&gt;" in escape_text(markup) and "<button>" not in escape_text(markup)
