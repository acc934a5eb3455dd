"""Closed browser sessions leave the server's memory: gradio keeps every session's record (a copy of the page's
components as that session's events left them: its chat, charts and Teach tables, about 1 MB after two chat turns)
until 10,000 sessions have come, deleting only its `gr.State` values an hour after the tab closed. An app that serves
for weeks would hold gigabytes of closed tabs. `keep_swept` drops each closed session's record once gradio's hour for
reopening it has passed unused (a page that comes back within it keeps everything).

The sweep runs inside gradio's own expiry of state (`StateHolder.delete_all_expired_state`, which gradio's server
calls every second on its event loop), so it never runs beside gradio's reading, adding or expiring of sessions,
which take no lock. This reads gradio's state holder (`demo.state_holder`: its sessions, their `is_closed` mark and
the time each was last used), which is not a documented interface: where it is not as gradio 6 has it, nothing is
dropped and the app serves on as before.
"""

from __future__ import annotations

import datetime
import logging
import threading
import time
import weakref

SWEEP_SECONDS = 60.0  # how often closed sessions are looked for
KEPT_SECONDS = 3600  # gradio's own time for reopening a closed session (SessionState.STATE_TTL_WHEN_CLOSED)

log = logging.getLogger(__name__)


def sweep(holder, now: datetime.datetime | None = None) -> int:
    """Drop from gradio's state holder every session whose tab closed and that has not been used for longer than
    gradio keeps a closed session's state; their `gr.State` values go through their delete callbacks first, as
    gradio's own expiry does. Returns how many were dropped."""
    now = now or datetime.datetime.now()
    sessions, used = holder.session_data, holder.time_last_used
    with holder.lock:
        gone = [key for key, session in list(sessions.items())
                if getattr(session, "is_closed", False) and key in used
                and (now - used[key]).total_seconds() > getattr(session, "STATE_TTL_WHEN_CLOSED", KEPT_SECONDS)]
    for key in gone:
        holder.delete_state(key)
        with holder.lock:
            sessions.pop(key, None)
            used.pop(key, None)
    return len(gone)


def keep_swept(demo, every: float | None = None, *, launched: threading.Event | None = None) -> threading.Thread:
    """Have `demo`'s closed sessions swept every `every` seconds (default SWEEP_SECONDS) once it serves: a short
    daemon thread waits for the state holder that `demo.launch` makes and adds the sweep to its expiry, then ends.
    `launched`: set by the caller once `demo.launch` has returned or raised (`blocks.launch`): a launch that made no
    state holder by then ends the thread too."""
    every = SWEEP_SECONDS if every is None else every
    app = weakref.ref(demo)
    launched = launched or threading.Event()
    stale = getattr(demo, "state_holder", None)  # an earlier launch's (gradio makes one a launch)

    def install() -> bool:  # False while there is no state holder yet (and the launch may still make one)
        returned = launched.is_set()  # asked first: a launch that returns after this made its holder before it
        demo = app()
        holder = None if demo is None else getattr(demo, "state_holder", None)
        if holder is None or holder is stale:
            return demo is None or returned
        expire = holder.delete_all_expired_state
        last = [time.monotonic()]

        def expire_and_sweep():
            expire()
            if time.monotonic() - last[0] >= every:
                last[0] = time.monotonic()
                try:
                    sweep(holder)
                except (AttributeError, TypeError, KeyError) as e:  # a gradio whose state holder is not as gradio 6's
                    log.warning("closed sessions are not swept (gradio's state holder changed: %s)", e)
                    holder.delete_all_expired_state = expire

        holder.delete_all_expired_state = expire_and_sweep
        return True

    def run():
        while not install():
            time.sleep(0.05)

    thread = threading.Thread(target=run, name="specui-closed-sessions", daemon=True)
    thread.start()
    return thread
