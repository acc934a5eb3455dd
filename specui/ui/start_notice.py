"""The page's notice, as it opens, that the app's starting preset did not load as the app started (`Showcase.preload`,
in the background or before the server on ZeroGPU): the log alone said so, and a visitor found out on pressing Send,
the preset's line still saying how much memory it needs. A warning toast, its text escaped (`toasts.warn`: the error
names folders and Hub ids, which are no HTML), that stays until closed or until a run is asked for (toasts.js)."""

from __future__ import annotations

import gradio as gr

from specui.ui import toasts
from specui.ui.session import Showcase


def tell_start_problem(demo: gr.Blocks, showcase: Showcase) -> None:
    """Each page that opens is told `showcase.start_problem()`, if any. Asked without the queue, as the page's other
    opening events are: a queued one joined it on every page opened, and a full queue (a ZeroGPU Space's 64 waiting)
    refused it with an error toast, 'This application is currently busy', on a page that had nothing to be told. A
    toast reaches the page from a queued event only: that one runs only for a problem (the hidden box's text changed;
    a State's change is not told from a page's first, unqueued event)."""
    problem = gr.Textbox(visible="hidden", container=False, elem_id="start-problem")

    def asked() -> str:
        return showcase.start_problem() or ""

    def told(said: str) -> None:
        toasts.warn(said, duration=None)

    demo.load(asked, None, problem, show_progress="hidden", api_visibility="private", queue=False)
    problem.change(told, problem, None, show_progress="hidden", api_visibility="private")
