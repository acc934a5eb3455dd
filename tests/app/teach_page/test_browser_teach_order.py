"""Every answer that draws the Teach tab's rounds lands in order, in a real browser over the tiny pair of
test_browser_teaching, on a server made slow where a loaded machine is slow (a handler of the real app slowed here):
a second drafter's comparison or a Decode answered after a press that stepped the rounds (the page used to end on
the old round, the server on the new one), a prompt typed back while its last edit's event was pending (the status
line kept "The prompt changed"), auto-play ticks that pile up while a step is on its way (the view jumped rounds)."""

from __future__ import annotations

import threading
import time

import pytest

from specui.ui import teach_status, teaching
from tools.screenshot import set_number
from tests.app.teach_page import lesson_page, wait_round
from tests.app.teach_page.test_browser_teach_keys import go_to, settled, shown
from tests.gradio_calls import wait_quiet

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # drives Chromium on the served app


@pytest.fixture(scope="module")
def page(app, browser):
    with lesson_page(browser, app[1]) as page:
        yield page


def slowed(monkeypatch, name: str, seconds: float, *, module=teaching) -> threading.Event:
    """`module.NAME` made `seconds` slower (a loaded machine); the event is set as a call of it starts."""
    started, real = threading.Event(), getattr(module, name)

    def slow(*args, **kwargs):
        started.set()
        time.sleep(seconds)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, slow)
    return started


def held_first(monkeypatch, name: str, *, module=teaching) -> tuple[threading.Event, threading.Event]:
    """`module.NAME`'s first call held on the server until the test lets it go, the calls after it not: (set as it is
    held, set to let it go). A race test's second click then surely lands while the first is answered, where a sleep
    let the first answer leave before it on a loaded machine."""
    held, go, real = threading.Event(), threading.Event(), getattr(module, name)

    def first_held(*args, **kwargs):
        if not held.is_set():
            held.set()
            go.wait(120)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, first_held)
    return held, go


def held_answer(monkeypatch, name: str, *, module=teaching) -> tuple[threading.Event, threading.Event]:
    """`module.NAME`'s first call made, then its answer held on the server until the test lets it go (`held_first`
    holds it before: a lock the call takes is then free while it is held, and what the call moved is moved)."""
    held, go, real = threading.Event(), threading.Event(), getattr(module, name)

    def answer_held(*args, **kwargs):
        answer = real(*args, **kwargs)
        if not held.is_set():
            held.set()
            go.wait(120)
        return answer

    monkeypatch.setattr(module, name, answer_held)
    return held, go


def click(page, *ids: str) -> None:
    page.evaluate("(ids) => ids.forEach(id => document.querySelector(`#${id}`).click())", list(ids))


def compare_round(page) -> str | None:
    return page.evaluate("() => document.querySelector('#compare-view .teach-compare[data-round]')?.dataset.round")


def watch_rounds(page) -> None:
    """Note in the page every (step view's round, compare view's round) it shows from now (`rounds_seen`)."""
    page.evaluate("""() => { window.roundsSeen = [];
        const round = (selector) => +(document.querySelector(selector)?.dataset.round || 0);
        new MutationObserver(() => {
            const now = [round('#step-view .teach-step[data-round]'),
                         round('#compare-view .teach-compare[data-round]')];
            const last = window.roundsSeen.at(-1);
            if (!last || last[0] !== now[0] || last[1] !== now[1]) window.roundsSeen.push(now); })
        .observe(document.querySelector('#teach-tab'), {childList: true, subtree: true}); }""")


def rounds_seen(page) -> list[list[int]]:
    return page.evaluate("() => window.roundsSeen")


def test_a_step_made_as_a_comparison_answers_is_the_round_both_views_end_on(page, monkeypatch):
    go_to(page, 3)
    # the comparison is computed; its answer (the export last) leaves after the step below has moved the rounds
    started = slowed(monkeypatch, "exported", 2)
    watch_rounds(page)
    page.click("#teach-second input")
    page.locator("[role=option]", has_text="prompt lookup").first.click()
    page.locator("#step-status").click()  # the list closed, the focus off it
    assert started.wait(60), "the comparison never answered"
    click(page, "step-next")
    wait_round(page, 4)
    wait_quiet(page)
    seen = rounds_seen(page)
    # never the old round again once the step showed (its answer drawn for round 3 landed after the step's 4)
    assert seen[-1] == [4, 4] and all(step == 4 for step, _ in seen[[s for s, _ in seen].index(4):]), seen
    click(page, "step-next")  # the server on round 4 too: the next press shows 5
    settled(page, 5)
    page.click("#teach-second input")
    page.locator("[role=option]", has_text="none").first.click()
    page.locator("#step-status").click()
    page.wait_for_selector("#compare-view .teach-compare.teach-empty", timeout=30_000)


def test_presses_made_as_decode_answers_are_the_round_it_ends_on(page, monkeypatch):
    go_to(page, 3)
    started = slowed(monkeypatch, "exported", 2)  # Decode's answer leaves after its run is on show on the server
    click(page, "step-start")
    assert started.wait(120), "Decode never answered"
    click(page, "step-next", "step-next", "step-next")  # the new run's rounds 2, 3, 4 on the server
    page.wait_for_function("() => document.querySelector('#step-status').innerText.includes('Decoded')")
    wait_quiet(page)
    assert shown(page)[0] == 4
    click(page, "step-next")
    settled(page, 5)


def test_a_prompt_typed_back_while_its_edit_is_answered_says_the_rounds_are_its(page, monkeypatch):
    wait_quiet(page)
    decoded = page.locator("#step-status").inner_text()
    assert decoded.startswith("Decoded")
    slowed(monkeypatch, "conversation_words", 1, module=teach_status)  # every prompt_edited call reads it first
    box = page.locator("#teach-prompt textarea")
    prompt = box.input_value()
    box.press_sequentially("import os", delay=150)
    box.fill(prompt)  # the decoded prompt again, while the last key's event is on its way
    page.locator("#step-status").click()
    wait_quiet(page)  # every edit's event answered, the one held back (always_last) for the last edit too
    try:  # and its answer drawn
        page.wait_for_function("(want) => document.querySelector('#step-status').innerText === want", arg=decoded,
                               timeout=10_000)
    except Exception as e:
        raise AssertionError(f"the status line says {page.locator('#step-status').inner_text()!r}") from e


def test_auto_play_ticks_on_a_slow_server_step_one_round_each(page, monkeypatch):
    go_to(page, 1)
    set_number(page, "step-speed", 0.2)
    slowed(monkeypatch, "render_step", 1)  # every step answered a second late: five ticks come meanwhile
    watch_rounds(page)
    page.click("#step-play")
    # three steps shown (each a second late, five ticks come meanwhile): a view that jumped rounds gets there too
    page.wait_for_function("() => +document.querySelector('#step-view .teach-step').dataset.round >= 4",
                           timeout=60_000)
    page.click("#step-play")
    page.wait_for_function("() => document.querySelector('#step-play').innerText.includes('Play')")
    wait_quiet(page)
    steps = [step for step, _ in rounds_seen(page)]
    seen = [step for i, step in enumerate(steps) if i == 0 or step != steps[i - 1]]
    assert len(seen) >= 2 and all(b - a == 1 for a, b in zip(seen, seen[1:])), seen
