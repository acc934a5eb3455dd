"""What a seed promises (docs/engine.md: the seed): the same prompt, settings and seed give the same sampled tokens
again, whatever the engine ran in between (a greedy run, another drafter, a stream left unfinished) and with or
without a conversation's cache that holds the prompt, for every drafter of the bundled preset, chains and trees."""

from __future__ import annotations

import pytest

from specui.prompt_cache import PromptCache
from tests.helpers import BUNDLED_TARGET

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not BUNDLED_TARGET.exists(), reason="the bundled pair is not built")]
SAMPLED = dict(max_new_tokens=40, temperature=0.9, top_p=0.95, seed=11, ignore_eos=True)


@pytest.fixture(scope="module")
def bundled():
    from specui import load_engine

    return load_engine("bundled", warm_up=False)


def runs_of(bundled, prompt, settings, other: str) -> dict[str, list[int]]:
    """The same seeded run after each thing a user may do in between."""
    tok = bundled.tokenizer
    runs = {"again": bundled.generate(prompt, **settings).token_ids}
    bundled.generate(tok("import os\n").input_ids, max_new_tokens=20, temperature=0.0)
    runs["after a greedy run"] = bundled.generate(prompt, **settings).token_ids
    bundled.generate(prompt, **{**settings, "drafter": other, "seed": 5})
    runs["after another drafter"] = bundled.generate(prompt, **settings).token_ids
    for i, _ in enumerate(bundled.stream(prompt, **settings)):
        if i == 2:
            break
    runs["after a stream left"] = bundled.generate(prompt, **settings).token_ids
    cache = PromptCache()
    runs["into a fresh cache"] = bundled.generate(prompt, cache=cache, **settings).token_ids
    kept = bundled.generate(prompt, cache=cache, **settings)
    assert kept.reused_tokens == len(prompt) - 1
    runs["from a cache that holds the prompt"] = kept.token_ids
    return runs


@pytest.mark.parametrize("tree", [False, True])
def test_a_seed_repeats_a_sampled_run_whatever_ran_before(bundled, tree):
    prompt = bundled.tokenizer("def fibonacci(n):\n").input_ids
    for drafter in bundled.drafters:
        if tree and drafter not in ("model", "eagle", "medusa"):
            continue  # the drafters that draft token trees
        settings = {**SAMPLED, "drafter": drafter, **({"tree_width": 2, "tree_nodes": 6} if tree else {})}
        first = bundled.generate(prompt, **settings)
        assert first.seed == SAMPLED["seed"]
        other = "medusa" if drafter != "medusa" else "model"  # both draft trees too
        for when, ids in runs_of(bundled, prompt, settings, other).items():
            assert ids == first.token_ids, (drafter, when)
