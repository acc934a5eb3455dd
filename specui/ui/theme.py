"""The app's look: the page's Gradio theme (`page_theme`), and the one chart theme: colours, sizes, the layout every
plotly figure of the app gets, and the note of an empty one."""

from __future__ import annotations

import plotly.graph_objects as go
import plotly.io as pio

SPEC_COLOUR = THEORY_COLOUR = "#2563eb"  # speculative runs and theory curves
# plain decoding, and the 1x line: 3.6:1 on white and 3.9:1 on the dark page's charts (style.css inverts them), over
# WCAG's 3:1 for graphics (#9ca3af of before gave 2.5:1)
PLAIN_COLOUR = "#808791"
NOTE_COLOUR = "#6b7280"  # an empty chart's note: text, so 4.5:1 on white (WCAG AA); PLAIN_COLOUR's grey gave 2.5:1
POINT_COLOUR = RATE_COLOUR = "#dc2626"  # measured points, running rates
BEST_COLOUR = "#16a34a"  # the best K
DRAFTER_COLOURS = {"plain": PLAIN_COLOUR, "model": SPEC_COLOUR, "model_lookup": "#4f46e5", "eagle": "#7c3aed",
                   "medusa": "#db2777", "early_exit": "#0891b2", "early_exit_lookup": "#0d9488",
                   "prompt_lookup": "#d97706"}  # the arena; style.css's .arena-* match
# the theory charts' K curves: told apart by dash and by a label at each curve's end as well as by shade, so that a
# washed-out projector or a colour-blind reader still tells them apart (the palest blue of before, #93c5fd, vanished;
# #60a5fa for K=1 was 2.5:1 on white): lightest for K=1, each at least 3:1 on white and on the dark page's charts
K_COLOURS = {1: "#4b8df5", 2: "#3b82f6", 3: "#2563eb", 4: "#1d4ed8", 5: "#1e40af", 6: "#1e3a8a", 8: "#172554"}
K_DASHES = {1: "dot", 2: "dash", 3: "longdash", 4: "dashdot", 5: "longdashdot", 6: "5px,2px", 8: "2px,6px"}
SUBTITLE_PX = 12  # a title's second line: plotly's <sub> drew it at about 10 px, too small on a projector
HEIGHT = 280  # the chat tab's live charts
TALL = 320  # the Teach tab's theory and experiment charts
PLOT_MIN_WIDTH = 340  # charts side by side wrap below this width each: one a row on a phone


def page_theme():
    """Gradio's Soft theme with its text at WCAG AA's 4.5:1, as axe-core checks it (tests/app/test_browser_axe.py):
    Soft draws a label's name, the tab chosen, a chosen radio and the Copy button in indigo-500 (#6366f1: 3.6:1 on a
    label's pale indigo, 4.5 on white less a hair), white on indigo-500 on a button (4.46:1), and a slider's range,
    a control's help and the footer in grey-400 (2.5:1): each one shade darker (on the dark page, a hovered button
    one shade darker, and the download link and grey-400, 4.05:1 in a text box, one lighter)."""
    import gradio as gr

    return gr.themes.Soft().set(
        block_label_text_color="*primary_700", block_title_text_color="*primary_700", color_accent="*primary_600",
        body_text_color_subdued="*neutral_600", body_text_color_subdued_dark="*neutral_300",
        checkbox_label_background_fill_selected="*primary_600",
        button_primary_background_fill="*primary_600", button_primary_border_color="*primary_600",
        button_primary_background_fill_hover="*primary_700", button_primary_background_fill_hover_dark="*primary_700",
        button_secondary_background_fill_hover_dark="*primary_700", link_text_color_dark="*secondary_400",
        link_text_color_visited_dark="*secondary_400", link_text_color_active_dark="*secondary_400")


def _template() -> go.layout.Template:
    """plotly_white as these charts read it: its 2-D axes, colours and fonts, and its bar and scatter defaults. The
    named template carries every trace type's and every kind of axis's defaults too (7 kB in each figure sent,
    and 15 ms to copy into each one built); this one is 1 kB, built once, and draws the same."""
    white = pio.templates["plotly_white"].to_plotly_json()
    kept = ("autotypenumbers", "colorway", "font", "hovermode", "hoverlabel", "paper_bgcolor", "plot_bgcolor", "xaxis",
            "yaxis", "annotationdefaults", "shapedefaults", "title")
    return go.layout.Template(layout={key: white["layout"][key] for key in kept},
                              data={kind: white["data"][kind] for kind in ("bar", "scatter")})


TEMPLATE = _template()


def layout(fig: go.Figure, *, title: str, x: str, y: str, height: int = HEIGHT, **kwargs) -> go.Figure:
    """Title, axes, size, margins and a horizontal legend under the plot, the same for every chart (a title's <sub>
    second line is drawn at SUBTITLE_PX)."""
    title = title.replace("<sub>", f'<span style="font-size:{SUBTITLE_PX}px">').replace("</sub>", "</span>")
    fig.update_layout(title={"text": title, "font": {"size": 14}}, template=TEMPLATE, height=height,
                      margin={"l": 55, "r": 20, "t": 50, "b": 40}, xaxis_title=x, yaxis_title=y,
                      legend={"orientation": "h", "yref": "container", "y": 0, "yanchor": "bottom", "x": 0}, **kwargs)
    return fig


def noted(fig: go.Figure, text: str, *, size: int = 13) -> go.Figure:
    """An empty chart that says why it is empty (or what will fill it), without axes that would mean nothing; the
    note replaces any the chart had (an empty chart's own, when a caller says it otherwise)."""
    fig.layout.annotations = ()
    fig.add_annotation(text=text, showarrow=False, xref="paper", yref="paper", x=0.5, y=0.5,
                       font={"size": size, "color": NOTE_COLOUR})
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    fig.update_layout(showlegend=False)
    return fig
