"""A draft model whose start was cut short in its prompt's read keeps a consistent state (`keep()`)."""

from __future__ import annotations

import pytest

from specui.drafters import ModelDrafter
from specui.sampling import Sampling
from tests.engine.test_interrupt_forward import PROMPT, Presses, press_in_layer
from tests.helpers import make_model

@pytest.mark.parametrize("resumed", [False, True])
def test_a_draft_model_cut_short_in_its_prompts_read_keeps_what_it_holds(monkeypatch, resumed):
    """`keep()` after a start cut short raised AttributeError: '_valid'; it now holds the tokens kept before the
    read (none, or a conversation's resumed ones), every one of them the context's."""
    draft = make_model("gpt2", vocab_size=96, layers=2, seed=8)
    prompt, sampling = PROMPT + [1, 2, 3], Sampling()
    resume = None
    if resumed:
        earlier = ModelDrafter(draft)
        earlier.start(PROMPT, sampling=sampling, seed=0)
        resume = {**earlier.keep(), "pairs": 5}
    presses = Presses(KeyboardInterrupt, 1)
    press_in_layer(monkeypatch, draft.transformer.h[1], presses)
    presses.armed = True
    drafter = ModelDrafter(draft)
    with pytest.raises(KeyboardInterrupt):
        drafter.start(prompt, sampling=sampling, seed=0, resume=resume)
    kept = drafter.keep()
    assert kept["valid"] == (5 if resumed else 0) == kept["lm"].length
    assert all(layer.get_seq_length() == kept["lm"].length for layer in kept["lm"].cache.layers)
