"""The page's toasts (gradio's gr.Warning and gr.Error) with their message shown as text.

Gradio renders a toast's message as HTML, and specui never renders what a user or a model wrote as HTML: a message
may quote a setting, a file or an exception's text, so every toast's message is escaped here. A refusal of what a
user asked (a setting out of range, an empty prompt) is no fault of the app: it prints no traceback on the server.
(Gradio 6.31's page shows "Error" or "Warning" above a toast whatever title the server sends, so none is given.)
"""

from __future__ import annotations

import html

import gradio as gr


def warn(message: str) -> None:
    """A warning toast; the handler goes on."""
    gr.Warning(html.escape(message, quote=False))


def refusal(message: str) -> gr.Error:
    """An error toast to raise: the event's outputs keep their values and a chained `.success` does not run."""
    return gr.Error(html.escape(message, quote=False), print_exception=False)
