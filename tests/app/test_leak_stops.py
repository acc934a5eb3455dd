"""`Stops.gone`, what a closed tab's unload calls, without a server: the session's waiting messages (their runs
dropped from the queue with the tab) no longer count as busy for anyone, its run in flight is told to stop, and
nothing of it stays in the per-session dicts once that run ends. The served app in a real browser:
tests/app/test_leak_closed_tab.py."""

from __future__ import annotations

from specui.ui.stops import Stops


def held(stops: Stops) -> int:
    """Entries the per-session dicts hold."""
    return len(stops._events) + len(stops._waiting) + len(stops._shown)


def test_a_gone_sessions_waits_end_and_its_run_is_told_to_stop():
    stops = Stops()
    stops.wait("gone", ["its first message"])
    stops.wait("gone", ["its second message"])
    running = stops.start("gone")  # the first runs, the second waits behind it
    stops.wait("other", ["another visitor's message"])
    stops.gone("gone")
    assert running.is_set()  # ends at its next round: nobody reads it
    assert stops.busy("gone")  # until its run ends
    stops.end("gone", running)
    assert not stops.busy("gone") and stops.busy("other")
    other = stops.start("other")
    stops.end("other", other)
    assert not stops.any_busy() and held(stops) == 0


def test_many_tabs_closed_while_their_messages_wait_leave_nothing_behind():
    stops = Stops()
    for visitor in range(300):
        stops.wait(f"tab-{visitor}", [f"message {visitor}"])
        if visitor % 3 == 0:
            stops.set(f"tab-{visitor}")  # some pressed Stop first
        stops.gone(f"tab-{visitor}")
    assert not stops.any_busy() and held(stops) == 0
