"""The page's notice, as it opens, that the app's starting preset did not load as the app started (`Showcase.preload`,
in the background or before the server on ZeroGPU): the log alone said so, and a visitor found out on pressing Send,
the preset's line still saying how much memory it needs. A warning toast, its text escaped (`toasts.warn`: the error
names folders and Hub ids, which are no HTML), that stays until closed or until a run is asked for (toasts.js)."""

from __future__ import annotations

import gradio as gr

from specui.ui import toasts
from specui.ui.session import Showcase


def tell_start_problem(demo: gr.Blocks, showcase: Showcase) -> None:
    """Each page that opens is told `showcase.start_problem()`, if any."""
    def told():
        if problem := showcase.start_problem():
            toasts.warn(problem, duration=None)

    # queued: a toast reaches the page from a queued event only
    demo.load(told, None, None, show_progress="hidden", api_visibility="private")
