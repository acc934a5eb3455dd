"""Waits that hold under load, each on what it awaits (a fixed sleep ran out first on a starved machine): a page's
event answered (`click_and_wait`, `watch_busy` then `wait_answered`), a page at rest (`wait_at_rest`), a key the page's
scripts have had (`press_heard`), the page's own timers run (`page_timers_run`), any condition polled (`wait_until`).
tests/helpers.py gives them too; tests/gradio_calls.py's `wait_quiet` waits for every gradio call of a page.
"""

from __future__ import annotations

import time


def click_and_wait(page, button: str, output: str, *, timeout_ms: int = 120_000) -> None:
    """Click `button` and wait until the event it starts has answered in `output` (gradio's progress came and went).
    A wait on the output's text or round 1 alone passed at once when an earlier run had left the same text there,
    and the next click, made while this run was still pending, was dropped (gradio takes one click of a button at a
    time): a fresh-clone CI run decoded 32 tokens where the test asked for 20."""
    watch_busy(page, output)
    page.click(button)
    wait_answered(page, output, timeout_ms=timeout_ms)


PROGRESS = ".pending, .progress-text"  # gradio's marks of an output whose event has not answered yet


def _busy(output: str) -> str:
    return f"document.querySelector('{output}').querySelector('{PROGRESS}')"


def watch_busy(page, output: str) -> None:
    """Note (in the page) when `output` next shows gradio's progress; `wait_answered` waits for it to come and go. The
    output is waited for first: one in an accordion just opened is drawn a moment later (a CI run's Teach tree panel,
    opened by a click, had no #tree-step-status yet, and the observer had nothing to watch)."""
    page.wait_for_selector(output, state="attached", timeout=60_000)
    page.evaluate(f"""() => {{ window.__specuiBusySeen = false;
        const look = () => {{ if ({_busy(output)}) window.__specuiBusySeen = true; }};
        window.__specuiBusyWatch?.disconnect();
        window.__specuiBusyWatch = new MutationObserver(look);
        window.__specuiBusyWatch.observe(document.querySelector('{output}'), {{subtree: true, childList: true,
                                                                            attributes: true}}); }}""")


def wait_answered(page, output: str, *, timeout_ms: int = 120_000) -> None:
    page.wait_for_function(f"() => window.__specuiBusySeen && !({_busy(output)})", timeout=timeout_ms)


def wait_at_rest(page, *, quiet_ms: int = 1_000, timeout_ms: int = 120_000) -> None:
    """Wait until no output on the page has shown gradio's progress for `quiet_ms` (every event answered, and none
    chained after it started since). An output whose event is pending is greyed: a page looked at as soon as the
    awaited round showed was checked while a second event on the same view was still pending (axe measured its
    faded colours: 2.76:1 where the page at rest reads 4.5:1 and more)."""
    page.evaluate("() => { window.__specuiRestSince = undefined; }")
    page.wait_for_function(f"""() => {{ const now = performance.now();
        if (window.__specuiRestSince === undefined || document.querySelector('{PROGRESS}'))
            window.__specuiRestSince = now;
        return now - window.__specuiRestSince >= {quiet_ms}; }}""", timeout=timeout_ms)


def wait_until(ready, what, *, timeout_s: float = 120, pause=None) -> None:
    """Poll `ready()` until it is true, `pause(seconds)` between looks (time.sleep, or a page's `wait_for_timeout`
    where playwright must deliver events meanwhile), and look once more after `timeout_s` (a loaded CI machine) before
    failing saying `what`: a text, or a function that writes it then (the state that was still awaited)."""
    deadline = time.monotonic() + timeout_s
    while not ready():
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout_s:g} s for {what() if callable(what) else what}")
        (pause or time.sleep)(0.05)


HEARD = """() => { if (!window.__specuiHeard) {
        window.__specuiHeard = {keys: 0, clicks: []};
        // a task queued as the key is dispatched runs once every listener of it has (stopped propagation or not)
        window.addEventListener('keydown', () => setTimeout(() => { window.__specuiHeard.keys += 1; }), true);
        window.addEventListener('click', (event) => {
            const button = event.target.closest && event.target.closest('button');
            window.__specuiHeard.clicks.push(button ? button.id || button.textContent.trim() : event.target.tagName);
        }, true); }
    window.__specuiHeard.clicks = [];
    return window.__specuiHeard.keys; }"""


def press_heard(page, key: str, *, timeout_ms: int = 30_000) -> list[str]:
    """Press `key` and wait until the page's scripts have had it (every listener of its keydown has run); returns the
    buttons clicked meanwhile (ids): keys.js steps by clicking Next or Previous, so a key that must step nothing is
    checked once handled, where a fixed wait ran out under load with the key or its step still on its way."""
    seen = page.evaluate(HEARD)
    page.keyboard.press(key)
    page.wait_for_function("(seen) => window.__specuiHeard.keys > seen", arg=seen, timeout=timeout_ms)
    return page.evaluate("() => window.__specuiHeard.clicks")


def page_timers_run(page, ms: int) -> None:
    """Wait until every timer the page set for `ms` or less from now has run (the page's scripts act a moment after
    a change: keys.js tidies its tables 100 ms after it): a timer of the page's own set now for `ms` fires after them,
    timers running in the order they fall due, where a wait in the test ran out first on a page starved of the CPU."""
    page.evaluate("(ms) => new Promise((done) => setTimeout(done, ms))", ms)
