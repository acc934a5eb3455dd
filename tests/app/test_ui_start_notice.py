"""The starting preset that did not load as the app started (`Showcase.preload`) is said on the page as it opens, as
a warning toast whose text is the error's, escaped (`specui.ui.start_notice`), where only the log said it and a
visitor found out on pressing Send. Said until the preset loads (the Hub back, a folder restored)."""

from __future__ import annotations

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
    """The notice is asked without the queue, as the page's other opening events are: a queued one joined it on each
    page opened, and a full queue (a ZeroGPU Space's 64 waiting) refused it with an error toast, 'This application is
    currently busy', on every page opened then, a preset that loaded or not. Only a page with a notice queues its
    toast (a toast reaches the page from a queued event alone)."""
    from specui.ui import blocks

    demo = blocks.build(ui_config(), preload=False)
    opening = [event for event in demo.config["dependencies"] if any(on == "load" for _, on in event["targets"])]
    assert opening and all(event["queue"] is False for event in opening), opening


def restore(tmp_path) -> None:
    """The missing target folder is back (the bundled target's, under the name the preset gives)."""
    (tmp_path / MARKUP).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / MARKUP).symlink_to(BUNDLED_TARGET.parent)


@pytest.mark.browser
@pytest.mark.slow
def test_a_page_that_opens_says_the_starting_preset_did_not_load_as_text(tmp_path):
    config, showcase = starting_broken(tmp_path)
    with app_page(config, showcase=showcase) as page:
        wait_until(lambda: page.get_by_text("did not load", exact=False).count() > 0, "the notice", timeout_s=120,
                   pause=lambda s: page.wait_for_timeout(s * 1000))
        shown = page.locator("body").inner_text()
        assert "The preset this app starts on did not load: Preset 'gone'" in shown and MARKUP in shown, shown
        assert page.locator(".injected").count() == 0
        page.wait_for_timeout(12_000)  # a toast of gradio's default lasts 10 s: this one stays until closed
        assert page.get_by_text("did not load", exact=False).count() > 0
