"""The served app's resources: a cancelled run, a killed API client's (also one killed before it read its answer, and
one gone with no stream open at all, after a grace that a /call client's read is not cut by) or a closed page's stops
and frees its slot, and a client whose heartbeat alone dropped is still served; a direct POST, outside the queue,
is refused; the API builds no charts. The app runs in this process on the bundled pair with a `Showcase` the
test holds, so it can watch the runs in flight (`Showcase.live`) and the API's decoding threads
(`specui-generate-N`).
"""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
import threading
import uuid

import httpx
import pytest

from tests.helpers import ROOT, require_browser, served_app, ui_config
from tests.waits import wait_until

pytestmark = pytest.mark.slow  # serves the app on the bundled pair

gradio_client = pytest.importorskip("gradio_client")
PROMPT = "import os\nimport sys\n\n\ndef main(argv):\n"


@pytest.fixture(scope="module")
def app():
    from specui.loading import PairCache
    from specui.ui.session import Showcase

    config = ui_config()
    showcase = Showcase(config, PairCache())
    with served_app(config, showcase=showcase) as url:
        yield url, showcase


def decoding_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("specui-generate")]


def threads_left() -> str:
    return f"the decoding threads to end ({decoding_threads()} still there)"


def still_decoding(showcase):
    """`wait_until`'s words for the runs to stop, with the number still decoding when it gave up."""
    return lambda: f"the runs to stop ({showcase.live} still decoding)"


def watch_runs(showcase, monkeypatch) -> list[dict]:
    """Each run `showcase` serves from now on, as {"run": its `Run` (once its first frame is out), "at_stop": the rounds
    it had decoded when its stop event was set (None until then)}: a bound stated in rounds, not seconds."""
    watched = []
    real = showcase.run

    def run(*args, stop=None, **kwargs):
        seen = {"run": None, "at_stop": None}
        watched.append(seen)
        if stop is not None:
            def set_and_note(set_=stop.set):
                if seen["at_stop"] is None and seen["run"] is not None:
                    seen["at_stop"] = rounds(seen["run"])
                set_()
            stop.set = set_and_note  # the instance's own: the API's cancel sets this event
        for frame, seen["run"] in real(*args, stop=stop, **kwargs):
            yield frame, seen["run"]

    monkeypatch.setattr(showcase, "run", run)
    return watched


def rounds(run) -> int:
    """The rounds a run decoded so far, its speculative and plain runs together."""
    return len(run.spec.rounds) + (len(run.plain.rounds) if run.plain is not None else 0)


def test_a_cancelled_api_job_stops_and_frees_its_slot(app, monkeypatch):
    url, showcase = app
    client = gradio_client.Client(url, verbose=False)
    client.predict(PROMPT, max_new_tokens=8, api_name="/generate")  # loads and warms the pair
    watched = watch_runs(showcase, monkeypatch)
    job = client.submit(PROMPT, max_new_tokens=1000, compare=True, api_name="/generate")
    wait_until(lambda: watched and watched[0]["run"] is not None and rounds(watched[0]["run"]) >= 3,
               "the long run to decode a few rounds", timeout_s=120)
    # the cancel's request answers once the run has ended: on a thread, so a run deaf to its stop fails the asserts
    # below (it decodes on to the end) rather than the cancel's read timing out
    cancelling = threading.Thread(target=job.cancel, daemon=True, name="cancel")
    cancelling.start()
    # the stop is heard at the next round: at most the round in flight is decoded after it (however slow the machine
    # is: only the bounds of the waits depend on that); the whole run is 1000 tokens twice
    wait_until(lambda: showcase.live == 0, still_decoding(showcase), timeout_s=120)
    run, at_stop = watched[0]["run"], watched[0]["at_stop"]
    assert at_stop is not None, "the cancel never set the run's stop event"
    assert run.phase == "stopped" and rounds(run) - at_stop <= 1, \
        f"the run went on after its stop: {run.phase!r}, {rounds(run) - at_stop} rounds after the {at_stop}th"
    cancelling.join(timeout=60)
    wait_until(lambda: not decoding_threads(), threads_left, timeout_s=60)
    out = client.predict(PROMPT, max_new_tokens=8, api_name="/generate")
    assert out["tokens"]
    # that run's thread hands its answer over as its last act, so it may still be exiting as the answer arrives
    assert showcase.live == 0
    wait_until(lambda: not decoding_threads(), threads_left, timeout_s=60)


def test_a_killed_api_client_stops_its_run(app, tmp_path, monkeypatch):
    """A gradio_client process killed mid-run sends no cancel: its run must still stop (its stop event set, at most the
    round in flight decoded after it) and free its slot, at gradio's own heartbeat. Killed a few rounds in, the client
    often has not opened its message stream yet (it does so a moment after its job joined the queue), only its
    heartbeat: gradio then marked nothing dead and the run decoded on to 'done' (1221 rounds, its stop never set, in 5
    of 6 tries); `client_streams` marks the session's events dead once its last stream is gone. The kill waits for the
    client's heartbeat to be open (its thread connects beside the job's joining): a client killed with no connection
    open at all leaves the server nothing to notice."""
    from specui.ui.client_streams import open_streams
    from tests.gradio_calls import SERVED

    url, showcase = app
    gradio_client.Client(url, verbose=False).predict(PROMPT, max_new_tokens=8, api_name="/generate")  # warm
    watched = watch_runs(showcase, monkeypatch)
    script = tmp_path / "client.py"
    script.write_text(
        "import sys, time\n"
        "import gradio_client\n"
        f"client = gradio_client.Client({url!r}, verbose=False)\n"
        "print(client.session_hash, flush=True)\n"
        f"job = client.submit({PROMPT!r}, max_new_tokens=1000, compare=True, api_name='/generate')\n"
        "time.sleep(600)\n")
    client = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              text=True)
    session, streams = client.stdout.readline().strip(), open_streams(SERVED[url].app)
    killed_after(client, watched, also=lambda: streams.get(session))
    stopped(showcase, watched)


def test_an_api_client_killed_before_it_read_its_answer_stops_its_run(app, tmp_path, monkeypatch):
    """A client that holds its heartbeat and joined the queue (as gradio_client does at first, or a raw HTTP client),
    killed before it opened its message stream (GET /gradio_api/queue/data): its run stops all the same. Without
    `client_streams` gradio marked nothing dead (its heartbeat's end closes the session's state, not its events) and the
    run decoded all its 1000 tokens twice, every time."""
    url, showcase = app
    gradio_client.Client(url, verbose=False).predict(PROMPT, max_new_tokens=8, api_name="/generate")  # warm
    watched = watch_runs(showcase, monkeypatch)
    session = uuid.uuid4().hex
    script = tmp_path / "raw_client.py"
    script.write_text(
        "import json, sys, time\n"
        "import httpx\n"
        "url, session, body = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])\n"
        "beat = httpx.stream('GET', f'{url}gradio_api/heartbeat/{session}', timeout=None)\n"
        "beat.__enter__()  # the heartbeat open, as gradio_client holds it; no message stream\n"
        "httpx.post(url + 'gradio_api/queue/join', json=body, timeout=120).raise_for_status()\n"
        "time.sleep(600)\n")
    body = join_body(url, showcase, session, prompt=PROMPT, max_new_tokens=1000, compare=True)
    client = subprocess.Popen([sys.executable, str(script), url, session, json.dumps(body)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    killed_after(client, watched)
    stopped(showcase, watched)


def test_a_dropped_heartbeat_leaves_a_run_whose_answer_is_read_alone(app, monkeypatch):
    """A client that reads its message stream is there, whatever became of its heartbeat (gradio_client gives its up
    when one is 20 s late, and reads on): its run decodes to its end and the answer comes."""
    from specui.ui.client_streams import open_streams
    from tests.gradio_calls import SERVED

    url, showcase = app
    gradio_client.Client(url, verbose=False).predict(PROMPT, max_new_tokens=8, api_name="/generate")  # warm
    watched = watch_runs(showcase, monkeypatch)
    session, streams = uuid.uuid4().hex, open_streams(SERVED[url].app)
    lines = []

    def read():
        with httpx.stream("GET", url + "gradio_api/queue/data", params={"session_hash": session}, timeout=None) as r:
            for line in r.iter_lines():
                lines.append(line)
                if "process_completed" in line:
                    return

    with httpx.stream("GET", f"{url}gradio_api/heartbeat/{session}", timeout=None) as beat:
        httpx.post(url + "gradio_api/queue/join", json=join_body(url, showcase, session, prompt=PROMPT,
                                                                  max_new_tokens=1000), timeout=120)
        reader = threading.Thread(target=read, daemon=True, name="reader")
        reader.start()
        wait_until(lambda: streams.get(session) == 2 and watched and watched[0]["run"] is not None
                   and rounds(watched[0]["run"]) >= 3, "the run to decode a few rounds, its answer read", timeout_s=120)
        beat.close()  # its connection with it
        wait_until(lambda: streams.get(session) == 1, "the server to see the heartbeat gone", timeout_s=60)
    assert showcase.live == 1, "the run ended before its heartbeat was seen gone: this test proves nothing"
    wait_until(lambda: showcase.live == 0, still_decoding(showcase), timeout_s=300)
    run, at_stop = watched[0]["run"], watched[0]["at_stop"]
    assert run.phase == "done" and at_stop is None, (run.phase, at_stop, rounds(run))
    reader.join(timeout=60)
    assert '"success":true' in lines[-1].replace(" ", ""), lines[-1][:500]


def test_an_api_client_with_no_stream_open_stops_its_run_after_the_grace(app, monkeypatch):
    """A raw HTTP client that joined the queue (POST /gradio_api/queue/join) with no stream open at all, no heartbeat
    either, and is gone: no connection drops, so nothing was marked dead and its run decoded all its 1000 tokens twice,
    holding the slot. Nobody having listened for `api.UNHEARD_S` (1 s here), it stops as a dead client's does."""
    from specui.ui import api

    url, showcase = app
    gradio_client.Client(url, verbose=False).predict(PROMPT, max_new_tokens=8, api_name="/generate")  # warm
    monkeypatch.setattr(api, "UNHEARD_S", 1.0)
    watched = watch_runs(showcase, monkeypatch)
    body = join_body(url, showcase, uuid.uuid4().hex, prompt=PROMPT, max_new_tokens=1000, compare=True)
    httpx.post(url + "gradio_api/queue/join", json=body, timeout=120).raise_for_status()  # and gone
    wait_until(lambda: watched and watched[0]["run"] is not None, "the run to start", timeout_s=120)
    watched[0]["at_kill"] = 0  # gone before it began
    stopped(showcase, watched)


def test_a_call_client_reading_its_answer_is_not_cut_by_the_grace(app, monkeypatch):
    """A /call client (POST /gradio_api/call/generate, then GET its event's stream, the API page's curl recipe) holds
    no heartbeat and no message stream: its read is its session's stream, so its run decodes to its end however
    much longer than the grace (`api.UNHEARD_S`, 1 s here) it takes, and the answer comes."""
    from specui.ui import api

    url, showcase = app
    gradio_client.Client(url, verbose=False).predict(PROMPT, max_new_tokens=8, api_name="/generate")  # warm
    watched = watch_runs(showcase, monkeypatch)
    data = join_body(url, showcase, "", prompt=PROMPT, max_new_tokens=1000, compare=True)["data"]
    event = httpx.post(url + "gradio_api/call/generate", json={"data": data}, timeout=120).json()["event_id"]
    with httpx.stream("GET", f"{url}gradio_api/call/generate/{event}", timeout=None) as read:
        # the grace shortened once the read is open (counted before its answer began): a busy machine's GET more
        # than 1 s after the run began is no failure
        monkeypatch.setattr(api, "UNHEARD_S", 1.0)
        lines = [line for line in read.iter_lines() if line]
    wait_until(lambda: showcase.live == 0, still_decoding(showcase), timeout_s=120)
    run, at_stop = watched[0]["run"], watched[0]["at_stop"]
    assert run.phase == "done" and at_stop is None, (run.phase, at_stop, rounds(run))
    assert "event: complete" in lines and '"stopped": false' in lines[-1], lines[-2:]


def test_a_direct_post_cannot_skip_the_queue(app, monkeypatch):
    """POST /gradio_api/run/generate, gradio's direct route, was open: its run began at once beside the queued one
    (two at a time, where one runs at a time), ahead of every visitor waiting in the queue, and was never told a place.
    It is refused, saying to join the queue; the page's unqueued calls (frames.js's /run/drawn) are served still."""
    url, showcase = app
    watched = watch_runs(showcase, monkeypatch)
    data = join_body(url, showcase, "", prompt=PROMPT, max_new_tokens=8)["data"]
    for route in ("run", "api"):
        answer = httpx.post(f"{url}gradio_api/{route}/generate", json={"data": data}, timeout=120)
        assert answer.status_code == 404 and "join the queue" in answer.text, (route, answer.status_code,
                                                                               answer.text[:300])
    assert not watched, "a direct POST was decoded, outside the queue"
    assert httpx.post(url + "gradio_api/run/drawn", json={"data": ["tag:1"]}, timeout=120).status_code == 200


def join_body(url: str, showcase, session: str, **values) -> dict:
    """/gradio_api/queue/join's body for `/generate` as a raw HTTP client sends it: `values` over the endpoint's own
    defaults, in its order."""
    from specui.ui.api import generate_endpoint

    config = httpx.get(url + "config", timeout=60).json()
    fn = next(d["id"] for d in config["dependencies"] if d.get("api_name") == "generate")
    parameters = inspect.signature(generate_endpoint(showcase)).parameters.values()
    data = [values.get(p.name, p.default) for p in parameters if p.name != "request"]
    return {"data": data, "fn_index": fn, "session_hash": session, "event_data": None, "trigger_id": None}


def killed_after(client: subprocess.Popen, watched: list[dict], also=lambda: True) -> None:
    """SIGKILL `client` (no cancel, no goodbye) once its run has decoded a few rounds (and `also()`); note the rounds
    then."""
    try:
        wait_until(lambda: watched and watched[0]["run"] is not None and rounds(watched[0]["run"]) >= 3 and also(),
                   "the long run to decode a few rounds", timeout_s=120)
    finally:
        client.kill()
        client.wait()
    watched[0]["at_kill"] = rounds(watched[0]["run"])


def stopped(showcase, watched: list[dict]) -> None:
    """Assert the killed client's run was stopped (not decoded to its end: 1221 rounds), at most the round in flight
    decoded after its stop, and its thread gone. The bound is in rounds; only the waits' caps are in seconds."""
    wait_until(lambda: showcase.live == 0, still_decoding(showcase), timeout_s=120)
    run, at_stop, at_kill = watched[0]["run"], watched[0]["at_stop"], watched[0]["at_kill"]
    assert at_stop is not None, (f"the dead client's run was never stopped: killed at round {at_kill}, it ended "
                                 f"{run.phase!r}, {rounds(run)} rounds")
    assert run.phase == "stopped" and rounds(run) - at_stop <= 1, (run.phase, at_kill, at_stop, rounds(run))
    wait_until(lambda: not decoding_threads(), threads_left, timeout_s=60)


def test_the_api_builds_no_charts(app, monkeypatch):
    from specui.ui import charts

    calls = []
    real = charts.all_figures
    monkeypatch.setattr(charts, "all_figures", lambda *a, **k: calls.append(1) or real(*a, **k))
    client = gradio_client.Client(app[0], verbose=False)
    out = client.predict(PROMPT, max_new_tokens=64, compare=True, api_name="/generate")
    assert out["tokens"] and out["identical"] is True
    assert not calls, f"the API built figures {len(calls)} times"


def test_a_closed_page_stops_its_run(app, monkeypatch):
    """A page closed mid-run: its run stops where it stood (never 'done', a run decoded to its end) and frees its slot.
    Two ways race: its heartbeat's end runs the page's unload (`left`: its stop set, at most the round in flight decoded
    after it) and its message stream's end marks its event dead (gradio closes the chat's generator: no round after).
    The bound is in rounds; only the waits' caps are in seconds."""
    require_browser()
    from playwright.sync_api import sync_playwright

    from tools.screenshot import launch_chromium, set_number

    url, showcase = app
    watched = watch_runs(showcase, monkeypatch)
    with sync_playwright() as p:
        browser = launch_chromium(p)
        try:
            page = browser.new_page()
            page.goto(url)
            page.wait_for_selector("#prompt textarea", timeout=60_000)
            set_number(page, "max-new-tokens", 512)
            page.click("#compare input")  # a speculative run and then a plain one: long
            page.fill("#prompt textarea", PROMPT)
            page.click("#send")
            page.wait_for_selector("#chat .specui-caret", timeout=120_000)
            assert showcase.live == 1 and watched[0]["run"] is not None
            at_close = rounds(watched[0]["run"])
            page.close()
            wait_until(lambda: showcase.live == 0, still_decoding(showcase), timeout_s=120)
        finally:
            browser.close()
    run, at_stop = watched[0]["run"], watched[0]["at_stop"]
    assert run.phase != "done", (f"the closed page's run decoded to its end: closed at round {at_close}, it ended "
                                 f"at {rounds(run)}")
    assert at_stop is None or rounds(run) - at_stop <= 1, (run.phase, at_close, at_stop, rounds(run))


def test_a_short_soak_levels_off():
    """40 runs of 8 tokens (after 5 warm-up runs): the server's memory grows little in the second half.
    `python -m tools.soak --runs 200` is the long version. The soak runs in a fresh process, so the RSS
    it samples is the server's alone, not that of a test session that has run hundreds of other tests."""
    import re
    import subprocess
    import sys

    ui_config()  # skips when the bundled pair is missing
    done = subprocess.run([sys.executable, "-m", "tools.soak", "--runs", "40", "--tokens", "8", "--warm-up", "5"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    first, second = map(float, re.search(r"([+-][\d.]+) MB over the first half, ([+-][\d.]+) MB over the second half",
                                         done.stdout).groups())
    assert second < 15, f"{first:+.1f} MB then {second:+.1f} MB: {done.stdout[-1500:]}"


def test_the_app_is_served_though_gradios_reachability_probe_times_out(monkeypatch):
    """`served_app` (tools.screenshot.served_demo) yields the served app though gradio's launch probes the new server
    with a HEAD of 3 s (networking.url_ok) and gets no answer in time, as on a busy machine: launch raised 'When
    localhost is not accessible, a shareable link must be created' (test_closed_sessions failed so in a loaded run).
    A test's own requests wait as long as it needs for the server."""
    import httpx
    from gradio import networking

    def timed_out(url, *, timeout, **kwargs):  # the server's answer later than the probe's timeout
        raise httpx.ReadTimeout(f"no answer within {timeout} s")

    monkeypatch.setattr(networking.httpx, "head", timed_out)
    with served_app(ui_config()) as url:
        monkeypatch.undo()
        assert httpx.get(url, timeout=60).status_code == 200
