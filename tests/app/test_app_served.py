"""The served app's resources: a cancelled run or a closed page's stops and frees its slot (a killed API client's
does not before its end: gradio seldom notices, xfail); the API builds no charts. The app runs in this process on the
bundled pair with a `Showcase` the test holds, so it can watch the runs in flight (`Showcase.live`) and the API's
decoding threads (`specui-generate-N`).
"""

from __future__ import annotations

import subprocess
import sys
import threading

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


@pytest.mark.xfail(strict=False, reason="gradio 6.31 seldom marks a SIGKILLed API client's event dead before its "
                   "run ends: at a 0.25 s heartbeat the run decoded on to 'done' (1221 rounds, 10-14 s after the "
                   "kill, its stop never set) in 5 of 6 tries here (load 7 to 10), alone or after the cancel test; "
                   "the slot is freed only at the run's end")
def test_a_killed_api_client_stops_its_run(app, tmp_path, monkeypatch):
    """A client process killed mid-run sends no cancel: Gradio only marks its event dead when the stream drops, and
    the run must still stop (its stop event set, at most the round in flight decoded after it) and free its slot.
    At gradio's default heartbeat (15 s, longer than this whole run takes here) the old form of this test, the slot
    free within 10 s, passed by the run simply finishing; even at 0.25 s gradio mostly misses the dead client."""
    monkeypatch.setenv("GRADIO_HEARTBEAT_INTERVAL", "0.25")  # read by each stream as it opens
    url, showcase = app
    gradio_client.Client(url, verbose=False).predict(PROMPT, max_new_tokens=8, api_name="/generate")  # warm
    watched = watch_runs(showcase, monkeypatch)
    script = tmp_path / "client.py"
    script.write_text(
        "import sys, time\n"
        "import gradio_client\n"
        f"job = gradio_client.Client({url!r}, verbose=False).submit({PROMPT!r}, max_new_tokens=1000, compare=True,"
        " api_name='/generate')\n"
        "time.sleep(600)\n")
    client = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: watched and watched[0]["run"] is not None and rounds(watched[0]["run"]) >= 3,
                   "the long run to decode a few rounds", timeout_s=120)
    finally:
        client.kill()  # SIGKILL: no cancel, no goodbye
        client.wait()
    wait_until(lambda: showcase.live == 0, still_decoding(showcase), timeout_s=120)
    run, at_stop = watched[0]["run"], watched[0]["at_stop"]
    assert at_stop is not None, f"the dead client's run was never stopped: it ended {run.phase!r}, {rounds(run)} rounds"
    assert run.phase == "stopped" and rounds(run) - at_stop <= 1, (run.phase, at_stop, rounds(run))
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


def test_a_closed_page_stops_its_run(app):
    require_browser()
    from playwright.sync_api import sync_playwright

    from tools.screenshot import launch_chromium, set_number

    url, showcase = app
    with sync_playwright() as p:
        browser = launch_chromium(p)
        page = browser.new_page()
        page.goto(url)
        page.wait_for_selector("#prompt textarea", timeout=60_000)
        set_number(page, "max-new-tokens", 512)
        page.click("#compare input")  # a speculative run and then a plain one: long
        page.fill("#prompt textarea", PROMPT)
        page.click("#send")
        page.wait_for_selector("#chat .specui-caret", timeout=120_000)
        assert showcase.live == 1
        page.close()
        try:
            wait_until(lambda: showcase.live == 0, still_decoding(showcase), timeout_s=30)
        finally:
            browser.close()


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
