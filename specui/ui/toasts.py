"""The page's toasts (gradio's gr.Warning and gr.Error) with their message shown as text, and refusals told calmly.

Gradio renders a toast's message as HTML, and specui never renders what a user or a model wrote as HTML: a message
may quote a setting, a file or an exception's text, so every toast's message is escaped here. A refusal of what a
user asked (a setting out of range, an empty prompt) is no fault of the app: it prints no traceback on the server.
(Gradio 6.31's page shows "Error" or "Warning" above a toast whatever title the server sends, so none is given.)
The page closes the toasts it shows once a run is asked for again (toasts.js): gradio kept them their 10 s.

A handler that raises puts every output of its event into gradio's red "Error" state, which covers what the output
showed. `calmly(handler, answer)` wraps a handler whose event chains nothing after it: its refusal becomes a warning
toast, and `answer(text)` says why in the event's own outputs while the others keep what they showed.
"""

from __future__ import annotations

import html
import inspect

import gradio as gr


class Refusal(gr.Error):
    """A refusal of what a user asked: `text` is the reason as written, `message` the same escaped for the toast."""

    def __init__(self, text: str):
        super().__init__(html.escape(text, quote=False), print_exception=False)
        self.text = text


def warn(message: str, *, duration: float | None = 10) -> None:
    """A warning toast, shown `duration` seconds (None: until closed); the handler goes on."""
    gr.Warning(html.escape(message, quote=False), duration=duration)


def refusal(message: str) -> Refusal:
    """An error toast to raise: the event's outputs keep their values and a chained `.success` does not run."""
    return Refusal(message)


def calmly(handler, answer):
    """`handler` (the event's inputs as one dict -> a dict of outputs, returned or yielded) with each refusal told
    as a warning toast and `answer(text)` (a dict of outputs; `text` as written, to escape) instead of an error."""
    if inspect.isgeneratorfunction(handler):
        def run(data: dict):
            try:
                yield from handler(data)
            except Refusal as e:
                warn(e.text)
                yield answer(e.text)
    else:
        def run(data: dict):
            try:
                return handler(data)
            except Refusal as e:
                warn(e.text)
                return answer(e.text)
    return run
