"""The Chat tab's run download (`chat_handlers.run_export`) in arena mode, without a server: each contestant's entry
gives the K and the confidence stop it raced with, from which its row of the arena's table reads as the page shows it
("≤ 4" where a stop lets its rounds draft fewer: `arena.k_said`). (In T's files, beside the tree tests.)"""

from __future__ import annotations

import json
from dataclasses import replace

from specui import arena
from specui.loading import PairCache
from specui.ui.chat_handlers import run_export
from specui.ui.request import Settings
from specui.ui.session import Showcase
from tests.helpers import ui_config

PROMPT = "def main(argv):\n    "


def test_the_downloads_arena_gives_each_contestants_confidence_stop_as_the_table_says_it():
    """The download gave each contestant's num_draft_tokens but not its stop, which the table says since the arena
    raced each drafter with its own (the preset's `draft_confidence`): a reader of the file could not tell the draft
    model's '≤ 4' (0.5, its own) from EAGLE's '≤ 4' (the slider's 0.3) nor prompt lookup's '4' (no stop acts on it)."""
    config = ui_config()
    own = replace(config.get("bundled"), draft_confidence=(("model", 0.5),))
    config = replace(config, presets={**config.presets, "bundled": own})
    frame, run = list(Showcase(config, PairCache()).run(PROMPT, Settings(max_new_tokens=8, arena=True, seed=0,
                                                                         num_draft_tokens=4, draft_confidence=0.3)))[-1]
    assert frame.error is None and run.phase == "done"
    entries = json.loads(json.dumps(run_export(run)))["arena"]  # as the file holds it
    assert entries["plain"]["draft_confidence"] is None and entries["plain"]["num_draft_tokens"] is None
    assert entries["model"]["draft_confidence"] == 0.5 and entries["eagle"]["draft_confidence"] == 0.3
    table = {row[0]: row[1] for row in frame.table}  # label -> the K column as the page shows it
    said = {arena.label(name): arena.k_said(e["num_draft_tokens"], e["draft_confidence"], name)
            for name, e in entries.items()}
    assert said == table, (said, table)
    assert table["draft model"] == table["EAGLE"] == "≤ 4"
    assert table["prompt lookup"] == "4"  # raced with 0.3 too, which no stop of its reads
