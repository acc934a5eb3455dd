"""The starting preset that did not load as the app started (`Showcase.preload`) is said on the page as it opens, in
a line above the tabs whose text is the error's, escaped (`specui.ui.start_notice`), where only the log said it and
a visitor found out on pressing Send. Said until the preset loads (the Hub back, a folder restored); to a page opened
while it still loaded, once the load has ended; to a Space's visitor as a line for a visitor (the advice is the
owner's, in the log); and covering nothing (a toast in the corner covered the preset menu)."""

from __future__ import annotations

import html
import logging
import threading
from dataclasses import replace

import pytest

from specui.loading import PairCache
from specui.presets import Preset
from specui.ui.request import Settings
from specui.ui.session import Showcase, decode
from tests.helpers import BUNDLED_TARGET, app_page, ui_config
from tests.waits import wait_until

MARKUP = '<b class="injected">x</b>'  # in the missing folder's name, which the error names


def starting_broken(tmp_path) -> tuple:
    """A config that starts on a preset whose target folder is missing (its name holds markup), and a Showcase whose
    preload of it failed, as app.py's would."""
    config = ui_config()
    broken = Preset(name="gone", target=str(tmp_path / MARKUP), drafter="prompt_lookup", device="cpu",
                    description="a preset whose model folder is missing")
    config = replace(config, presets={**config.presets, "gone": broken}, default="gone")
    showcase = Showcase(config, PairCache())
    showcase.preload(config.get(None))
    return config, showcase


def test_the_preloads_failure_is_kept_until_the_preset_loads(tmp_path):
    config, showcase = starting_broken(tmp_path)
    said = showcase.start_problem()
    assert said.startswith("The preset this app starts on did not load: Preset 'gone': the target folder ")
    assert MARKUP in said and said.endswith("this one is tried again when a message is sent with it.")
    assert Showcase(config, PairCache()).start_problem() is None  # no preload failed
    restore(tmp_path)  # the folder is back: a message sent with it loads it
    frames = list(decode(showcase, "def f(x):", Settings(max_new_tokens=4, preset="gone")))
    assert frames and showcase.start_problem() is None


def test_a_teach_tab_decode_that_loads_it_clears_it_too(tmp_path):
    """The Teach tab loads its pair through the cache itself, not through the Chat tab's load: a page opened after
    a Decode with the preset loaded it was still told it did not load."""
    import gradio as gr

    from specui.ui.teach_keys import Shown
    from specui.ui.teaching import TeachState, decode, teaching_tab

    _, showcase = starting_broken(tmp_path)
    restore(tmp_path)
    with gr.Blocks():
        teach = teaching_tab(showcase)
    c = teach.controls
    page = {component: component.value for component in (c.drafter, c.k, c.confidence, c.temperature, c.penalty,
                                                          c.seed)}
    page |= {c.preset: "gone", c.max_new: 4, c.prompt: "def f(x):", teach.compare.second: "none", c.context: None,
             teach.handed: 0, teach.index: Shown(), teach.memory: {}}
    assert decode(TeachState(showcase), teach, page)[teach.run].steps
    assert showcase.start_problem() is None


def test_no_event_of_a_page_opening_joins_the_queue():
    """The notice is asked without the queue, as the page's other opening events are, and so is it asked again while
    the preset loads: a queued one joined it on each page opened, and a full queue (a ZeroGPU Space's 64 waiting)
    refused it with an error toast, 'This application is currently busy', on every page opened then, a preset that
    loaded or not."""
    from specui.ui import blocks

    demo = blocks.build(ui_config(), preload=False)
    opening = [event for event in demo.config["dependencies"]
               if any(on in ("load", "tick") for _, on in event["targets"])]
    assert opening and all(event["queue"] is False for event in opening), opening


def asking(showcase) -> dict:
    """The page's askings of the notice, as the served app runs them, by their trigger ("load": as it opens, "tick":
    its timer's): each a function of no input that returns (the notice's update, the timer's update)."""
    from specui.ui import blocks
    from specui.ui.start_notice import tell_start_problem

    demo = blocks.build(showcase.config, showcase=showcase, preload=False)
    return {trigger[1]: fn.fn for fn in demo.fns.values() for trigger in fn.targets
            if getattr(fn.fn, "__qualname__", "").startswith(tell_start_problem.__qualname__)}


def test_a_page_opened_while_the_preset_loads_is_told_once_the_load_has_failed(tmp_path, monkeypatch):
    """A page asked once, as it opened: one opened while the starting preset still loaded (a large model's minutes)
    was told nothing, and never learnt of the load that failed after. It asks again while the preset loads."""
    config, _ = starting_broken(tmp_path)
    showcase = Showcase(config, PairCache())
    gate, real = threading.Event(), showcase.cache.get
    monkeypatch.setattr(showcase.cache, "get", lambda *a, **k: gate.wait(120) and real(*a, **k))
    asked = asking(showcase)
    assert {"load", "tick"} <= set(asked), f"asked on {set(asked)}: a page opened as the preset loads is never told"
    opened, again = asked["load"], asked["tick"]
    showcase.preload_soon(config.get(None))
    said, timer = opened()
    assert said["visible"] is False and timer.active is True  # not known yet: asked again
    gate.set()
    wait_until(lambda: not showcase.starting(), "the preload to end", timeout_s=120)
    said, timer = again()
    assert said["visible"] is True and "did not load" in said["value"] and timer.active is False
    assert html.escape(MARKUP, quote=False) in said["value"] and MARKUP not in said["value"]  # the name, as text
    assert again()[1].active is False  # a page opened now asks once


def test_a_spaces_visitor_is_told_what_they_can_do_and_the_log_gets_the_advice(tmp_path, monkeypatch, caplog):
    """A Space's visitor cannot change its configuration: the page says the preset did not load and what a visitor can
    do; the error and its advice (the path to check in models.yaml) go to the log, for the owner. Off a Space the page
    is its owner's: it says the error whole."""
    with caplog.at_level(logging.WARNING, logger="specui.ui"):
        _, showcase = starting_broken(tmp_path)
    assert "Check the path in models.yaml" in caplog.text  # the owner's, in the log
    opened = asking(showcase)["load"]
    monkeypatch.delenv("SPACE_ID", raising=False)
    assert "Check the path in models.yaml" in opened()[0]["value"]
    monkeypatch.setenv("SPACE_ID", "someone/specui")
    said = html.unescape(opened()[0]["value"])
    assert "('gone') did not load" in said and "Choose another preset from the menu" in said, said
    assert "Check the path" not in said and "models.yaml" not in said and "folder" not in said, said


def test_each_chat_run_asks_again_when_it_ends(tmp_path):
    """The notice was asked as the page opened and while the preset loaded, never after: a message sent with the
    starting preset, the folder restored, loaded it and answered, and the line above still said it did not load until
    the page was reloaded. Each way a Chat run starts (Send, Enter, ↻) asks again once its run has ended."""
    from specui.ui import blocks
    from specui.ui.start_notice import tell_start_problem

    config, showcase = starting_broken(tmp_path)
    demo = blocks.build(config, showcase=showcase, preload=False)
    fns = list(demo.fns.values())
    runs = {i for i, fn in enumerate(fns) if getattr(fn.fn, "__name__", "") in ("send", "again")}
    asks_after = {dep["trigger_after"] for dep in demo.config["dependencies"]
                  if any(on == "then" for _, on in dep["targets"])
                  and getattr(fns[dep["id"]].fn, "__qualname__", "").startswith(tell_start_problem.__qualname__)}
    assert len(runs) == 3 and runs <= asks_after, f"runs {runs}, asked again after {asks_after}"
    asked = asking(showcase)["then"]
    assert asked()[0]["visible"] is True  # still broken: still said
    restore(tmp_path)
    assert list(decode(showcase, "def f(x):", Settings(max_new_tokens=4, preset="gone")))
    said, timer = asked()
    assert said["visible"] is False and timer.active is False, said


def restore(tmp_path) -> None:
    """The missing target folder is back (the bundled target's, under the name the preset gives)."""
    (tmp_path / MARKUP).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / MARKUP).symlink_to(BUNDLED_TARGET.parent)


@pytest.mark.browser
@pytest.mark.slow
def test_a_page_opened_as_the_preset_loads_says_it_did_not_load_as_text_covering_nothing(tmp_path, monkeypatch):
    """Opened while the starting preset loads, the page says nothing yet, and then, the load failed, says so as text
    above the tabs: a toast in the page's corner covered the preset menu (at 1280×800 its label and half its box),
    the control the notice points to."""
    config, _ = starting_broken(tmp_path)
    showcase = Showcase(config, PairCache())
    gate, real = threading.Event(), showcase.cache.get
    monkeypatch.setattr(showcase.cache, "get", lambda *a, **k: gate.wait(300) and real(*a, **k))
    showcase.preload_soon(config.get(None))
    with app_page(config, showcase=showcase, viewport={"width": 1280, "height": 800}) as page:
        assert showcase.starting() and page.get_by_text("did not load", exact=False).count() == 0
        gate.set()
        wait_until(lambda: page.get_by_text("did not load", exact=False).count() > 0, "the notice", timeout_s=120,
                   pause=lambda s: page.wait_for_timeout(s * 1000))
        shown = page.locator("body").inner_text()
        assert "The preset this app starts on did not load: Preset 'gone'" in shown and MARKUP in shown, shown
        assert page.locator(".injected").count() == 0 and page.locator(".toast-body").count() == 0
        notice = page.get_by_text("did not load", exact=False).first.bounding_box()
        for covered in ("#preset", ".tabs"):
            box = page.locator(covered).first.bounding_box()
            apart = (notice["y"] + notice["height"] <= box["y"] or box["y"] + box["height"] <= notice["y"]
                     or notice["x"] + notice["width"] <= box["x"] or box["x"] + box["width"] <= notice["x"])
            assert apart, f"the notice {notice} covers {covered} {box}"


def test_a_load_that_fails_as_the_page_asks_is_still_told(tmp_path, monkeypatch):
    """A tick read the notice and then whether the preset still loads: a load that failed between the two reads gave no
    notice (not known yet) and stopped the timer (loaded), so the page never asked again and never learnt. Whether it
    loads is read first: a load still on asks again, and one ended has its failure kept already."""
    config, _ = starting_broken(tmp_path)
    showcase = Showcase(config, PairCache())
    gate, real = threading.Event(), showcase.cache.get
    monkeypatch.setattr(showcase.cache, "get", lambda *a, **k: gate.wait(120) and real(*a, **k))
    again = asking(showcase)["tick"]
    showcase.preload_soon(config.get(None))
    read = showcase.start_failure

    def failing_meanwhile():  # the notice is read while the preset loads; the load fails right after
        failed = read()
        gate.set()
        wait_until(lambda: not showcase.starting(), "the preload to end", timeout_s=120)
        return failed

    monkeypatch.setattr(showcase, "start_failure", failing_meanwhile)
    said, timer = again()
    assert said["visible"] is False and timer.active is True, "the load ended unseen: this page is never told"
    monkeypatch.setattr(showcase, "start_failure", read)
    said, timer = again()
    assert said["visible"] is True and "did not load" in said["value"] and timer.active is False
