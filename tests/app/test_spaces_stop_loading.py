"""Stop pressed while a preset still loads (a fresh Space's first visitor): the reply the conversation keeps."""

import pytest

from tests.helpers import ui_config


@pytest.mark.slow  # loads the bundled pair
def test_a_reply_stopped_while_its_preset_loads_names_the_preset():
    """Closing the run at its first loading line left `ids_of` "" in the reply the chat keeps: the next turn read ""
    as the config's default preset, so a chat preset's exchange was judged by the default's kind (a base model's
    continuation, dropped from the conversation the chat model reads) and the reverse."""
    from specui.loading import PairCache
    from specui.ui.session import Settings, Showcase

    config = ui_config()
    showcase = Showcase(config, PairCache())
    frames = showcase.run("def main(argv):", Settings(preset="bundled", max_new_tokens=4), figures=False)
    frame, run = next(frames)
    assert not frame.done and not run.spec.token_ids  # a loading line: the pair is not there yet
    frames.close()  # Stop
    assert run.reply_message()["ids_of"] == "bundled"
    showcase.cache.get(config.get("bundled"))  # the load goes on after the Stop: waited for, not left to a later test
