"""`client_streams.ClientStreams` without a server: which requests it counts (a /call client's read of its answer too,
under its event's session), that its count of a session's streams comes back to nothing however a stream ends
(answered, its client gone, raising, its task cancelled), and that only the end of a session's last stream, by its
client's going, marks the session's events dead."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from specui.ui.client_streams import ClientStreams, event_of, open_streams, session_of, watching


class App:
    """gradio's App as the middleware reads it: its state, and its queue's `clean_events` (noted here)."""

    def __init__(self):
        self.state, self.cleaned = SimpleNamespace(), []

        async def clean_events(*, session_hash):
            self.cleaned.append(session_hash)

        self.get_blocks = lambda: SimpleNamespace(_queue=SimpleNamespace(clean_events=clean_events))


def scope(app, path: str, query: bytes = b"", method: str = "GET") -> dict:
    """An HTTP request's ASGI scope on `app`."""
    return {"type": "http", "method": method, "path": path, "query_string": query, "app": app}


def heartbeat(app, session: str) -> dict:
    return scope(app, f"/gradio_api/heartbeat/{session}")


def messages(app, session: str) -> dict:
    return scope(app, "/gradio_api/queue/data", f"session_hash={session}".encode())


async def stream(scope_, *, client_goes: asyncio.Event, answer: asyncio.Event | None = None, fail=None) -> None:
    """One request through the middleware to an SSE-like route: it streams until `answer` is set (then ends its body)
    or its client goes (`client_goes` set: an http.disconnect), or raises `fail` once its client goes."""

    async def route(_, receive, send):
        await send({"type": "http.response.start", "status": 200, "headers": []})
        waits = [asyncio.ensure_future(receive())] + ([asyncio.ensure_future(answer.wait())] if answer else [])
        _, pending = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        for task in pending:
            task.cancel()
        if answer is not None and answer.is_set():
            await send({"type": "http.response.body", "body": b"data: done\n\n", "more_body": False})
        elif fail is not None:
            raise fail

    async def receive():
        await client_goes.wait()
        return {"type": "http.disconnect"}

    async def send(_):
        pass

    await ClientStreams(route)(scope_, receive, send)


def test_it_counts_only_a_sessions_heartbeat_and_message_stream():
    app = App()
    assert session_of(heartbeat(app, "S")) == "S"
    assert session_of(messages(app, "S")) == "S"
    assert session_of(scope(app, "/gradio_api/queue/join", method="POST")) is None
    assert session_of(scope(app, "/gradio_api/queue/data")) is None  # no session named
    assert session_of(scope(app, "/gradio_api/call/generate/abc")) is None
    assert session_of({"type": "websocket", "path": "/gradio_api/heartbeat/S"}) is None


def test_a_heartbeat_gone_while_the_answer_is_read_marks_nothing_and_the_answers_end_neither():
    async def go():
        app, beat_goes, reader_goes, answered = App(), asyncio.Event(), asyncio.Event(), asyncio.Event()
        beat = asyncio.ensure_future(stream(heartbeat(app, "S"), client_goes=beat_goes))
        reader = asyncio.ensure_future(stream(messages(app, "S"), client_goes=reader_goes, answer=answered))
        await asyncio.sleep(0)
        assert open_streams(app) == {"S": 2}
        beat_goes.set()
        await beat
        assert open_streams(app) == {"S": 1} and app.cleaned == []
        answered.set()
        await reader
        assert open_streams(app) == {} and app.cleaned == []

    asyncio.run(go())


def test_the_last_stream_gone_marks_the_sessions_events_dead_once_and_leaves_no_count():
    async def go():
        app, goes = App(), asyncio.Event()
        tasks = [asyncio.ensure_future(stream(heartbeat(app, "S"), client_goes=goes)),
                 asyncio.ensure_future(stream(messages(app, "S"), client_goes=goes)),
                 asyncio.ensure_future(stream(heartbeat(app, "T"), client_goes=asyncio.Event(),
                                              answer=asyncio.Event()))]
        await asyncio.sleep(0)
        assert open_streams(app) == {"S": 2, "T": 1}
        goes.set()
        await asyncio.gather(*tasks[:2])
        assert app.cleaned == ["S"] and open_streams(app) == {"T": 1}  # another session's stream untouched
        tasks[2].cancel()
        with pytest.raises(asyncio.CancelledError):
            await tasks[2]
        assert open_streams(app) == {} and app.cleaned == ["S", "T"]  # a cancelled stream ends unanswered

    asyncio.run(go())


def test_a_stream_that_raises_leaves_no_count_and_counts_as_broken_off():
    async def go():
        app, goes = App(), asyncio.Event()
        goes.set()
        with pytest.raises(OSError):
            await stream(heartbeat(app, "S"), client_goes=goes, fail=OSError("the socket is gone"))
        assert open_streams(app) == {} and app.cleaned == ["S"]

    asyncio.run(go())


def test_a_call_clients_read_of_its_answer_counts_as_its_sessions_stream():
    """A /call client (POST /gradio_api/call/generate, then GET .../generate/EVENT) holds no heartbeat and no message
    stream: its read is the one stream of its session (the event's own id where it named none, as gradio's route finds
    it), so that the API's grace (`api.UNHEARD_S`) does not stop a run whose answer is being read."""
    async def go():
        app, goes, answered = App(), asyncio.Event(), asyncio.Event()
        assert not watching(app)
        assert event_of(scope(app, "/gradio_api/call/generate/E1")) == "E1"
        assert event_of(scope(app, "/gradio_api/call/v2/generate/E1")) == "E1"
        assert event_of(scope(app, "/gradio_api/call/generate", method="POST")) is None
        assert event_of(heartbeat(app, "S")) is None
        read = asyncio.ensure_future(stream(scope(app, "/gradio_api/call/generate/E1"), client_goes=goes,
                                            answer=answered))
        await asyncio.sleep(0)
        assert open_streams(app) == {"E1": 1} and watching(app)
        answered.set()
        await read
        assert open_streams(app) == {} and app.cleaned == []

    asyncio.run(go())
