"""What the Teach tab's controls send the server when the user changed nothing, and when they pick once, counted in a
real browser (every queued or unqueued call the page sends, named by its function): a Tab through the preset list
sends none (it sent one, a no-op the server answered by leaving the drafter and K alone), and a pick of a preset by the
mouse or by the keys sends one that brings its drafter and K (the mouse's sent two: gradio fires the list's `input`
as it is picked and again as the focus leaves it); a second pick made while the first's call is on its way is
sent after it. Served on an app of its own whose models.yaml has two presets
(the folder's `app` has one), in the folder's Chromium."""

from __future__ import annotations

import json

import pytest

from tests.app.teach_page import PROMPT, decode_lesson, teach_app, teach_page, tiny_showcase
from tests.gradio_calls import SERVED, requests_during, wait_quiet
from tests.waits import page_timers_run

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # drives Chromium on a served Teach tab

LOOKUP = "tiny-lookup"  # the second preset: prompt lookup at K 2, where the first ("tiny") drafts with its model at 4


@pytest.fixture(scope="module")
def page(browser, tmp_path_factory):
    root = tmp_path_factory.mktemp("teach-two-presets")
    more = (f"  {LOOKUP}:\n    target: {root / 'target'}\n    drafter: prompt_lookup\n    dtype: float32\n"
            "    device: cpu\n    num_draft_tokens: 2\n")
    with teach_app(tiny_showcase(root, more=more)) as url, teach_page(browser, url) as page:
        yield page


def calls_during(page, act) -> list[str]:
    """The server calls the page sends while `act()` runs and until every one has answered, each named by its function
    (`on_preset`; a stepping event's `handler`)."""
    sent = [json.loads(r.post_data or "{}").get("fn_index") for r in requests_during(page, act)
            if "/queue/join" in r.url or "/run/predict" in r.url]
    demo = next(demo for url, demo in SERVED.items() if page.url.startswith(url))
    return [getattr(demo.fns[i].fn, "func", demo.fns[i].fn).__name__ if i in demo.fns else repr(i) for i in sent]


def chosen(page) -> tuple[str, str, str]:
    """(the preset, the drafter and K) the Teach tab's controls show."""
    return (page.locator("#teach-preset input").input_value(),
            page.locator("#teach-drafter input:checked").get_attribute("value"),
            page.locator("#teach-k input[type=number]").input_value())


def pick_by_mouse(page, preset: str):
    def act():
        page.click("#teach-preset input")
        page.get_by_role("option", name=preset, exact=True).click()
    return act


def test_a_tab_through_the_preset_list_calls_nothing(page):
    page.locator("#teach-drafter").get_by_label("EAGLE", exact=True).check()  # not the preset's: kept
    wait_quiet(page)
    before = chosen(page)

    def tab_through():
        page.locator("#teach-preset input").focus()
        page.keyboard.press("Tab")

    assert calls_during(page, tab_through) == []
    assert chosen(page) == before == ("tiny", "EAGLE", before[2])


def test_a_preset_picked_by_the_mouse_is_one_call_that_brings_its_drafter_and_k(page):
    assert calls_during(page, pick_by_mouse(page, LOOKUP)) == ["on_preset"]
    assert chosen(page) == (LOOKUP, "prompt lookup", "2")
    calls_during(page, pick_by_mouse(page, "tiny"))
    assert chosen(page) == ("tiny", "draft model", "4")


def test_a_preset_picked_by_the_keys_is_one_call_that_brings_its_drafter_and_k(page):
    calls_during(page, pick_by_mouse(page, LOOKUP))  # the list's last preset: ArrowUp picks the one before it

    def by_keys():
        page.locator("#teach-preset input").focus()
        page.keyboard.press("ArrowUp")
        page.keyboard.press("Enter")

    assert calls_during(page, by_keys) == ["on_preset"]
    assert chosen(page) == ("tiny", "draft model", "4")


def test_escape_on_the_auto_plays_unchanged_slider_calls_nothing_and_a_move_sets_its_pace(page):
    """The auto-play's seconds per round: Escape (or its ↺) at the value it has sent the server a call that set the
    timer as it was. The pace is set in the page now; a move of the slider while it plays still sets its timer's
    interval (each interval the page's timers start is noted)."""
    for act in ("#step-speed input[type=range]", "#step-speed input[type=number]"):
        assert calls_during(page, lambda: (page.locator(act).focus(), page.keyboard.press("Escape"))) == [], act
    assert calls_during(page, lambda: page.locator("#step-speed .reset-button").click()) == []
    decode_lesson(page, PROMPT, new_tokens=32)
    page.click("#step-play")
    page.wait_for_function("() => document.querySelector('#step-play').innerText.includes('Pause')")
    page.evaluate("""() => { window.intervals = []; const start = window.setInterval;
        window.setInterval = (fn, ms, ...rest) => { window.intervals.push(ms); return start(fn, ms, ...rest); }; }""")
    page.locator("#step-speed input[type=range]").focus()
    page.keyboard.press("ArrowRight")  # 1.5 -> 1.6 s a round
    page.wait_for_function("() => window.intervals.includes(1600)", timeout=30_000)
    page.click("#step-play")  # Pause
    wait_quiet(page)


def test_a_preset_picked_again_while_the_last_pick_is_on_its_way_ends_on_the_one_picked_last(page):
    """Two picks, the first's call held on its way (playwright's route): the page sends the second after the first has
    landed (the hidden button's event is always_last), so the list, the drafter and K end on the last preset picked.
    With gradio's default for a click ("once") the second pick was dropped: 'tiny' shown with tiny-lookup's K 2."""
    calls_during(page, pick_by_mouse(page, "tiny"))
    demo = next(demo for url, demo in SERVED.items() if page.url.startswith(url))
    picks = {i for i, f in demo.fns.items() if getattr(getattr(f.fn, "func", f.fn), "__name__", "") == "on_preset"}
    held = []

    def hold(route):
        if not held and json.loads(route.request.post_data or "{}").get("fn_index") in picks:
            held.append(route)
        else:
            route.continue_()

    page.route("**/queue/join*", hold)
    try:
        pick_by_mouse(page, LOOKUP)()
        for _ in range(100):  # until the pick's call is on its way, held
            if held:
                break
            page.wait_for_timeout(100)
        assert held, "the pick sent no call"
        pick_by_mouse(page, "tiny")()  # while the first is held
        page_timers_run(page, 100)
    finally:
        for route in held:
            route.continue_()
        page.unroute("**/queue/join*")
    wait_quiet(page)
    assert chosen(page) == ("tiny", "draft model", "4")
