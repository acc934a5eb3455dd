"""The library as a power user drives it, with settings transformers' generate takes: a run's own eos_token_id (where
a `load_engine` engine gave no way to stop at another token than its preset's), taken and checked as the engine's
is, and exact: speculative decoding stops where plain decoding does, with every drafter; and the keywords of
transformers' generate that are no setting here, refused saying which setting does what they did there."""

from __future__ import annotations

import pytest
import torch

from specui import SpeculativeEngine
from specui.heads import early_exit, medusa
from specui.settings import SettingsError
from tests.engine.head_helpers import perturb, sticky_target
from tests.engine.test_head_eagle import copycat_head
from tests.helpers import make_model, noisy_copy

PROMPT = [4, 8, 15, 16, 23, 42, 4, 8]


@pytest.fixture(scope="module")
def engine():
    target = make_model("llama", layers=2, seed=3)
    return SpeculativeEngine(target, noisy_copy(target, noise=0.3, seed=4))


@pytest.mark.parametrize("drafter", ["model", "model_lookup", "prompt_lookup"])
@pytest.mark.parametrize("settings", [dict(), dict(temperature=0.8, top_p=0.9, seed=5)])
def test_a_runs_own_eos_token_id_ends_it_where_plain_decoding_ends(engine, drafter, settings):
    """engine.generate(ids, eos_token_id=N), as transformers' generate is called, was refused ("no setting named
    'eos_token_id'"): the one way to stop at N was an engine of its own. Each arm (plain, or the drafter) with one seed
    ends at the first N of its run without it (greedy: plain decoding's tokens, every arm), and the engine's own eos ids
    stay as they were."""
    for arm in (dict(speculative=False), dict(drafter=drafter)):
        free = engine.generate(PROMPT, max_new_tokens=24, **arm, **settings).token_ids
        if not settings:
            assert free == engine.generate(PROMPT, max_new_tokens=24, speculative=False).token_ids
        eos = free[6]
        cut = free[:free.index(eos) + 1]
        for ids in (eos, [eos, 95]):
            result = engine.generate(PROMPT, max_new_tokens=24, eos_token_id=ids, **arm, **settings)
            assert (result.token_ids, result.stop_reason) == (cut, "eos"), (arm, ids)
        ignored = engine.generate(PROMPT, max_new_tokens=24, eos_token_id=eos, ignore_eos=True, **arm, **settings)
        assert ignored.token_ids == free  # ignore_eos: no id ends the run, the run's own neither
        streamed = engine.stream(PROMPT, max_new_tokens=24, eos_token_id=eos, **arm, **settings)
        assert [t for r in streamed for t in r.token_ids] == cut
    assert engine.eos_token_ids == frozenset()  # the tiny target has none; a run's is its own


def test_a_runs_own_eos_token_id_ends_trees_and_the_heads_runs_where_plain_decoding_ends():
    """A run's eos_token_id ends the run of every drafter, token trees (draft model, EAGLE, Medusa) and the trained
    heads' chains (early exit too) included: greedy at the first N of plain decoding's tokens, a sampled run at the
    first N of its run without it, and a block that drafted past N is cut there (a sticky target: long blocks)."""
    target = sticky_target(seed=3, vocab_size=96, layers=3)
    heads = {"eagle": copycat_head(target), "medusa": perturb(medusa.build(target, num_heads=4), scale=0.01, seed=1),
             "early_exit": perturb(early_exit.build(target, exit_layer=1), scale=0.02, seed=1)}
    engine = SpeculativeEngine(target, noisy_copy(target, noise=0.3, seed=4), heads=heads)
    plain = engine.generate(PROMPT, max_new_tokens=40, speculative=False).token_ids
    cut_inside = 0
    for drafter in engine.drafters:
        for width in (1, 2) if drafter in ("model", "eagle", "medusa") else (1,):
            for settings in (dict(), dict(temperature=0.8, top_p=0.9, seed=5)):
                arm = dict(drafter=drafter, tree_width=width, **settings)
                free = engine.generate(PROMPT, max_new_tokens=40, **arm).token_ids
                assert settings or free == plain, arm
                for eos in {free[i] for i in range(3, 40, 8)}:
                    result = engine.generate(PROMPT, max_new_tokens=40, eos_token_id=eos, **arm)
                    assert (result.token_ids, result.stop_reason) == (free[:free.index(eos) + 1], "eos"), (arm, eos)
                    last = result.rounds[-1]
                    cut_inside += len(last.token_ids) < min(last.num_accepted + 1, 40 - sum(
                        len(r.token_ids) for r in result.rounds[:-1]))
    assert cut_inside, "no run's last block was cut at its eos"


@pytest.mark.parametrize("eos, said", [(96, "96"), (-3, "-3"), ([5, 200], r"\[5, 200\]: 200")])
def test_a_runs_eos_token_id_outside_the_vocabulary_is_refused_by_name(engine, eos, said):
    """A run's eos_token_id is checked as the engine's (test_library_mistakes), None there meaning the engine's."""
    with pytest.raises(ValueError, match=rf"^eos_token_id={said} is outside the target's vocabulary \(token ids "
                                         r"0 to 95\): give an id of its tokenizer \(e\.g\. tokenizer\.eos_token_id\) "
                                         r"or None \(the engine's\)$"):
        engine.generate(PROMPT, max_new_tokens=4, eos_token_id=eos)
    with pytest.raises(ValueError, match=r"^eos_token_id takes a token id .* or None \(the engine's\), not '</s>'$"):
        engine.generate(PROMPT, max_new_tokens=4, eos_token_id="</s>")
    assert len(engine.generate(PROMPT, max_new_tokens=4).token_ids) == 4  # still serving


@pytest.mark.parametrize("name, value, meant", [("do_sample", True, r"temperature \(0: greedy; above 0: sampled\)"),
                                                ("max_length", 40, r"max_new_tokens \(the new tokens alone"),
                                                ("stop_strings", ["\n"], r"eos_token_id= \(token ids that end the run"),
                                                ("num_assistant_tokens", 5, r"num_draft_tokens$")])
def test_transformers_generate_keywords_say_which_setting_does_that(engine, name, value, meant):
    """do_sample=True, max_length=, stop_strings= (transformers' generate) were refused with the list of settings
    alone, which left the user to guess that temperature samples or that max_new_tokens counts no prompt."""
    said = rf"^no setting named '{name}'; the settings are .*; for '{name}' use {meant}"
    with pytest.raises(SettingsError, match=said):
        engine.generate(PROMPT, max_new_tokens=4, **{name: value})


class Echo:
    """A drafter of one's own, with a name and the chain methods alone: it proposes the context's last k tokens."""

    name = "echo"

    def start(self, prompt, **_):
        pass

    def propose(self, context, k):
        from specui import Draft

        return Draft(torch.tensor(context[-k:]), None)

    def observe(self, num_accepted, **_):
        pass


def test_a_drafter_of_ones_own_is_named_by_its_name(engine):
    """A drafter object without the tree methods, asked for a tree, was named by its repr ("<__main__.Echo object at
    0x7efc...>"); it is named as the engine names drafters, and drafts chains exactly."""
    with pytest.raises(SettingsError, match=r"^tree_width=2 needs a drafter with the tree methods propose_tree, "
                                            r"observe_tree; drafter 'echo' lacks them \(use tree_width=1\)$"):
        engine.generate(PROMPT, max_new_tokens=4, drafter=Echo(), tree_width=2)
    plain = engine.generate(PROMPT, max_new_tokens=12, speculative=False).token_ids
    assert engine.generate(PROMPT, max_new_tokens=12, drafter=Echo()).token_ids == plain


def test_a_one_token_run_shows_as_one_token_and_one_round(engine):
    """max_new_tokens=1 showed as 'GenerationResult(1 tokens [..], 1 rounds, ...)' in a notebook."""
    shown = repr(engine.generate(PROMPT, max_new_tokens=1))
    assert shown.startswith("GenerationResult(1 token [") and "], 1 round, stop_reason='length'" in shown, shown
    assert repr(engine.generate(PROMPT, max_new_tokens=2, speculative=False)).startswith("GenerationResult(2 tokens [")


@pytest.mark.parametrize("keywords, said", [(dict(max_ngram=2.5), "max_ngram must be an integer .*, got 2.5"),
                                            (dict(min_ngram="1"), "min_ngram must be an integer .*, got '1'"),
                                            (dict(max_ngram=True), "max_ngram must be an integer .*, got True"),
                                            (dict(max_ngram=0), r"need 1 <= min_ngram <= max_ngram, got 1 and 0")])
def test_prompt_lookups_ngram_lengths_are_checked_by_name(engine, keywords, said):
    """PromptLookupDrafter(max_ngram=2.5) failed with Python's "'float' object cannot be interpreted as an integer",
    min_ngram="1" with "'<=' not supported between instances of 'int' and 'str'", and max_ngram=True was taken as 1."""
    from specui import PromptLookupDrafter

    with pytest.raises(ValueError, match=said):
        PromptLookupDrafter(**keywords)
    plain = engine.generate(PROMPT, max_new_tokens=12, speculative=False).token_ids
    assert engine.generate(PROMPT, max_new_tokens=12, drafter=PromptLookupDrafter(max_ngram=5)).token_ids == plain
