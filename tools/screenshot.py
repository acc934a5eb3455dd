"""Drive Debian's Chromium with Python playwright, for the browser test and the README screenshot.

Never `playwright install`: the browser is the system's /usr/bin/chromium (apt-get install chromium).
`python -m tools.screenshot assets/screenshot.png` serves the app (its default preset, the chat model)
on a free port, runs a greedy chat prompt with compare on, and saves a screenshot of the page.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import sys
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--no-first-run", "--disable-gpu"]
SHOT_PROMPT = "Write a Python function that checks whether a word is a palindrome, with a docstring."


def chromium_path() -> str | None:
    """The system Chromium, or None when it is not installed."""
    return CHROMIUM if Path(CHROMIUM).exists() else shutil.which("chromium")


def launch_chromium(playwright):
    return playwright.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)


# launch's options for an app served in this process: no reachability probe. gradio's launch sends the new server a
# HEAD with a 3 s timeout and, with no answer in time (a busy machine), raised "When localhost is not accessible, a
# shareable link must be created"; the page or client that comes next waits for the server as long as it needs
NO_PROBE = {"_frontend": False}


@contextlib.contextmanager
def served_demo(config, *, preload: bool = True, showcase=None):
    """The app (`config`; a given `showcase` serves the requests) served in this process on a free port: yields
    (the gradio Blocks, its URL), and closes the server after, also when the launch raised once it had started the
    server (gradio's own request to it failed: a proxy in HTTP_PROXY that does not reach this machine)."""
    from specui.ui.blocks import build, launch

    demo = build(config, preload=preload, showcase=showcase)
    port = free_port()
    try:
        launch(demo, server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True, **NO_PROBE)
        yield demo, f"http://127.0.0.1:{port}/"
    finally:
        demo.close()


@contextlib.contextmanager
def served(config, *, preload: bool = True, showcase=None):
    """`served_demo`, yielding the URL alone."""
    with served_demo(config, preload=preload, showcase=showcase) as (_, url):
        yield url


def open_page(browser, url: str, **options):
    """A new 1400 × 1000 page of the app at `url` (`options`: more of `new_page`'s), once its prompt box shows and the
    page's scripts have run (they run after gradio draws the page: a key pressed before keys.js is there is lost)."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000}, **options)
    page.goto(url)
    page.wait_for_selector("#prompt textarea", timeout=60_000)
    wait_scripts(page)
    return page


def wait_scripts(page) -> None:
    """Wait until the page's scripts have run: blocks.JS runs them all at once, after gradio draws the page, and
    keys.js (which sets window.specuiTakePresses) among them; a key pressed before it is there is lost."""
    page.wait_for_function("() => window.specuiTakePresses", timeout=60_000)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def set_number(page, elem_id: str, value) -> None:
    """Type into a slider's or number's input box and commit it."""
    box = page.locator(f"#{elem_id} input[type=number]").first
    box.fill(str(value))
    box.press("Enter")


# the chat's event is still answering: gradio's progress (a message waiting for its turn) or the reply's ↻ and ↶
# greyed out (a run streaming); they stay so until the event's last answer, which comes after the reply's last frame
CHAT_BUSY = "document.querySelector('#chat .progress-text, #chat .pending, #chat button[disabled]')"
# the chat's last reply is a finished run's (its first frames are a note: "…", loading lines) or an error, and its
# event has answered: the reply's last frame alone passed while the run's last answer (its download, the way to the
# Teach tab) was still to come, and a message sent then was refused as "still being answered" or, shown at once,
# was wiped from the chat by that last answer, which brought back the chat as it was, finished reply last
FINISHED = ("() => { const m = document.querySelectorAll('#chat [data-testid=bot]'); const last = m[m.length - 1];"
            " return last && last.querySelector('.specui-out, .specui-error') && !last.querySelector('.specui-caret')"
            f" && !document.querySelector('#stats .stat-status')?.textContent.includes('…') && !{CHAT_BUSY}; }}")


def run_prompt(page, prompt: str, *, timeout_ms: int = 120_000) -> None:
    """Type a prompt, press Send, wait until the run is finished (no caret left in the chat)."""
    before = page.locator("#chat .specui-prompt").count()
    page.fill("#prompt textarea", prompt)
    page.click("#send")
    page.wait_for_function(
        "n => document.querySelectorAll('#chat .specui-prompt').length > n", arg=before, timeout=timeout_ms)
    page.wait_for_function(FINISHED, timeout=timeout_ms)


def screenshot(path: str, *, config_path: str | None = None, max_new_tokens: int = 96) -> None:
    from playwright.sync_api import sync_playwright

    from specui.presets import load_config

    with served(load_config(config_path)) as url, sync_playwright() as p:
        browser = launch_chromium(p)
        page = open_page(browser, url, device_scale_factor=1)
        set_number(page, "max-new-tokens", max_new_tokens)
        page.click("#compare input")
        run_prompt(page, SHOT_PROMPT)
        error = page.locator("#chat [data-testid=bot] .specui-error")
        if error.count():  # a picture of a failed run would go into the README as if it were the app at work
            said = error.last.inner_text()
            browser.close()
            raise SystemExit(f"tools.screenshot: the run ended in an error, so no picture was written: {said}")
        replay_s = page.evaluate("() => Math.max(0, ...[...document.querySelectorAll('#race .race-fill')]"
                                 ".map(e => parseFloat(e.style.animationDuration) || 0))")
        page.wait_for_timeout(1500 + 1000 * min(replay_s, 60))  # the race replay and plotly transitions end
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=path, full_page=True)
        browser.close()


def parse_args(argv=None):
    """The command line: where to save the picture (PNG or JPEG, refused before the app loads) and the models.yaml."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m tools.screenshot", description="Serve the app, run a greedy "
                                     "chat prompt with compare on in Debian's Chromium, and save a screenshot.")
    parser.add_argument("path", nargs="?", default="assets/screenshot.png",
                        help="the picture to write, .png or .jpg (default: %(default)s)")
    parser.add_argument("config", nargs="?", default=None, help="a models.yaml (default: the one beside specui/)")
    args = parser.parse_args(argv)
    if Path(args.path).suffix.lower() not in (".png", ".jpg", ".jpeg"):
        parser.error(f"{args.path}: give a .png or .jpg file name")
    return args


if __name__ == "__main__":
    args = parse_args(sys.argv[1:])
    screenshot(args.path, config_path=args.config)
