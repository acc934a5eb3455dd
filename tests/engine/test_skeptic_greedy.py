"""A skeptic's greedy checks: combinations the other greedy tests leave out, on a tiny llama with every drafter.

Each run is compared token for token with transformers' own greedy `generate` of the target (with its
`repetition_penalty` where one is set), never with another specui run alone. Covered here: sampling that keeps only
the top token (top-k 1, a tiny top-p, the lowest temperature) is greedy decoding for every drafter and tree; adaptive
K and the repetition penalty with every drafter, heads included (the other tests hold them to the draft model and
prompt lookup); an EOS inside an accepted block and a budget that ends inside a block, for every drafter and tree;
and a prompt at the very edge of the model's context.
"""

from __future__ import annotations

import pytest
import torch

from specui import SpeculativeEngine
from specui.engine import ContextLengthError
from specui.heads import early_exit, medusa
from tests.engine.head_helpers import PATHS, path_of, perturb, sticky_target
from tests.engine.test_head_eagle import trained_head
from tests.helpers import noisy_copy, random_prompts

CHAINS = ("model", "model_lookup", "prompt_lookup", "eagle", "medusa", "early_exit", "early_exit_lookup")
TREES = tuple((drafter, width, nodes) for drafter in ("model", "eagle", "medusa") for width, nodes in ((2, 0), (3, 6)))
RUNS = [dict(drafter=d) for d in CHAINS] + [dict(drafter=d, tree_width=w, tree_nodes=n) for d, w, n in TREES]
NEW_TOKENS = 24


def label(run: dict) -> str:
    return "-".join(str(v) for v in run.values())


@pytest.fixture(scope="module")
def engine():
    target = sticky_target(seed=0)  # often predictable: drafts are accepted in part and in full too
    heads = {"eagle": trained_head(target, token_ids=torch.arange(96), steps=40, prompts=prompts()),
             "medusa": perturb(medusa.build(target, num_heads=3), scale=0.01, seed=1),
             "early_exit": perturb(early_exit.build(target, exit_layer=2), scale=0.02, seed=2)}
    return SpeculativeEngine(target, noisy_copy(target, noise=0.02, seed=1), heads=heads)


def prompts() -> list[list[int]]:
    """Two random prompts and one that repeats (so copies are proposed)."""
    return random_prompts(2, vocab_size=96, seed=21) + [[5, 6, 7, 8, 5, 6, 7, 8, 5, 6]]


def hf_greedy(model, prompt: list[int], n: int, penalty: float = 1.0) -> list[int]:
    ids = torch.tensor([prompt])
    out = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=n,
                         min_new_tokens=n, pad_token_id=0, repetition_penalty=penalty)
    return out[0, len(prompt):].tolist()


@pytest.fixture(scope="module")
def expected(engine):
    """transformers' greedy continuations of `prompts()`, by penalty."""
    return {penalty: [hf_greedy(engine.target_model, p, NEW_TOKENS, penalty) for p in prompts()]
            for penalty in (1.0, 1.4)}


TOP_ONLY = {  # sampling settings under which only the target's top token has any probability
    "top-k 1": dict(temperature=0.7, top_k=1),
    "top-p tiny, hot": dict(temperature=4.0, top_p=1e-6),
    "temperature 1e-5": dict(temperature=1e-5),
    "top-k 1, penalty": dict(temperature=1.3, top_k=1, repetition_penalty=1.4),
}


@pytest.mark.slow
@pytest.mark.parametrize("run", RUNS, ids=label)
def test_every_drafter_here_takes_every_path_often(engine, run):
    """The checks below have power only where drafts are accepted (EAGLE's head, fitted to random prompts alone, was
    right in 2 rounds of 65: its checks were of rejected drafts): with every drafter and tree, at least one round in
    five accepts drafts, and rounds are rejected whole, in part (but prompt lookup's copies) and accepted whole."""
    rounds = [r for p in prompts() for r in engine.generate(p, max_new_tokens=NEW_TOKENS, num_draft_tokens=3,
                                                                ignore_eos=True, **run).rounds if r.num_drafted]
    paths = {path_of(r) for r in rounds}
    assert set(PATHS) - ({"partly accepted"} if run == {"drafter": "prompt_lookup"} else set()) <= paths, paths
    assert sum(r.num_accepted > 0 for r in rounds) >= len(rounds) / 5, (len(rounds), paths)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(TOP_ONLY))
def test_sampling_that_keeps_only_the_top_token_is_greedy_decoding(engine, expected, name):
    settings = TOP_ONLY[name]
    want = expected[settings.get("repetition_penalty", 1.0)]
    for prompt, greedy in zip(prompts(), want):
        plain = engine.generate(prompt, max_new_tokens=NEW_TOKENS, speculative=False, ignore_eos=True, seed=3,
                                **settings)
        assert plain.token_ids == greedy, (name, prompt)
        for run in RUNS:
            for seed in (0, 1):
                out = engine.generate(prompt, max_new_tokens=NEW_TOKENS, num_draft_tokens=3, ignore_eos=True,
                                      seed=seed, **run, **settings)
                assert out.token_ids == greedy, (name, label(run), prompt, seed)


@pytest.mark.slow
@pytest.mark.parametrize("drafter", CHAINS)
def test_adaptive_k_and_the_penalty_with_every_drafter_are_greedy_decoding(engine, expected, drafter):
    cases = [dict(adaptive=True, num_draft_tokens=1), dict(adaptive=True, num_draft_tokens=3, draft_confidence=0.4),
             dict(adaptive=True, num_draft_tokens=2, repetition_penalty=1.4),
             dict(num_draft_tokens=4, repetition_penalty=1.4), dict(num_draft_tokens=5, repetition_penalty=1.4,
                                                                    draft_confidence=0.3)]
    ks = set()
    for settings in cases:
        want = expected[settings.get("repetition_penalty", 1.0)]
        for prompt, greedy in zip(prompts(), want):
            out = engine.generate(prompt, max_new_tokens=NEW_TOKENS, drafter=drafter, ignore_eos=True, **settings)
            assert out.token_ids == greedy, (drafter, settings, prompt)
            if settings.get("adaptive"):
                ks |= {r.num_drafted for r in out.rounds if not r.copied}
    assert drafter == "prompt_lookup" or len(ks) > 2, ks  # K moved (prompt lookup drafts what it finds)


@pytest.mark.slow
@pytest.mark.parametrize("run", RUNS, ids=label)
def test_an_eos_inside_an_accepted_block_ends_the_run_there(engine, run):
    """EOS: a token of greedy output whose first time comes after a few tokens; the run stops at that token, every
    token before it as plain decoding's. Some EOS is accepted as a draft (inside a block, the drafts after it
    dropped) for every drafter and tree here but prompt lookup and Medusa's chain, which never drafted one."""
    target = engine.target_model
    inside = 0
    for prompt in prompts():
        greedy = hf_greedy(target, prompt, NEW_TOKENS)
        for stop_at in sorted({greedy.index(t) for t in greedy if greedy.index(t) >= 2}):
            eos = greedy[stop_at]
            stopping = SpeculativeEngine(target, engine.draft_model, heads=engine.heads, eos_token_id=eos)
            out = stopping.generate(prompt, max_new_tokens=NEW_TOKENS, num_draft_tokens=4, **run)
            assert out.token_ids == greedy[:stop_at + 1], (label(run), prompt, eos)
            assert out.stop_reason == "eos"
            last = out.rounds[-1]
            inside += last.kinds[-1] == "accepted" and last.num_drafted > len(last.token_ids)
    assert inside or run in ({"drafter": "prompt_lookup"}, {"drafter": "medusa"}), "no EOS inside an accepted block"


@pytest.mark.slow
@pytest.mark.parametrize("run", RUNS, ids=label)
def test_a_budget_that_ends_inside_a_block_keeps_plain_decodings_tokens(engine, expected, run):
    for prompt, greedy in zip(prompts(), expected[1.0]):
        for n in (1, 2, 3, 5, 6, 9):
            out = engine.generate(prompt, max_new_tokens=n, num_draft_tokens=4, ignore_eos=True, **run)
            assert out.token_ids == greedy[:n], (label(run), prompt, n)
            assert out.stop_reason == "length"


@pytest.mark.slow
@pytest.mark.parametrize("run", RUNS, ids=label)
def test_a_prompt_at_the_contexts_edge(engine, run):
    """The prompt and the tokens asked for fill the context exactly: greedy output is transformers', no round
    drafts past the last position; one token more is refused before any work."""
    limit = engine.target_model.config.max_position_embeddings
    new = 6
    prompt = random_prompts(1, vocab_size=96, seed=5, min_len=limit - new, max_len=limit - new)[0]
    assert len(prompt) + new == limit
    greedy = hf_greedy(engine.target_model, prompt, new)
    for k in (3, 7):  # 7: more than the 5 drafts the budget allows
        out = engine.generate(prompt, max_new_tokens=new, num_draft_tokens=k, ignore_eos=True, **run)
        assert out.token_ids == greedy, (label(run), k)
    with pytest.raises(ContextLengthError):
        engine.generate(prompt + [1], max_new_tokens=new, num_draft_tokens=3, **run)
