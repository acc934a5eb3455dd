"""A client gone before it read its answer: its events are marked dead, so its run stops (the API's, api.py).

Gradio marks a session's events dead (`Queue.clean_events`: `alive` False, its queued events dropped) when the
session's message stream (GET /gradio_api/queue/data?session_hash=S, where the answer comes) drops. A client can be
gone before it opened that stream: gradio_client opens it a moment after its job has joined the queue, and a client
process killed in that moment left a run that decoded to its end, nobody there to read it (test_app_served: 5 kills
of 6 at a few rounds in, with gradio 6.31 and uvicorn). gradio_client, like the page, holds a heartbeat stream (GET
/gradio_api/heartbeat/S) from its start; when that drops, gradio marks the session closed for its state but leaves
the session's running events alive.

`ClientStreams`, an ASGI middleware (`launch` adds it, `watched`), counts each session's open streams of both kinds,
and a /call client's (GET /gradio_api/call/API/EVENT, read after its POST /gradio_api/call/API: its event's session).
When the last one ends because its client disconnected, the session has no connection left, and it calls gradio's
`clean_events` for the session, as gradio does when the message stream drops. A heartbeat dropped while the message
stream is open cancels nothing (gradio_client gives up its heartbeat when one is 20 s late, and reads on); neither
does a stream that ended with its answer sent. A client killed after it joined (POST /gradio_api/queue/join) but
with no stream open at all, no heartbeat either (a raw HTTP client), leaves nothing to notice here: the API stops a
run whose session has had no stream open for a while (`api.UNHEARD_S`), reading the counts kept here
(`open_streams`) once the app is `watching` them.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qs

from gradio.route_utils import API_PREFIX
from starlette.middleware import Middleware

HEARTBEAT = re.compile(re.escape(API_PREFIX) + r"/heartbeat/([^/?]+)/?$")
MESSAGES = re.compile(re.escape(API_PREFIX) + r"/queue/data/?$")
CALL = re.compile(re.escape(API_PREFIX) + r"/call/(?:v2/)?[^/]+/([^/?]+)/?$")  # a /call client's read of its event


def session_of(scope: dict) -> str | None:
    """The session whose heartbeat or message stream this request opens; None for any other request."""
    if scope.get("type") != "http" or scope.get("method") != "GET":
        return None
    path = scope.get("path", "")
    if found := HEARTBEAT.search(path):
        return found.group(1)
    if MESSAGES.search(path):
        return (parse_qs(scope.get("query_string", b"").decode("latin-1")).get("session_hash") or [None])[0]
    return None


def event_of(scope: dict) -> str | None:
    """The event whose answer this request reads through gradio's /call route; None for any other request."""
    if scope.get("type") != "http" or scope.get("method") != "GET":
        return None
    found = CALL.search(scope.get("path", ""))
    return found.group(1) if found else None


def session_of_event(app, event: str) -> str:
    """The session of `event` on `app`, found as gradio's /call route finds it (its own id when it has none)."""
    try:
        queue = app.get_blocks()._queue
        if (held := queue.event_ids_to_events.get(event)) is not None:
            return held.session_hash
        return next((s for s, ids in queue.pending_event_ids_session.items() if event in ids), event)
    except AttributeError:
        return event


def watching(app) -> bool:
    """Whether `ClientStreams` counts `app`'s streams (it has seen a request of it): else the counts say nothing."""
    return getattr(app.state, "specui_watched", False)


def open_streams(app) -> dict[str, int]:
    """Each session's open heartbeat and message streams on `app` (gradio's App), by session hash."""
    try:
        return app.state.specui_open_streams
    except AttributeError:
        app.state.specui_open_streams = {}
        return app.state.specui_open_streams


async def forget(app, session: str) -> None:
    """Mark `session`'s events dead and drop its queued ones (gradio's own way, `Queue.clean_events`); nothing where
    the app is not gradio's as 6.x has it."""
    try:
        queue = app.get_blocks()._queue
        clean = queue.clean_events
    except AttributeError:
        return
    await clean(session_hash=session)  # marks the events dead before its first await: done even if cancelled there


class ClientStreams:
    """ASGI middleware: a session whose last heartbeat or message stream ended by its client's disconnect has its
    events marked dead (`forget`). Every other request passes through untouched."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope.get("type") == "http" and "app" in scope:
            scope["app"].state.specui_watched = True
        session = session_of(scope)
        if session is None and (event := event_of(scope)) is not None:
            session = session_of_event(scope["app"], event)
        if session is None:
            return await self.app(scope, receive, send)
        state = {"answered": False, "gone": False}

        async def receive_():
            message = await receive()
            if message["type"] == "http.disconnect" and not state["answered"]:
                state["gone"] = True  # the client left while the stream was still open
            return message

        async def send_(message):
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                state["answered"] = True  # the stream's end sent: a normal end, the client may go
            await send(message)

        counts = open_streams(scope["app"])
        counts[session] = counts.get(session, 0) + 1
        try:
            await self.app(scope, receive_, send_)
        except BaseException:
            state["gone"] = state["gone"] or not state["answered"]  # broke off (a send to a dead socket)
            raise
        finally:
            counts[session] -= 1
            if not counts[session]:
                del counts[session]
                if state["gone"]:
                    await forget(scope["app"], session)


def watched(app_kwargs: dict | None) -> dict:
    """`launch`'s `app_kwargs` (gradio passes them to its FastAPI app) with `ClientStreams` among the middleware."""
    app_kwargs = dict(app_kwargs or {})
    app_kwargs["middleware"] = [*app_kwargs.get("middleware", ()), Middleware(ClientStreams)]
    return app_kwargs
