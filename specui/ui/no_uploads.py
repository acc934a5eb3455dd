"""The served app takes no file from a visitor: gradio's upload routes are refused before gradio reads a byte.

Gradio's `/gradio_api/upload` keeps every file it is sent under /tmp/gradio, never deletes it, and serves it back
from `/gradio_api/file=`. launch's `max_file_size` caps each file, not their number: at 1 kB, one request still left
1,000 files (half a megabyte) on the disk, a request after another, and each file was served back, a file host on
the Space's address. `/gradio_api/process_recording` (gradio's screen recorder, in the page's settings) runs ffmpeg
on a visitor's video; refused, the recorder saves the recording as it was. Nothing of the app uploads: its inputs
are text, numbers and choices, and the Chat's JSON download that the Teach tab reads back is the server's own file,
named by its path, never sent again.
"""

from __future__ import annotations

from starlette.middleware import Middleware
from starlette.responses import PlainTextResponse

REFUSED = ("/upload", "/process_recording")  # gradio's routes that take a visitor's file (under /gradio_api)


class NoUploads:
    """ASGI middleware: a POST to a route of `REFUSED` is answered 403, its body read and dropped as it comes (a
    client still sending when the answer came and the connection closed read a broken pipe, not the answer);
    anything else passes on."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope["method"] == "POST" and scope["path"].rstrip("/").endswith(REFUSED):
            while (await receive()).get("more_body"):  # never kept: one chunk at a time
                pass
            await PlainTextResponse("This app takes no file.", status_code=403)(scope, receive, send)
            return
        await self.app(scope, receive, send)


def refused(app_kwargs: dict | None) -> dict:
    """`launch`'s `app_kwargs` (gradio passes them to its FastAPI app) with `NoUploads` among the middleware."""
    app_kwargs = dict(app_kwargs or {})
    app_kwargs["middleware"] = [*app_kwargs.get("middleware", ()), Middleware(NoUploads)]
    return app_kwargs
