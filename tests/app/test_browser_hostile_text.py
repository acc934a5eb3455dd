"""A real browser on the served app given hostile text, on a phone's page (390 px): a models.yaml whose preset's
description and memory hold HTML, Markdown images and links, a formula; prompts that hold HTML and script tags,
Markdown, control characters, bidi overrides, zero-width joiners, a 300-character URL, 10,000 emoji. Nothing of it
becomes markup (no element made, no image fetched, no script run), nothing widens the page, every token keeps its
colour, and the run's JSON download is served as JSON (a browser opens it as text), its preset's name as written."""

from __future__ import annotations

import contextlib
import json
from dataclasses import replace

import pytest

from tests.helpers import app_page, require_browser, ui_config
from tools.screenshot import run_prompt, set_number

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # drives Chromium on the served app

PWN = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>'
DESCRIPTION = (f"Hostile {PWN} ![a picture](http://127.0.0.1:9/fetched.png) [a link](javascript:window.__pwned=3) "
               "**bold** $$x^2$$ `code` <u>underlined</u> # not a heading")
MEMORY = "<i>1 GB</i> ![m](http://127.0.0.1:9/memory.png)"
PROMPTS = (f"{PWN} ![p](http://127.0.0.1:9/prompt.png) [l](javascript:window.__pwned=4) **b** "
           "<div style='width:5000px'>wide</div>",
           "abc \u202edef ghi jkl \u2066x\u2069 e\u200de \U0001F468\u200d\U0001F469\u200d\U0001F467 "
           "\x01\x07\x1b[31mred\x1b[0m \u2028 end",
           "see https://example.com/" + "a" * 300 + " and " + "x=1;" * 100)
# what the text must never have made: elements, a fetch, a script's effect
MARKUP = """() => ({pwned: window.__pwned ?? null,
  made: [...document.querySelectorAll('#chat :is(img, script, a, iframe, u, i, strong, em), '
    + '#preset-info :is(img, script, a, iframe, u, i, strong, .katex, h1)')].map(e => e.outerHTML.slice(0, 80)),
  fetched: performance.getEntriesByType('resource').map(e => e.name).filter(n => n.includes(':9/')),
  wide: document.documentElement.scrollWidth,
  uncoloured: [...document.querySelectorAll('#chat .tok')].filter(
    e => !/\\btok-(accepted|resampled|bonus|plain|rejected)\\b/.test(e.className)).length})"""


@contextlib.contextmanager
def hostile_page():
    """The app (the UI tests' pair, as the default preset of a hostile name, description and memory) in Chromium as a
    phone shows it, once its prompt box shows."""
    require_browser()
    config = ui_config()
    hostile = replace(config.presets[config.default], name="evil<b>preset</b>", description=DESCRIPTION,
                      memory=MEMORY)
    config = replace(config, presets={**config.presets, hostile.name: hostile}, default=hostile.name)
    with app_page(config, viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True,
                  accept_downloads=True) as page:
        yield page


def test_a_presets_description_and_memory_are_shown_as_written_never_as_markup():
    """models.yaml's description went to a Markdown component as it was: `<img src=x>` became an image, `![..](url)`
    fetched a picture from elsewhere, `[..](..)` a link, `$$x^2$$` a formula, `#` a heading."""
    with hostile_page() as page:
        found = page.evaluate(MARKUP)
        assert found == {"pwned": None, "made": [], "fetched": [], "wide": 390, "uncoloured": 0}, found
        shown = page.locator("#preset-info").inner_text()
        assert DESCRIPTION in shown and "Needs " + MEMORY in shown, shown


def test_hostile_prompts_stay_text_keep_the_page_and_their_colours_and_download_as_json():
    with hostile_page() as page:
        set_number(page, "max-new-tokens", 24)
        for prompt in PROMPTS:
            run_prompt(page, prompt)
            found = page.evaluate(MARKUP)
            assert found == {"pwned": None, "made": [], "fetched": [], "wide": 390, "uncoloured": 0}, (prompt, found)
            assert page.locator("#chat .specui-prompt").last.text_content() == prompt  # shown as typed
        link = page.locator("#chat-export a").first
        answer = page.request.get(link.get_attribute("href"))
        assert answer.headers["content-type"].startswith("application/json"), answer.headers  # opened, never HTML
        run = json.loads(answer.body())
        assert run["preset"] == "evil<b>preset</b>" and run["tokens"], run
        run_prompt(page, "\U0001F600" * 10_000)  # longer than the model's context: refused in the chat, in words
        assert "shorten the prompt" in page.locator("#chat .specui-error").last.text_content()
        assert page.evaluate(MARKUP)["wide"] == 390


def test_a_bidi_override_in_a_token_reverses_its_own_token_alone():
    """A token that opens a right-to-left override (U+202E) and never closes it had reversed every later token on its
    line: "one two three" read "eerht owt eno", each colour over another token's letters. In the app's stylesheet, the
    reply's tokens (render_tokens) and an arena's (credit_span) keep their order."""
    from specui.arena import Credit
    from specui.events import Kind
    from specui.ui.arena_view import credit_span
    from specui.ui.render import TokenView, render_tokens
    from tests.helpers import static_page

    kinds = (Kind.ACCEPTED, Kind.RESAMPLED, Kind.ACCEPTED, Kind.BONUS, Kind.ACCEPTED)
    texts = ("abc ", "x\u202e", "one ", "two ", "three")
    reply = render_tokens([TokenView(text, kind) for text, kind in zip(texts, kinds)])
    lane = "".join(credit_span(text, Credit(index=i, token_id=i, kinds={"eagle": kind}), {})
                   for i, (text, kind) in enumerate(zip(texts, kinds)))
    with static_page(f"<div id=reply>{reply}</div><div id=lane class=specui-text>{lane}</div>", width=390,
                     height=300) as page:
        for block in ("#reply", "#lane"):
            lefts = page.evaluate(f"() => [...document.querySelectorAll('{block} .tok')].map("
                                  "e => e.getBoundingClientRect().left)")
            assert lefts == sorted(lefts), (block, lefts)  # each token after the one before it
