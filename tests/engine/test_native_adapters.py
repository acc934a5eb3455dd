"""The early-exit and Medusa heads' rounds in one native call each (specui.native_adapters, native_adapters.c): each
drafts the tokens its Python steps draft, greedy or sampled (top-k and top-p too), with q equal to float rounding
(an early exit with and without its MLP, over the whole vocabulary or a reduced one; Medusa's heads of one and two
blocks), the confidence stop cutting the same rounds short; the target's cache and the states the verify forward
starts at the exit layer are the Python steps' bit for bit, on every outcome of a round; greedy output stays plain
greedy decoding, and a sampled round's token follows the q it reports (chi-square; a broken draw is caught). A
target whose layers are not native keeps the early exit's Python steps."""

import pytest
import torch

from specui import SpeculativeEngine, native
from specui.heads import early_exit, medusa
from specui.kv import CachedLM
from specui.native_adapters import ExitChain, MedusaChain
from specui.sampling import Sampling
from tests.engine.head_helpers import PATHS, path_of, perturb
from tests.engine.test_engine_greedy import hf_greedy
from tests.helpers import chain_or_steps, draws_p_value, native_llama

pytestmark = pytest.mark.skipif(native.best_isa() is None, reason="no x86 CPU with AVX2 and FMA")

PROMPTS = [[5, 17, 3, 88, 41, 300, 17, 3], [9, 9, 401]]
NEW_TOKENS = 40


@pytest.fixture(scope="module")
def target():
    return native_llama()  # its layers run natively, as SmolLM2's do


@pytest.fixture(scope="module")
def heads(target):
    reduced = torch.randperm(512, generator=torch.Generator().manual_seed(3))[:300].sort().values
    return {"whole vocabulary": perturb(early_exit.build(target, exit_layer=2), scale=0.02, seed=1),
            "reduced, MLP": perturb(early_exit.build(target, exit_layer=1, token_ids=reduced, mlp_hidden=64),
                                    scale=0.02, seed=2),
            "Medusa": perturb(medusa.build(target, num_heads=4), scale=0.02, seed=3),
            "Medusa, reduced, 2 blocks": perturb(medusa.build(target, num_heads=3, num_blocks=2, token_ids=reduced),
                                                 scale=0.02, seed=4)}


def _runs(target, head, **settings):
    """The same generations with the native round and with the Python steps."""
    if native.kernel() is None:
        pytest.skip("no native kernels here")
    runs = {}
    for use_chain in (True, False):
        for prompt in PROMPTS:
            drafter = chain_or_steps(head.make_drafter(target), use_chain)
            result = SpeculativeEngine(target).generate(prompt, max_new_tokens=NEW_TOKENS, drafter=drafter, **settings)
            runs.setdefault(use_chain, []).append(result)
    return runs[True], runs[False]


SAMPLED = {"temperature": 0.3, "seed": 5}  # low: a random head agrees with its target on little


@pytest.mark.parametrize("kind", ["whole vocabulary", "reduced, MLP", "Medusa", "Medusa, reduced, 2 blocks"])
@pytest.mark.parametrize("settings", [{"num_draft_tokens": 1}, {"num_draft_tokens": 4},
                                      {"num_draft_tokens": 6, "draft_confidence": 0.3},
                                      {"num_draft_tokens": 4, **SAMPLED},
                                      {"num_draft_tokens": 6, "draft_confidence": 0.3, **SAMPLED},
                                      {"num_draft_tokens": 4, "temperature": 0.6, "top_k": 8, "top_p": 0.95,
                                       "seed": 5}],
                         ids=["K1", "K4", "K6-confident", "K4-sampled", "K6-confident-sampled", "K4-top-k-top-p"])
def test_the_native_round_drafts_as_the_python_steps(target, heads, kind, settings):
    """Greedy, or sampled (the round's draws taken first, the same in both): the same drafts, q equal to float
    rounding, the same output: plain greedy decoding's when greedy."""
    native_runs, python_runs = _runs(target, heads[kind], **settings)
    for prompt, fast, slow in zip(PROMPTS, native_runs, python_runs):
        assert [r.drafted for r in fast.rounds] == [r.drafted for r in slow.rounds]
        assert fast.token_ids == slow.token_ids
        if not settings.get("temperature"):
            assert fast.token_ids == hf_greedy(target, prompt, NEW_TOKENS)
        for a, b in zip(fast.rounds, slow.rounds):
            torch.testing.assert_close(a.draft_probs, b.draft_probs, atol=1e-5, rtol=1e-4)
    if "draft_confidence" in settings:  # the stop cut some rounds short
        rounds = [r for run in native_runs for r in run.rounds]
        assert any(0 < r.num_drafted < settings["num_draft_tokens"] for r in rounds)


@pytest.mark.parametrize("kind", ["whole vocabulary", "Medusa"])
def test_every_outcome_of_a_greedy_round_happens_with_the_native_round(target, heads, kind):
    """Rejected at once, partly accepted and accepted whole (plain greedy decoding's tokens after each, above): for
    the early exit, a verify forward that starts the drafted tokens at the exit layer."""
    native_runs, _ = _runs(target, heads[kind], num_draft_tokens=3)
    paths = dict.fromkeys(PATHS, 0)
    for run in native_runs:
        for r in run.rounds:
            if path_of(r):
                paths[path_of(r)] += 1
    assert all(paths.values()), paths


@pytest.mark.parametrize("kind", ["whole vocabulary", "reduced, MLP"])
def test_the_round_leaves_the_cache_and_states_of_the_python_steps(target, heads, kind):
    """The keys and values of the exit's layers and the states entering it, for cur and the drafts it feeds, equal
    `extend_early`'s bit for bit, and the target's record of them (`early`) is the same."""
    if native.kernel() is None:
        pytest.skip("no native kernels here")
    head = heads[kind]
    fast, steps = CachedLM(target), CachedLM(target)
    chain = ExitChain(head, fast, native.kernel())
    prompt = PROMPTS[0]
    with torch.inference_mode():
        for lm in (fast, steps):
            lm.extend(prompt[:-1], last_only=True, prompt=True)
        index, probs, states = chain.run(fast, prompt[-1], 5, 0.0)
        fed = [prompt[-1], *head.output.token_ids[index[:-1]].tolist()]
        fast.ran_early(head.exit_layer, fed, states)
        want = steps.extend_early(fed, stop=head.exit_layer)
    assert len(fed) == 5 and torch.equal(states, want) and fast.early[1] == steps.early[1] == fed
    slots = slice(len(prompt) - 1, len(prompt) - 1 + len(fed))
    for layer in range(head.exit_layer):
        assert torch.equal(fast.cache.keys[layer][..., slots], steps.cache.keys[layer][..., slots])
        assert torch.equal(fast.cache.values[layer][:, slots], steps.cache.values[layer][:, slots])


@pytest.mark.parametrize("sampling", [Sampling(temperature=1.5), Sampling(temperature=2.0, top_k=40, top_p=0.9)],
                         ids=["T", "top-k-top-p"])
@pytest.mark.parametrize("kind", ["reduced, MLP", "Medusa, reduced, 2 blocks"])
def test_the_native_sampled_round_draws_from_the_q_it_reports(target, heads, sampling, kind):
    """Exactness rests on each drafted token being drawn from the q the round reports: the first token of thousands
    of native sampled rounds from one context follows the reported q (chi-square); a broken draw (uniforms squared,
    no longer uniform) fails the same test."""
    if native.kernel() is None:
        pytest.skip("no native kernels here")
    head = heads[kind]
    lm = CachedLM(target)
    context = PROMPTS[0]
    if kind.startswith("Medusa"):
        chain = MedusaChain(head, native.kernel())
        with torch.inference_mode():
            state = lm.extend(context, features=head.feature_layers)[1][-1]
            lm.trim(0)

        def run(draws):
            return chain.run(state, 1, 0.0, sampling, draws)[:2]
    else:
        chain = ExitChain(head, lm, native.kernel())

        def run(draws):
            return chain.run(lm, context[-1], 1, 0.0, sampling, draws)[:2]

    def p_value(squared: bool) -> float:
        generator, counts, q = torch.Generator().manual_seed(1), torch.zeros(512, dtype=torch.float64), None
        with torch.inference_mode():
            lm.extend(context[:-1], last_only=True, prompt=True)
            for _ in range(3000):
                draws = torch.rand(1, dtype=torch.float64, generator=generator)
                index, probs = run(draws ** 2 if squared else draws)
                counts[int(head.output.token_ids[index[0]])] += 1
                if q is None:
                    q = torch.zeros(512, dtype=torch.float64)
                    q[head.output.token_ids] = probs[0].double()
            lm.trim(0)
        return draws_p_value(counts, q)

    assert p_value(squared=False) > 1e-3
    assert p_value(squared=True) < 1e-6


def test_a_target_without_native_layers_keeps_the_python_steps(target, heads):
    """No native layers (as a target whose products take MKL's row-invariant GEMM): no chain, and the Python steps
    still give plain greedy decoding."""
    if native.kernel() is None:
        pytest.skip("no native kernels here")
    head = heads["whole vocabulary"]
    drafter = head.make_drafter(target)
    begin = drafter.start

    def start(*args, target, **kwargs):
        target.stack.native_layers, target.stack.native_forward = None, False  # this run's stack only
        begin(*args, target=target, **kwargs)

    drafter.start = start
    out = SpeculativeEngine(target).generate(PROMPTS[1], max_new_tokens=16, drafter=drafter, num_draft_tokens=3)
    assert drafter.chain is None and not ExitChain.serves(head, drafter.target)
    assert out.token_ids == hf_greedy(target, PROMPTS[1], 16)


def test_heads_over_half_precision_rows_keep_the_python_steps(target, heads):
    """Output rows not in float32 (a target loaded in bfloat16 lends its rows as they are) take no native round."""
    for kind in ("whole vocabulary", "Medusa"):
        head = heads[kind]
        rows = head.output._rows
        object.__setattr__(head.output, "_rows", rows.bfloat16())
        try:
            assert not (ExitChain.serves(head, CachedLM(target)) if kind != "Medusa" else MedusaChain.serves(head))
        finally:
            object.__setattr__(head.output, "_rows", rows)
        assert ExitChain.serves(head, CachedLM(target)) if kind != "Medusa" else MedusaChain.serves(head)
