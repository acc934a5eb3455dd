"""A browser page's gradio calls, followed through playwright's request events, for tests that must wait until every
event a page started (presses, clicks, auto-play ticks, whose progress is hidden) has answered: `track_calls`,
`wait_quiet`; `requests_during` lists the calls an act sent. `SERVED` maps a URL served in this process to its Blocks,
so a wait can ask the server whether an event of the page is still pending. `chat_call` submits the app's `/chat`
event through `gradio_client`, its controls named."""

from __future__ import annotations

import contextlib
import json
import time
from urllib.parse import parse_qs, urlsplit

# a page's gradio calls: an event sent (queued or not), and the stream of a queued event's answers, which the server
# closes once the page has no event left pending
GRADIO_CALLS = ("/queue/join", "/queue/data", "/run/predict")
QUIET_MS = 1500  # no call open that long: the events that presses, clicks and ticks started have all answered
SERVED: dict = {}  # the URL `app` serves the Teach tab at: its Blocks (wait_quiet reads the queue's pending events)


def track_calls(page) -> None:
    """Note on `page.calls` the page's gradio calls in flight, when one last started or ended, and the gradio sessions
    of the document the page shows (`wait_quiet`): a reload or a goto starts another, and the one before is
    forgotten, its events left pending on the server for good (wait_quiet asked about it and timed out)."""
    page.calls = {"open": set(), "last": time.monotonic(), "sessions": set()}

    def started(request):
        if request.is_navigation_request() and request.frame == page.main_frame:  # the next document's own session
            page.calls["sessions"].clear()  # (a tab's history.replaceState navigates without a request: kept)
        if any(part in request.url for part in GRADIO_CALLS):
            page.calls["open"].add(request)
            page.calls["last"] = time.monotonic()
            page.calls["sessions"].update(session_of(request))

    def ended(request):
        if request in page.calls["open"]:
            page.calls["open"].discard(request)
            page.calls["last"] = time.monotonic()

    page.on("request", started)
    page.on("requestfinished", ended)
    page.on("requestfailed", ended)


def session_of(request) -> set[str]:
    """The gradio session a call is of: in a stream's address, or in a join's or predict's JSON body."""
    sessions = set(parse_qs(urlsplit(request.url).query).get("session_hash", ()))
    with contextlib.suppress(Exception):
        sessions.add(json.loads(request.post_data)["session_hash"])
    return sessions


def pending(page) -> bool | None:
    """Whether the server (`app`'s, in this process) holds an event of the page's sessions queued, running or with its
    answer not yet sent (None: the page is not on a server `app` serves)."""
    demo = next((demo for url, demo in SERVED.items() if page.url.startswith(url)), None)
    if getattr(demo, "_queue", None) is None:
        return None
    return any(demo._queue.pending_event_ids_session.get(session) for session in page.calls["sessions"])


def wait_quiet(page, *, quiet_ms: int = QUIET_MS, timeout_ms: int = 60_000) -> None:
    """Wait until `page` (`track_calls`) has had no gradio call open for `quiet_ms`: every event its presses, clicks
    and auto-play ticks started has answered. A fixed wait after the round expected showed passed on a round an
    earlier state had left there (a burst that ends where it began), and an answer later than the wait (a busy
    machine) showed after the check, in the next test. A stream of answers (queue/data) counts while the server has
    an event of the page pending: gradio's client sometimes opens one for an event already answered, and the server
    holds it open with nothing to send until the page's next event (waited for, it timed out a page at rest)."""
    deadline = time.monotonic() + timeout_ms / 1000
    while True:
        waiting = pending(page)
        calls = {r for r in page.calls["open"] if waiting is not False or "/queue/data" not in r.url}
        if waiting:
            page.calls["last"] = time.monotonic()
        elif not calls and time.monotonic() - page.calls["last"] >= quiet_ms / 1000:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"gradio calls still open after {timeout_ms} ms: {sorted(r.url for r in calls)}"
                                 f"{' (an event pending on the server)' if waiting else ''}")
        page.wait_for_timeout(100)  # playwright delivers the request events while it waits


def chat_call(client, prompt: str, **named):
    """The app's `/chat` event submitted through `gradio_client` (`client`): the prompt, then every control the event
    reads at the value the page opens with, those in `named` (by elem_id, '-' written '_': num_draft_tokens=4,
    max_new_tokens=16) instead. Returns the job. A control added to the page takes its default here, where a call of
    positional values broke."""
    dependency = next(d for d in client.config["dependencies"] if d.get("api_name") == "chat")
    components = {c["id"]: c for c in client.config["components"]}
    controls = [components[i] for i in dependency["inputs"] if components[i]["type"] != "state"]  # states: the server's
    names = [(c["props"].get("elem_id") or "").replace("-", "_") for c in controls]
    if unnamed := [c["props"].get("label") or c["type"]
                   for c, n in zip(controls, names) if names.count(n) > 1 or not n]:
        raise TypeError(f"/chat reads controls with no elem_id or a shared one, which chat_call can't tell apart: "
                        f"{unnamed}")  # one value would be sent for them all
    if "prompt" not in names:
        raise TypeError(f"/chat reads no control named prompt, so the prompt would not be sent; it reads {names}")
    if unknown := sorted(set(named) - set(names)):
        raise TypeError(f"/chat has no control {unknown}; it reads {names}")
    values = {**{n: c["props"].get("value") for n, c in zip(names, controls)}, **named, "prompt": prompt}
    return client.submit(*(values[n] for n in names), api_name="/chat")


def requests_during(page, act) -> list:
    """The gradio calls (playwright requests to GRADIO_CALLS) the page sent while `act()` ran and the handlers it
    started ran out: quiet before, the blur's handlers run (a call they send starts within them), quiet after."""
    from tests.waits import page_timers_run

    wait_quiet(page)
    seen = []

    def note(request):
        if any(part in request.url for part in GRADIO_CALLS):
            seen.append(request)

    page.on("request", note)
    try:
        act()
        page_timers_run(page, 100)
        wait_quiet(page)
    finally:
        page.remove_listener("request", note)
    return seen
