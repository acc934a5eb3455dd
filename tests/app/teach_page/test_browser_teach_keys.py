"""A presenter's clicker or keyboard in a real browser (1280 × 720): every press of →/PageDown and ←/PageUp counts,
in order, however close together. A double-tap, a held key (the keyboard's repeated keydown events) or a burst of
four presses steps as many rounds as there were presses, never past the last round nor before the first and never
twice; ← after → in the same burst takes one back; the same holds for the token-tree step-through. A press while
Decode runs does no harm. With the rounds below the screen (the controls fill a projector's 720 lines: Play clicked
at the top), a clicker's PageDown still steps them, and brings them into view. Uses the Teach tab and tiny pair of
test_browser_teaching."""

from __future__ import annotations

import pytest

from tools.screenshot import set_number
from tests.app.teach_page import lesson_page, wait_round
from tests.gradio_calls import wait_quiet
from tests.helpers import wait_answered, watch_busy

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # drives Chromium on the Teach tab


@pytest.fixture(scope="module")
def page(app, browser):
    with lesson_page(browser, app[1]) as page:
        yield page


def shown(page) -> tuple[int, int]:
    """The round shown and the number of rounds."""
    step = page.locator("#step-view .teach-step")
    return int(step.get_attribute("data-round")), int(step.get_attribute("data-rounds"))


def go_to(page, n: int) -> None:
    """Step one press at a time, waiting for each, to round `n` (from the round shown once every event an earlier
    test started has answered: a late tick of its auto-play stepped the round this read)."""
    wait_quiet(page)
    while (at := shown(page)[0]) != n:
        page.keyboard.press("ArrowRight" if at < n else "ArrowLeft")
        wait_round(page, at + (1 if at < n else -1))


def settled(page, n: int) -> None:
    """Round `n` shows, and stays once every press has been answered: no press is applied twice or late. (A fixed
    1.5 s after round `n` showed passed at once where the presses end on the round they began on, and an answer that
    came later on a busy machine (round 2 on the way from 3 back to 3 by PageUp ×4 PageDown ×2) failed the check.)"""
    wait_round(page, n)
    wait_quiet(page)
    assert shown(page)[0] == n


def burst(page, keys: list[str]) -> None:
    """Presses with no delay between them (each a keydown and a keyup)."""
    for key in keys:
        page.keyboard.press(key)


ON_SCREEN = """(selector) => { const box = document.querySelector(selector).getBoundingClientRect();
    return box.bottom > 0 && box.top < window.innerHeight; }"""


def test_four_presses_in_a_burst_step_four_rounds(page):
    go_to(page, 2)
    assert shown(page)[1] >= 10, "the run is too short for this test"
    burst(page, ["PageDown"] * 4)
    settled(page, 6)
    burst(page, ["ArrowLeft"] * 3)
    settled(page, 3)


def test_a_held_key_steps_once_per_repeat(page):
    go_to(page, 2)
    # a held key: one keydown, then the keyboard's repeats (repeat: true), all in one moment, then the keyup
    page.evaluate("""() => { for (let i = 0; i < 5; i++) document.activeElement.dispatchEvent(new KeyboardEvent(
        'keydown', {key: 'ArrowRight', repeat: i > 0, bubbles: true})); }""")
    settled(page, 7)


def test_back_after_forward_in_one_burst_nets_out(page):
    go_to(page, 3)
    burst(page, ["ArrowRight", "ArrowRight", "ArrowLeft"])
    settled(page, 4)


DRAFT_TABLE = """(sampled) => { const shown = document.querySelector('#step-view table.teach-drafts');
    const table = shown.cloneNode(true);  // beside the round's own: a sampled round's short heads, wrapping verdicts
    if (sampled) {
        ['#', 'draft token', 'q(x) draft', 'p(x) target', 'min(1, p/q)', 'u', 'u &lt; p/q?'].forEach((head, i) => {
            table.querySelectorAll('th')[i].innerHTML = head; });
        const cells = table.querySelectorAll('tbody tr td');
        cells[6].textContent = '\u2713 accepted (u < p/q)';
        if (sampled === 'long') {
            cells[5].innerHTML += ' <span class="teach-unused">(unused)</span>';
            cells[1].textContent = "'Explanation'";
            cells[6].textContent = '\u2717 rejected (u \u2265 p/q)';
        }
    }
    shown.after(table);
    const style = getComputedStyle(table);
    const inside = table.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
    const rows = [...table.querySelectorAll('tr')].map((row) => row.getBoundingClientRect());
    table.remove();
    return {fill: rows.map((row) => Math.round(row.width - inside)), heights: rows.slice(1).map((row) => row.height)};
}"""


def test_the_round_table_fills_its_column_at_every_round(page):
    """A round's draft table took the width of its round's texts (a verdict or an "(unused)" wrapped in one round
    and not in the next) and what is under it jumped as a class stepped (F's audit): it fills its column, a line a
    draft, at every round. A sampled round's short heads and long verdicts are measured in a copy of the round's
    table beside it (this module's lesson is greedy, whose long heads fill the column anyway)."""
    go_to(page, 2)
    tables = [page.evaluate(DRAFT_TABLE, sampled) for sampled in (False, "short", "long")]
    assert all(abs(gap) <= 1 for table in tables for gap in table["fill"]), tables
    assert all(table["heights"] == tables[0]["heights"] for table in tables), tables  # a line a draft


def test_presses_at_the_ends_stop_there_and_count_in_order(page):
    last = shown(page)[1]
    go_to(page, last - 3)
    burst(page, ["PageDown"] * 5)
    settled(page, last)
    burst(page, ["PageDown", "PageDown", "PageUp", "PageUp"])  # last, last, then two back: not a sum of 0
    settled(page, last - 2)
    go_to(page, 3)
    burst(page, ["PageUp"] * 4 + ["PageDown"] * 2)  # 2, 1, 1, 1, then two on
    settled(page, 3)


def test_presses_while_decode_runs_do_no_harm(page):
    """Presses while Decode runs step the rounds shown until the new run arrives, or the new run after it: the
    view ends on a round of the new run that the presses made since it arrived add up to, and later presses count
    from there."""
    go_to(page, 3)
    set_number(page, "teach-max-new-tokens", 24)
    page.click("#step-start")
    page.locator("#step-status").click()
    burst(page, ["ArrowRight"] * 3)
    page.wait_for_function("() => document.querySelector('#step-status').innerText.includes('Decoded 24 tokens')",
                           timeout=120_000)
    wait_quiet(page)  # the presses' answers too
    at, rounds = shown(page)
    assert f"in {rounds} rounds" in page.locator("#step-status").inner_text()  # the new run's rounds
    assert 1 <= at <= 4
    burst(page, ["ArrowRight"] * 4)
    settled(page, at + 4)


def test_a_clicker_steps_the_rounds_below_the_screen_and_brings_them_into_view(page):
    go_to(page, 2)
    set_number(page, "step-speed", 5)  # ticks far apart: Play and Pause before the first, as a rule
    page.evaluate("() => window.scrollTo(0, 0)")
    page.click("#step-play")  # Play and Pause at the top of the tab, the focus left there: the rounds below the screen
    page.wait_for_function("() => document.querySelector('#step-play').innerText.includes('Pause')")
    page.click("#step-play")
    page.wait_for_function("() => document.querySelector('#step-play').innerText.includes('Play')")
    wait_quiet(page)  # a tick that came before the Pause, if any, shows its round
    at = shown(page)[0]
    assert not page.evaluate(ON_SCREEN, "#step-view"), "the rounds are on screen: nothing to check"
    burst(page, ["PageDown", "PageDown"])  # scrolled the page (the keys stepped only a step-through on screen)
    settled(page, at + 2)
    assert page.evaluate(ON_SCREEN, "#step-view")

def test_a_tick_just_after_pause_does_not_step(page):
    """The auto-play's timer lives in the page and stops only when the server's answer to Pause arrives: a tick in
    between (a busy server, a slow network) stepped one round after the class saw it paused."""
    go_to(page, 2)
    set_number(page, "step-speed", 5)  # no tick of its own before the Pause below
    page.click("#step-play")
    page.wait_for_function("() => document.querySelector('#step-play').innerText.includes('Pause')")
    page.evaluate("() => { document.querySelector('#step-play').click(); window.specuiTick('step'); }")
    page.wait_for_function("() => document.querySelector('#step-play').innerText.includes('Play')")
    settled(page, 2)
    page.click("#step-play")  # Play again: its ticks step again
    wait_round(page, 3, timeout_ms=15_000)
    page.click("#step-play")
    page.wait_for_function("() => document.querySelector('#step-play').innerText.includes('Play')")


def test_a_clicker_steps_the_rounds_with_a_drafter_radio_just_clicked(page):
    """A presenter who has just clicked a Drafter (the focus left on its radio) steps on with the clicker: keys.js
    left every key to a focused input, so PageDown and PageUp did nothing until a click elsewhere (F's audit). The
    arrows stay the radio's own, as browsers have them (they pick the next drafter). Before the tree tests: a tree
    round's panel open on screen takes the keys."""
    page.locator("#step-status").click()  # the focus off the last test's buttons
    go_to(page, 2)
    page.locator("#teach-drafter input:checked").click()  # the drafter chosen already: no change, the focus there
    assert page.evaluate("() => document.activeElement.type") == "radio"
    page.keyboard.press("PageDown")
    settled(page, 3)
    page.keyboard.press("PageUp")
    settled(page, 2)
    assert page.evaluate("() => document.activeElement.type") == "radio"
    page.locator("#step-status").click()  # the focus off the radio, whose arrows would pick another drafter


def test_the_charts_tool_bars_keep_one_tab_stop_their_download(page):
    """Tab from the step buttons went through every chart's plotly tool bar (eight buttons each); they stay there
    for the mouse, and the keyboard meets one stop a chart, its download as a PNG (none at all left a chart's
    download out of a keyboard's reach: WCAG 2.1.1). The keys still step the rounds, but in a tool bar they move
    between its buttons."""
    bars = "() => [...document.querySelectorAll('#teach-tab .modebar')].map(bar => [...bar.querySelectorAll(" \
        "'.modebar-btn')].filter(b => b.tabIndex >= 0).map(b => b.dataset.title))"
    page.wait_for_function(f"() => ({bars})().length > 0 && ({bars})().every(kept => kept.length === 1)",
                           timeout=10_000)
    assert all(kept == ["Download plot as a PNG"] for kept in page.evaluate(bars)), page.evaluate(bars)
    page.locator("#step-next").focus()
    met = []
    for _ in range(40):
        page.keyboard.press("Tab")
        met.append(page.evaluate("() => document.activeElement.closest('.modebar') ? "
                                 "document.activeElement.dataset.title : null"))
    met = [title for title in met if title]
    assert met and set(met) == {"Download plot as a PNG"}, met
    page.locator("#step-next").focus()  # out of a tool bar, which takes the arrows (below)
    go_to(page, 3)
    page.locator("#step-next").focus()
    burst(page, ["ArrowRight"])
    settled(page, 4)
    # in a chart's tool bar, with the rounds on screen, the arrows move between its buttons (charts.js): no round
    page.locator("#step-view").scroll_into_view_if_needed()
    page.evaluate("""() => [...document.querySelectorAll("#teach-tab .modebar-btn:not([tabindex='-1'])")]
        .find(b => b.offsetParent !== null).focus({preventScroll: true})""")
    assert page.evaluate(ON_SCREEN, "#step-view")
    page.keyboard.press("ArrowRight")
    title = page.evaluate("() => document.activeElement.closest('.modebar') && document.activeElement.dataset.title")
    assert title and not title.startswith("Download"), title
    settled(page, 4)
    page.keyboard.press("PageDown")  # a clicker's key still steps
    settled(page, 5)
    # the step redrew the charts (auto-play does so each round): the focus stays on the same button of its bar,
    # where → moves on (it fell to the page, and → stepped a round)
    focused = "() => document.activeElement.closest('.modebar') && document.activeElement.dataset.title"
    page.wait_for_function(f"({focused})() === {title!r}", timeout=10_000)
    page.keyboard.press("ArrowRight")
    moved = page.evaluate(focused)
    assert moved and moved != title, moved
    settled(page, 5)


def test_the_tree_step_through_counts_every_press(page):
    set_number(page, "teach-k", 4)  # trees four deep: steps enough
    page.locator("#teach-tree").get_by_text("Token trees: a tree round, node by node").click()
    page.click("#tree-step-start")
    step = "#tree-step-view .teach-tree-step"
    page.wait_for_selector(f"{step}[data-step='1']", timeout=120_000)
    page.locator("#tree-step-view").scroll_into_view_if_needed()
    page.locator("#tree-step-status").click()
    burst(page, ["ArrowRight"] * 3)
    page.wait_for_selector(f"{step}[data-step='4']", timeout=30_000)
    wait_quiet(page)
    assert page.locator(step).get_attribute("data-step") == "4"
    burst(page, ["ArrowLeft", "ArrowLeft"])
    page.wait_for_selector(f"{step}[data-step='2']", timeout=30_000)
    wait_quiet(page)
    assert page.locator(step).get_attribute("data-step") == "2"



def test_decode_with_a_tree_from_the_keyboard_brings_its_steps_where_the_keys_step_them(page):
    """Decode with a tree reached with Tab sits at the foot of the screen (the browser scrolls a focused button just
    into view), and its steps were decoded below it, out of sight: → and PageDown, which step a step-through on
    screen, then did nothing, the teacher with a clicker stuck at step 1. The panel comes into view as it decodes."""
    step = "#tree-step-view .teach-tree-step"
    if not page.locator("#tree-step-start").is_visible():
        page.locator("#teach-tree").get_by_text("Token trees: a tree round, node by node").click()
    page.evaluate("() => document.querySelector('#tree-step-start').scrollIntoView({block: 'end'})")
    page.focus("#tree-step-start")
    watch_busy(page, "#tree-step-status")
    page.keyboard.press("Enter")
    # 'Decoded' was there before (the last test's tree): the decode's progress comes and goes
    wait_answered(page, "#tree-step-status")
    page.wait_for_selector(f"{step}[data-step='1']", timeout=30_000)
    assert "Decoded" in page.locator("#tree-step-status").inner_text()
    page.keyboard.press("ArrowRight")
    page.wait_for_selector(f"{step}[data-step='2']", timeout=30_000)


TREE_LAYOUT = """() => { const menu = document.querySelector('#tree-step-round input');
    const labels = [...document.querySelectorAll('#tree-step-chart .textpoint text')].filter((t) => t.textContent)
        .map((t) => [t.textContent, t.getBoundingClientRect()]);
    const overlaps = labels.flatMap(([a, p], i) => labels.slice(i + 1).filter(([, q]) => p.left < q.right - 1
        && q.left < p.right - 1 && p.top < q.bottom - 1 && q.top < p.bottom - 1).map(([b]) => [a, b]));
    return {menu: [menu.value, menu.scrollWidth, menu.clientWidth], overlaps}; }"""


def test_the_tree_panel_at_150_percent_shows_its_round_menu_whole_and_labels_apart(page):
    """A projector's 1280 x 720 at 150 % is an 853 x 480 page: the tree panel's help beside its controls left the
    Round menu too narrow for its rounds' names (cut off) and the tree's node labels on top of each other (F's
    audit). Its help goes under its controls there."""
    page.set_viewport_size({"width": 853, "height": 480})
    try:
        fits = f"() => {{ const shown = ({TREE_LAYOUT})(); return shown.menu[0] && shown.menu[1] <= shown.menu[2] " \
            "&& !shown.overlaps.length; }"
        try:
            page.wait_for_function(fits, timeout=10_000)
        except Exception as e:
            raise AssertionError(page.evaluate(TREE_LAYOUT)) from e
    finally:
        page.set_viewport_size({"width": 1280, "height": 720})
