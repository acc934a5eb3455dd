"""The arena times each contestant's run alone: whatever a run does for the first time in the process (a drafter's
preparation, the native rounds it takes, the token-tree or sampled paths and what they set up once, such as the
one-off timing that picks top-p's sort) happens in the warm-up before the timed runs, with the arena's own settings,
never inside one. Recorded, not timed: every function of specui that first runs while an engine's run of the arena is
timed (from its stream's start to its end, `SpeculativeEngine._rounds`; the warm-ups run 3 tokens)."""

from __future__ import annotations

import sys
from contextlib import contextmanager

import pytest
import torch

from specui import arena
from specui.engine import SpeculativeEngine
from specui.heads import eagle, early_exit, medusa
from specui.settings import DecodeSettings
from tests.engine.head_helpers import perturb
from tests.helpers import make_model, noisy_copy

PROMPT = [5, 6, 7, 8, 5, 6, 7, 9, 5, 6]
WARM_TOKENS = 3  # arena.warm_up's and lesson.warm_up's runs
# work a round does only as its draws fall, no preparation: the target's cache moves a tree's accepted path into place
# when it is not the tree's first branch (the warm-up's few tokens may have kept first branches alone)
AS_DRAWS_FALL = {"kv.py:_move", "static_kv.py:move"}


@contextmanager
def first_calls_while_timed():
    """The specui functions first called (in this process) inside a timed run of the arena: a list filled as it goes.
    A timed run is `_rounds` of a run asking for more than the warm-ups' 3 tokens; it runs on this thread."""
    seen, timed, found = set(), [0], []

    def profile(frame, event, arg):
        code = frame.f_code
        if code.co_name == "_rounds" and code.co_filename.endswith("engine.py") and \
                frame.f_locals.get("max_new_tokens") != WARM_TOKENS:
            timed[0] += {"call": 1, "return": -1}.get(event, 0)
        elif event == "call" and code not in seen:
            seen.add(code)
            name = f"{code.co_filename.rsplit('/specui/', 1)[-1]}:{code.co_name}"
            if timed[0] and "/specui/" in code.co_filename and name not in AS_DRAWS_FALL:
                found.append(name)

    sys.setprofile(profile)
    try:
        yield found
    finally:
        sys.setprofile(None)


@pytest.fixture
def engine():
    return fresh_engine()


def fresh_engine():
    """A fresh engine with every drafter (the draft model, EAGLE, Medusa and early-exit heads): its drafters' weights
    never prepared before (a product's preparation is kept per weight)."""
    target = make_model("llama", layers=3, seed=0, vocab_size=96)
    heads = {"eagle": perturb(eagle.build(target, token_ids=torch.arange(96)), scale=0.02, seed=2),
             "medusa": perturb(medusa.build(target, num_heads=4), scale=0.01, seed=1),
             "early_exit": perturb(early_exit.build(target, exit_layer=1), scale=0.02, seed=3)}
    return SpeculativeEngine(target, noisy_copy(target, noise=0.3, seed=1), heads=heads)


@pytest.mark.parametrize("settings", [
    DecodeSettings(max_new_tokens=24, num_draft_tokens=3, seed=0),
    DecodeSettings(max_new_tokens=24, num_draft_tokens=3, seed=0, temperature=0.8, top_p=0.9),
    DecodeSettings(max_new_tokens=24, num_draft_tokens=3, seed=0, tree_width=2),
], ids=["greedy chains", "sampled", "token trees"])
def test_nothing_runs_for_the_first_time_inside_a_contestants_timed_run(engine, settings):
    with first_calls_while_timed() as found:
        outcome = arena.run(engine, PROMPT, settings, ks={"medusa": 2}, confidences={"eagle": 0.1})
    assert len(outcome.standings) == len(arena.contestants(engine, settings)) >= 4
    assert found == []


@pytest.mark.slow  # loads a real pair
def test_the_apps_arena_warms_its_drafters_with_its_own_settings():
    """The Chat tab's arena (`Showcase.run`), on the bundled pair, sampled and with token trees: the drafters' tree
    and sampled paths first ran in its warm-up, not in their timed runs."""
    from specui.loading import PairCache
    from specui.ui.session import Settings, Showcase
    from tests.helpers import ui_config

    showcase = Showcase(ui_config(), PairCache())
    with first_calls_while_timed() as found:
        *_, (frame, run) = showcase.run("def main(argv):\n    ", Settings(
            max_new_tokens=12, seed=0, arena=True, temperature=0.8, top_p=0.9, tree_width=2, tree_nodes=5))
    assert frame.done and not frame.error, frame.error
    assert len(run.arena) >= 2 and all(result.token_ids for result in run.arena.values())
    assert found == []


@pytest.mark.parametrize("settings", [
    DecodeSettings(max_new_tokens=16, num_draft_tokens=3, seed=7, temperature=0.9, top_k=20, adaptive=True),
    DecodeSettings(max_new_tokens=16, num_draft_tokens=3, seed=7, temperature=0.8, top_p=0.9, tree_width=2,
                   tree_nodes=5),
], ids=["sampled, adaptive K", "sampled token trees"])
def test_the_warm_up_changes_no_contestants_output(settings):
    """Seeded sampled runs after the warm-ups (its own draws, each drafter's adaptive K and trees) are token for token
    and kind for kind the same runs without them: nothing of a warm-up leaks into a timed run, nor one contestant's
    warm-up into another's run."""
    def runs(warm):
        outcome = arena.run(fresh_engine(), PROMPT, settings, warm=warm, ks={"medusa": 2},
                            confidences={"eagle": 0.1})
        return {s.name: (s.result.token_ids, s.result.kinds) for s in outcome.standings}

    cold, warmed = runs(False), runs(True)
    assert len(cold) >= 4 and warmed == cold
