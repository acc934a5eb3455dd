"""The theory charts' colours on a projector: every K curve and the plain-decoding line at WCAG's 3:1 for graphics,
on white and on the dark page (where style.css shows the charts inverted, hues turned back), the K=1 curve still
the palest of the blues; and an experiment's (or the token tree's) note before its run reads at AA's 4.5:1, as text."""

from __future__ import annotations

import math
import re
from pathlib import Path

from specui.ui import teach_charts, theme

CSS = (Path(theme.__file__).with_name("style.css")).read_text(encoding="utf-8")


def _rgb(hex_colour: str) -> list[float]:
    return [int(hex_colour[i:i + 2], 16) / 255 for i in (1, 3, 5)]


def _luminance(rgb) -> float:
    lin = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


def _ratio(a, b) -> float:
    x, y = sorted((_luminance(a), _luminance(b)))
    return (y + 0.05) / (x + 0.05)


def _dark(rgb) -> list[float]:
    """A colour as the dark page shows it: style.css's invert(a) hue-rotate(d) on the chart (the Filter Effects
    spec's matrices)."""
    a, degrees = (float(x) for x in re.search(r"\.dark \.js-plotly-plot[^{]*\{\s*filter:\s*invert\(([\d.]+)\)\s*"
                                               r"hue-rotate\((\d+)deg\)", CSS).groups())
    inverted = [a * (1 - c) + (1 - a) * c for c in rgb]
    cos, sin = math.cos(math.radians(degrees)), math.sin(math.radians(degrees))
    m = [[0.213 + cos * 0.787 - sin * 0.213, 0.715 - cos * 0.715 - sin * 0.715, 0.072 - cos * 0.072 + sin * 0.928],
         [0.213 - cos * 0.213 + sin * 0.143, 0.715 + cos * 0.285 + sin * 0.140, 0.072 - cos * 0.072 - sin * 0.283],
         [0.213 - cos * 0.213 - sin * 0.787, 0.715 - cos * 0.715 + sin * 0.715, 0.072 + cos * 0.928 + sin * 0.072]]
    return [min(1.0, max(0.0, sum(m[i][j] * inverted[j] for j in range(3)))) for i in range(3)]


def test_the_theory_charts_lines_reach_3_to_1_on_light_and_dark_pages_in_the_palettes_order():
    white = [1.0, 1.0, 1.0]
    figure = teach_charts.theory_speedup_figure()
    drawn = {trace.line.color for trace in figure.data} | {shape.line.color for shape in figure.layout.shapes}
    assert theme.K_COLOURS[1] in drawn and theme.PLAIN_COLOUR in drawn  # the K=1 curve and plain decoding's 1× line
    for colour in sorted(drawn):
        light, dark = _ratio(_rgb(colour), white), _ratio(_dark(_rgb(colour)), _dark(white))
        assert light >= 3 and dark >= 3, (colour, round(light, 2), round(dark, 2))
    shades = [_luminance(_rgb(theme.K_COLOURS[k])) for k in sorted(theme.K_COLOURS)]
    assert shades == sorted(shades, reverse=True)  # K=1 palest, K=8 darkest


def test_an_experiments_note_before_its_run_reads_at_aa_contrast():
    from specui.ui.tree_chart import tree_figure  # the tree step-through's note before a tree run, too

    for figure in (teach_charts.k_sweep_figure(), teach_charts.temperature_figure(), teach_charts.drafter_figure(),
                   teach_charts.verify_cost_figure(), tree_figure()):
        colour = figure.layout.annotations[-1].font.color
        assert _ratio(_rgb(colour), [1.0, 1.0, 1.0]) >= 4.5, colour
