"""The Tab order in a real browser: a keyboard user meets the controls that matter, each once.

Gradio's sliders each had a ↺ (reset to the default value) as a Tab stop of its own between the number box and the
slider, and plotly's tool bars nine or ten buttons per chart (zoom, pan, select, autoscale, its logo's link): 38 stops
on the Chat tab's four charts. The resets stay for the mouse, out of the Tab order, and Escape in a slider's number box
or on the slider resets it (keys.js); a chart's bar is one stop, its download as a PNG at first, which the keyboard
works, and its arrow keys move between its buttons (charts.js: WAI-ARIA's toolbar), on the Teach tab as well (it kept
none: a keyboard could not save a chart there). Escape and ↺ put back the value the preset chosen set (K, the
confidence stop), not the one the page opened with. A radio group (a Drafter) is one stop whose arrow keys move the
choice (keys.js: gradio 6 named each option apart, a stop each). One served app, one browser.
"""

from __future__ import annotations

import pytest

from tests.app.test_browser_a11y import _page, app  # noqa: F401 - one served app, one browser; its pages
from tests.gradio_calls import wait_quiet
from tests.helpers import open_page
from tools.screenshot import set_number

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # drives Chromium on the served app

# what has the focus: its tag, its class, its name, the id of the element around it
FOCUS = """() => { const e = document.activeElement, around = e.closest('[id]');
    return {tag: e.tagName, cls: String(e.className.baseVal ?? e.className), id: around ? around.id : '',
            name: e.getAttribute('aria-label') || (e.innerText || '').slice(0, 30)}; }"""


def _wait_tidied(page, tab: str) -> None:
    """Until keys.js and charts.js have seen the page: every chart shown has its tool bar, each bar tidied, and the
    sliders' resets out of the Tab order (15 s at most: a page never tidied fails on what the test finds, named). A
    chart plotly drew last, on a loaded machine, had no bar yet when the first one was tidied."""
    from playwright.sync_api import TimeoutError as Timeout

    page.wait_for_selector(f"{tab} .modebar", state="attached", timeout=30_000)
    try:
        _tidied(page, tab)
    except Timeout:
        pass


def _tidied(page, tab: str) -> None:
    page.wait_for_function(f"""() => {{ const bars = [...document.querySelectorAll('{tab} .modebar')];
        const plots = [...document.querySelectorAll('{tab} .js-plotly-plot')].filter(p => p.offsetParent !== null);
        const resets = [...document.querySelectorAll('{tab} .reset-button')];
        return bars.length > 0 && plots.every(p => p.querySelector('.modebar'))
            && resets.length > 0 && resets.every(b => b.tabIndex === -1)
            && bars.every(bar => [...bar.querySelectorAll('.modebar-btn')].filter(b => b.tabIndex >= 0).length <= 1);
    }}""", timeout=15_000)


def _tab_until(page, start: str, stop: str, *, most: int = 120) -> list[dict]:
    """Every element Tab focuses from `start` (a selector, focused first) up to the one that matches `stop`."""
    page.locator(start).first.focus()
    stops = []
    for _ in range(most):
        page.keyboard.press("Tab")
        stops.append(page.evaluate(FOCUS))
        if page.evaluate(f"() => document.activeElement.matches({stop!r})"):
            return stops
    raise AssertionError(f"{stop} not reached in {most} Tab presses: {stops}")


def test_the_chat_tab_from_the_prompt_to_the_trees_skips_resets_and_keeps_one_stop_a_chart(app):  # noqa: F811
    page = _page(app)
    _wait_tidied(page, "#chat-tab")
    stops = _tab_until(page, "#prompt textarea", "#tree-view .label-wrap")
    assert not [s for s in stops if "reset-button" in s["cls"]], stops
    assert any(s["id"] == "temperature" for s in stops) and any(s["name"].startswith("range slider for Temp")
                                                                  for s in stops)  # the box and the slider stay
    bars = [s for s in stops if "modebar" in s["cls"]]
    charts = page.locator("#chat-tab .js-plotly-plot:visible").count()
    assert charts >= 4 and [s["name"] for s in bars] == ["Download plot as a PNG"] * charts, bars
    assert len(stops) <= 50, len(stops)  # 89 before: 8 resets and 38 tool-bar buttons among them

    page.locator("#chat-tab .modebar-btn[tabindex='-1']").first.wait_for(state="attached")
    download = page.locator("#chat-tab .modebar-btn:not([tabindex='-1'])").first
    download.focus()
    # plotly shows the bar as its button takes the focus, and the button shows the page's ring
    page.wait_for_function("() => getComputedStyle(document.activeElement.closest('.modebar-group')).opacity === '1'")
    ring = page.evaluate("() => [getComputedStyle(document.activeElement).outlineWidth, "
                         "document.activeElement.matches(':focus-visible')]")
    assert ring == ["2px", True], ring
    with page.expect_download(timeout=30_000) as saved:
        page.keyboard.press("Enter")
    assert saved.value.suggested_filename.endswith(".png")
    page.close()


def test_escape_in_a_sliders_number_box_or_on_the_slider_resets_it(app):  # noqa: F811
    page = _page(app)
    _wait_tidied(page, "#chat-tab")
    box, slider = "#temperature input[type=number]", "#temperature input[type=range]"
    default = page.locator(box).input_value()
    reset = page.locator("#temperature .reset-button")
    assert "Escape" in (reset.get_attribute("title") or "")
    assert page.locator(box).get_attribute("aria-keyshortcuts") == "Escape"
    assert page.locator(slider).get_attribute("aria-keyshortcuts") == "Escape"
    for where in (box, slider):
        set_number(page, "temperature", 1.3)
        page.wait_for_function(f"() => document.querySelector('{slider}').value === '1.3'")
        page.locator(where).focus()
        page.keyboard.press("Escape")
        page.wait_for_function(f"() => document.querySelector('{box}').value === {default!r} "
                               f"&& document.querySelector('{slider}').value === {default!r}", timeout=10_000)
        assert page.evaluate(f"() => document.activeElement.matches({where!r})")  # the focus stays
    page.close()


def test_the_teach_tab_from_the_step_buttons_meets_no_reset_and_one_download_a_chart(app):  # noqa: F811
    page = _page(app, query="?tab=teach", ready="#step-start")
    _wait_tidied(page, "#teach-tab")
    stops = _tab_until(page, "#step-next", "#teach-tab .label-wrap")
    assert not [s for s in stops if "reset-button" in s["cls"]], stops
    assert any(s["id"] == "step-speed" for s in stops)
    # its charts' downloads are reached as the Chat tab's are (they were no stop at all: WCAG 2.1.1), no other button
    bars = [s["name"] for s in stops if "modebar" in s["cls"]]
    assert bars and set(bars) == {"Download plot as a PNG"}, stops
    page.close()


def _slider(elem_id: str) -> str:
    return (f"() => [...document.querySelectorAll('#{elem_id} input')].map(i => i.value).join(' ')")


def _reset(page, elem_id: str, *, moved: float, back: str, how: str) -> None:
    """Move the slider `elem_id` to `moved`, then put it back by `how` (Escape on the slider or in its number box, or
    a click of its ↺) and wait until both its inputs show `back`."""
    set_number(page, elem_id, moved)
    page.wait_for_function(f"() => document.querySelector('#{elem_id} input[type=range]').value === '{moved}'")
    if how == "click":
        page.click(f"#{elem_id} .reset-button")
    else:
        page.locator(f"#{elem_id} input[type={how}]").focus()
        page.keyboard.press("Escape")
    try:
        page.wait_for_function(f"() => ({_slider(elem_id)})() === '{back} {back}'", timeout=10_000)
    except Exception as e:  # playwright's timeout: say what it shows
        raise AssertionError(f"{how} on {elem_id} put back {page.evaluate(_slider(elem_id))!r}, not {back}") from e


def _choose(page, menu: str, name: str, *, then: dict) -> None:
    """Pick `name` in the preset menu `menu` and wait until the server's answer has set the sliders as `then` says."""
    page.click(f"#{menu} input")
    page.get_by_role("option", name=name, exact=True).click()
    for elem_id, value in then.items():
        page.wait_for_function(f"() => ({_slider(elem_id)})() === '{value} {value}'", timeout=30_000)


def test_escape_and_reset_put_back_the_value_the_chosen_preset_and_drafter_set(app):  # noqa: F811
    page = _page(app)
    _wait_tidied(page, "#chat-tab")
    # the page opened on bundled (K 7, no confidence stop); smollm2-chat sets K 6 and EAGLE's confidence 0.6
    _choose(page, "preset", "smollm2-chat", then={"num-draft-tokens": 6, "draft-confidence": 0.6})
    _reset(page, "num-draft-tokens", moved=3, back="6", how="range")  # gradio's own: 7, the page's first value
    _reset(page, "draft-confidence", moved=0.2, back="0.6", how="number")  # 0
    _reset(page, "num-draft-tokens", moved=2, back="6", how="click")
    page.locator("#drafter").get_by_label("draft model", exact=True).check()  # its own confidence: 0.5
    page.wait_for_function(f"() => ({_slider('draft-confidence')})() === '0.5 0.5'", timeout=30_000)
    _reset(page, "draft-confidence", moved=0.1, back="0.5", how="range")
    tips = page.evaluate("() => ['num-draft-tokens', 'temperature'].map(id => "
                         "document.querySelector(`#${id} .reset-button`).title)")
    assert "preset's value" in tips[0] and "Escape" in tips[0] and "default value" in tips[1], tips
    # a screen reader's name for the ↺ says what its tooltip says (gradio's aria-label: "Reset to default value")
    names = page.evaluate("() => ['num-draft-tokens', 'temperature'].map(id => "
                          "document.querySelector(`#${id} .reset-button`).getAttribute('aria-label'))")
    assert names == ["Reset to the preset's value", "Reset to default value"], names
    page.close()
    page = _page(app, query="?tab=teach", ready="#step-start")  # the Teach tab's K follows its own menu
    _choose(page, "teach-preset", "smollm2-1.7b-cpu", then={"teach-k": 4})
    _reset(page, "teach-k", moved=2, back="4", how="range")  # gradio's own: 7
    page.close()


def test_a_charts_tool_bar_is_one_tab_stop_whose_arrow_keys_move_between_its_buttons(app):  # noqa: F811
    page = _page(app)
    _wait_tidied(page, "#chat-tab")
    chart = "#chart-speed"
    names = page.evaluate(f"() => [...document.querySelectorAll('{chart} .modebar-btn')].map(b => b.dataset.title)")
    focused = "() => document.activeElement.dataset.title"
    page.locator(f"{chart} .modebar-btn:not([tabindex='-1'])").focus()
    assert page.evaluate(focused) == names[0] == "Download plot as a PNG", names
    for key, at in (("ArrowRight", 1), ("ArrowRight", 2), ("ArrowLeft", 1), ("End", -1), ("ArrowRight", 0),
                    ("ArrowLeft", -1), ("Home", 0), ("ArrowRight", 1)):
        page.keyboard.press(key)
        assert page.evaluate(focused) == names[at], (key, page.evaluate(focused), names[at])
    stops = page.evaluate(f"() => [...document.querySelectorAll('{chart} .modebar-btn')].filter(b => b.tabIndex >= 0)"
                          ".map(b => b.dataset.title)")
    assert stops == [names[1]], stops  # the button moved to is the bar's one stop: Tab leaves, Shift+Tab comes back
    page.keyboard.press("Tab")
    assert not page.evaluate(f"() => !!document.activeElement.closest('{chart}')")
    page.keyboard.press("Shift+Tab")
    assert page.evaluate(focused) == names[1]
    bar = page.locator(f"{chart} .modebar")
    assert bar.get_attribute("role") == "toolbar" and bar.get_attribute("aria-label") == "Chart tools"
    page.close()


# the options of a radio group: their names, which is checked, which gradio shows chosen, which has the focus
RADIOS = """(id) => [...document.querySelectorAll(`#${id} input[type=radio]`)].map(r => ({name: r.name,
    value: r.value, checked: r.checked, chosen: r.closest('label').classList.contains('selected'),
    focused: r === document.activeElement}))"""


def _radios_in_step(page, elem_id: str, *, focused: str) -> list[dict]:
    """The options of the radio group `elem_id`, once the one named `focused` has the focus, is checked and is the one
    gradio shows chosen (its value taken), the group's options sharing one name again (gradio renames the two whose
    choice changed)."""
    page.wait_for_function(f"""() => {{ const rs = ({RADIOS})({elem_id!r});
        return new Set(rs.map(r => r.name)).size === 1
            && rs.filter(r => r.checked && r.chosen && r.focused).length === 1
            && rs.find(r => r.focused).value === {focused!r}; }}""", timeout=30_000)
    return page.evaluate(RADIOS, elem_id)


def test_a_radio_group_is_one_tab_stop_whose_arrow_keys_move_the_choice(app):  # noqa: F811
    """Gradio 6 names each option's input apart, so each was a group of its own: a Tab stop each (seven for the
    Drafter) and no arrow keys. keys.js gives a group's options one name: Tab reaches the chosen one and leaves, the
    arrows move the choice; a screen reader hears the group's name. The Chat tab's Drafter, then the Teach
    tab's."""
    browser, url = app  # the page's own load events answered before a key is pressed (one that answered late put
    page = open_page(browser, url, tracked=True, viewport={"width": 1400, "height": 1000})  # the choice back)
    wait_quiet(page)
    names = set()  # each group's one name
    for tab, before, elem_id, after in (
            (None, "#preset input", "drafter", "#num-draft-tokens input[type=number]"),
            ("Teach", "#teach-preset input", "teach-drafter", "#teach-k input[type=number]")):
        if tab:
            page.get_by_role("tab", name=tab).click()
            page.locator(before).wait_for(state="visible")
            wait_quiet(page)
        options = page.evaluate(RADIOS, elem_id)
        assert len(options) >= 3 and len({o["name"] for o in options}) == 1, options
        names.add(options[0]["name"])
        # a screen reader hears the group's name (gradio's fieldset had no legend nor label: a nameless group)
        assert page.get_by_role("radiogroup", name="Drafter", exact=True).evaluate("e => e.id") == elem_id
        chosen = next(i for i, o in enumerate(options) if o["checked"])
        page.locator(before).focus()
        page.keyboard.press("Tab")
        _radios_in_step(page, elem_id, focused=options[chosen]["value"])  # the chosen option, not the first
        page.keyboard.press("Tab")
        assert page.evaluate(f"() => document.activeElement.matches({after!r})"), page.evaluate(FOCUS)
        page.keyboard.press("Shift+Tab")
        _radios_in_step(page, elem_id, focused=options[chosen]["value"])
        step = 1 if chosen + 1 < len(options) else -1
        page.keyboard.press("ArrowDown" if step == 1 else "ArrowUp")  # the next option, chosen: gradio has its value
        wait_quiet(page)
        _radios_in_step(page, elem_id, focused=options[chosen + step]["value"])
        page.keyboard.press("ArrowUp" if step == 1 else "ArrowDown")  # and back, the names shared still
        wait_quiet(page)
        _radios_in_step(page, elem_id, focused=options[chosen]["value"])
    assert len(names) == 2, names  # the two tabs' Drafters are two groups, not one
    page.context.close()


def test_the_teach_presets_menu_left_by_tab_keeps_the_drafter_chosen(app):  # noqa: F811
    """Tabbing through the Teach tab's preset menu put its drafter and K back to the preset's: gradio's Dropdown fires
    `input` as the focus leaves it, its value unchanged, and Teach's preset followed `input` (the radio test above
    then lost its arrow key's choice to that answer, now and then). Its `input` sends no pick where the list is left
    as the focus came to it (teach_keys.on_pick: `select`, which 123c8c8 took, missed a pick by the keys)."""
    browser, url = app
    page = open_page(browser, url, tracked=True, viewport={"width": 1400, "height": 1000})
    wait_quiet(page)
    page.get_by_role("tab", name="Teach").click()
    page.locator("#teach-preset input").wait_for(state="visible")
    wait_quiet(page)
    page.locator("#teach-drafter label:has-text('EAGLE')").click()
    wait_quiet(page)
    page.locator("#teach-preset input").focus()
    page.keyboard.press("Tab")
    wait_quiet(page)
    assert page.locator("#teach-drafter input:checked").get_attribute("value") == "EAGLE"
    page.context.close()
