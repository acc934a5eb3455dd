"""The round's draft table on a 1024 × 768 projector at 150% (683 × 512 CSS px) in a real browser, over the whole
app on the folder's tiny pair: its seven columns fit the step view, where the last, the verdict, ran 74 px past it
("✓ accepted (u < p/q)" and "– not checked" cut off at their right, its head "u < p/q?" off screen) and a class saw
it only once the table was scrolled sideways. Boxes, not pixels."""

from __future__ import annotations

import pytest

from tests.app.teach_page import wait_round
from tests.gradio_calls import track_calls
from tests.helpers import open_page
from tests.waits import click_and_wait
from tools.screenshot import set_number

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # drives Chromium on the served app

PROJECTOR = dict(viewport={"width": 683, "height": 512}, device_scale_factor=1.5)
PROMPT = "def add(a, b):\n    return a + b\n\ndef add(a, b):\n"
# the table's overflow, and its widest row's draft token (the one column whose width is the text's own)
OVER = """() => { const t = document.querySelector('#step-view .teach-drafts');
    return [t.scrollWidth - t.clientWidth,
            Math.max(...[...t.querySelectorAll('td.text')].map(c => c.textContent.length))]; }"""


@pytest.fixture(scope="module")
def page(site, browser):
    page = open_page(browser, site[1] + "?tab=teach", ready="#step-start", **PROJECTOR)
    track_calls(page)
    page.fill("#teach-prompt textarea", PROMPT)  # sampled (temperature 0.8), the preset's K 4: long verdicts, "unused"
    set_number(page, "teach-temperature", 0.8)
    set_number(page, "teach-max-new-tokens", 16)
    click_and_wait(page, "#step-start", "#step-status")
    wait_round(page, 1)
    yield page
    page.context.close()


def test_the_draft_table_fits_a_1024_projector_at_150_percent(page):
    for n in (1, 2, 3):
        if n > 1:
            page.click("#step-next")
            wait_round(page, n)
        over, token = page.evaluate(OVER)
        # a draft token of up to 12 characters as written ('builder' is 9, ' implementation' 17): the rest fits
        assert over <= 0 or token > 12, (n, over, token)
