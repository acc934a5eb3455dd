"""The Teach tab's theory charts drawn by plotly.js in Chromium at the widths a lecture hall's projector and a phone
give them: the speedup chart's legend (eight entries, one a row when the theory's best K lies past the slider and is
named so) took its rows from the plot, which was 55 px high on a 1280 × 720 projector at 150% (a chart 428 px wide).
Each figure is the app's own (teach_charts), drawn by the plotly.js that plotly.py carries (offline), in the folder's
shared Chromium; boxes, not pixels."""

from __future__ import annotations

import pytest

from specui.ui import teach_charts
from tests.app.test_ui_teach_best_k import _measured

pytestmark = [pytest.mark.browser]

# a chart's width in CSS px: a phone's (390 px page), a 1280 × 720 projector's and a 1024 × 768 one's, at 150%
WIDTHS = (366, 428, 576)
BOXES = """() => Object.fromEntries(['nsewdrag', 'legend', 'xtitle'].map(c => {
    const r = document.querySelector(`.${c}`).getBoundingClientRect(); return [c, [r.top, r.bottom]]; }))"""


@pytest.fixture(scope="module")
def page(browser):
    context = browser.new_context(device_scale_factor=1.5)
    yield context.new_page()
    context.close()


@pytest.mark.parametrize("alpha, c", [(0.95, 0.02), (0.908, 0.099), (0.6, 0.1)])
def test_the_theory_charts_plots_keep_their_height_under_their_legends(page, alpha, c):
    """(0.95, 0.02) and (0.908, 0.099) put the theory's best past the slider (a long legend name); (0.6, 0.1) not."""
    measured = _measured(alpha, c)
    for figure in (teach_charts.theory_speedup_figure(measured), teach_charts.theory_tokens_figure(measured)):
        for width in WIDTHS:
            page.set_viewport_size({"width": width + 24, "height": 900})
            page.set_content(figure.to_html(include_plotlyjs=True, full_html=True, default_width=f"{width}px",
                                            config={"responsive": False}))
            page.wait_for_selector(".legend .traces")
            boxes = page.evaluate(BOXES)
            plot = boxes["nsewdrag"][1] - boxes["nsewdrag"][0]
            title = figure.layout.title.text[:20]
            assert plot >= 130, (title, width, boxes)  # 55 px before: a strip, its curves' labels piled up
            assert boxes["legend"][0] >= boxes["xtitle"][1] - 1, (title, width, boxes)  # below the axis title
