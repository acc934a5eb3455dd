"""The page's notice, as it opens, that the app's starting preset did not load as the app started (`Showcase.preload`,
in the background or before the server on ZeroGPU): the log alone said so, and a visitor found out on pressing Send,
the preset's line still saying how much memory it needs.

A line above the tabs (`#start-problem`), its text escaped (the error names folders and Hub ids, which are no HTML),
shown while the page is open: it covers nothing (a toast in the page's corner covered the preset menu, the very
control the notice points to) and needs no queued event (a toast reaches the page from a queued event alone, and a
full queue refused one). A page that opens while the preset still loads asks again every `POLL_S` seconds until the
load has ended: it had asked once, as it opened, and was never told of a load that failed after. On a Hugging Face
Space the page is a visitor's, who cannot change the Space's configuration: it says that the preset did not load and
what they can do; the error and its advice (a path to check, a variable to set) are for the owner, in the Space's
log (`Showcase.preload` logs them). Elsewhere the page is its owner's: it says the error whole.
"""

from __future__ import annotations

import html

import gradio as gr

from specui import spaces
from specui.ui.session import Showcase

POLL_S = 2.0  # while the starting preset loads, how often an open page asks whether it has


def notice(showcase: Showcase, *, visitor: bool) -> str:
    """The notice's text ("" for none): the whole problem for whoever runs the app, a line for a `visitor`."""
    if not visitor:
        return showcase.start_problem() or ""
    if (failed := showcase.start_failure()) is None:
        return ""
    return (f"The preset this Space starts on ('{failed[0]}') did not load; its owner can see why in the Space's logs. "
            "Choose another preset from the menu, or try this one again later: it is tried again when a message "
            "is sent with it.")


def shown(text: str) -> dict:
    """The notice's line as an update: its text escaped, hidden when there is none."""
    line = f'<div class="start-notice" role="alert">{html.escape(text, quote=False)}</div>' if text else ""
    return gr.update(value=line, visible=bool(text))


def tell_start_problem(demo: gr.Blocks, showcase: Showcase):
    """Each page that opens is told the starting preset's problem, if any, in a line placed where this is called (above
    the tabs). Its events are not queued, as the page's other opening events are not: a queued one joined the queue
    on every page opened, and a full queue (a ZeroGPU Space's 64 waiting) refused it with an error toast, 'This
    application is currently busy', on a page that had nothing to be told. A timer, active only while the preset
    loads, asks again. Returns `after(run)`, which has the page ask again once a Chat run has ended."""
    line = gr.HTML("", visible=False, elem_id="start-problem", padding=False)
    again = gr.Timer(POLL_S, active=False)

    def asked():
        # whether it loads is read first: a load that fails after asks again; one ended has its failure kept already
        # (read after, a load that failed between the two reads gave no notice and stopped the timer)
        loading = showcase.starting()
        return shown(notice(showcase, visitor=spaces.on_spaces())), gr.Timer(active=loading)

    for event in (demo.load, again.tick):
        event(asked, None, [line, again], show_progress="hidden", api_visibility="private", queue=False)

    def after(run) -> None:
        """Ask again once `run` (a Chat run's event) has ended: a message sent with the starting preset loads it (the
        Hub back, a folder restored), and the notice, asked only as the page opened, said until a reload that the
        preset the chat had just answered with did not load."""
        run.then(asked, None, [line, again], show_progress="hidden", api_visibility="private", queue=False)

    return after
