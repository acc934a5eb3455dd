"""A draft model's round in one native call (specui.native_chain.DecoderChain, native_head.c): it drafts the tokens its
Python steps draft, greedy or sampled (with top-k and top-p too), with q equal to float rounding, round after round (its KV
cache following every verify outcome, the confidence stop cutting the same rounds short), for a draft over the whole
vocabulary and for one over a reduced vocabulary that borrows the target's embeddings (specui.chat_draft); greedy
output stays plain greedy decoding, and a sampled round draws from the q it reports; with a repetition penalty
too, each step penalising what the round has seen. (The EAGLE head's round:
tests/engine/test_head_eagle.py.)"""

import pytest
import torch

from specui import SpeculativeEngine, chat_draft, native
from specui.drafters import ModelDrafter, ModelLookupDrafter
from specui.native_chain import DecoderChain, StackLayers, nucleus
from specui.sampling import Sampling, _outside_nucleus
from tests.helpers import chain_or_steps, draws_p_value, make_model, noisy_copy

pytestmark = pytest.mark.skipif(native.best_isa() is None, reason="no x86 CPU with AVX2 and FMA")

PROMPTS = [[5, 17, 3, 88, 41, 300, 17, 3], [9, 9, 401]]


@pytest.fixture(scope="module")
def target():
    return make_model("llama", vocab_size=512, layers=2, hidden=384, seed=1)  # head size 96, products native


@pytest.fixture(scope="module")
def drafts(target):
    token_ids = torch.randperm(512, generator=torch.Generator().manual_seed(3))[:400].sort().values
    reduced = chat_draft.build(target, num_layers=2, token_ids=token_ids, init_layers=[0, 1])
    return {"whole vocabulary": noisy_copy(target, noise=0.4, seed=2), "reduced vocabulary": reduced.eval()}


def _runs(target, draft, cls, **settings):
    """The same generations with the native chain and with the Python steps."""
    if native.kernel() is None:
        pytest.skip("no native kernels here")
    runs = []
    for use_chain in (True, False):
        for prompt in PROMPTS:
            drafter = chain_or_steps(cls(draft), use_chain)
            engine = SpeculativeEngine(target, draft)
            runs.append(engine.generate(prompt, max_new_tokens=48, drafter=drafter, **settings))
    return runs[:len(PROMPTS)], runs[len(PROMPTS):]


SAMPLED = {"temperature": 0.2, "seed": 5}  # low: random models agree on little


@pytest.mark.parametrize("kind", ["whole vocabulary", "reduced vocabulary"])
@pytest.mark.parametrize("settings", [{"num_draft_tokens": 1}, {"num_draft_tokens": 4},
                                      {"num_draft_tokens": 6, "draft_confidence": 0.3},
                                      {"num_draft_tokens": 4, **SAMPLED},
                                      {"num_draft_tokens": 6, "draft_confidence": 0.3, **SAMPLED},
                                      {"num_draft_tokens": 4, "temperature": 0.6, "top_p": 0.9, "seed": 5},
                                      {"num_draft_tokens": 4, "temperature": 0.6, "top_k": 8, "top_p": 0.95, "seed": 5},
                                      {"num_draft_tokens": 4, "repetition_penalty": 1.5},
                                      {"num_draft_tokens": 6, "draft_confidence": 0.3, "repetition_penalty": 0.7,
                                       **SAMPLED}],
                         ids=["K1", "K4", "K6-confident", "K4-sampled", "K6-confident-sampled", "K4-top-p",
                              "K4-top-k-top-p", "K4-penalty", "K6-confident-sampled-penalty"])
def test_the_native_chain_drafts_as_the_python_steps(target, drafts, kind, settings):
    """Greedy, or sampled at a temperature (the round's draws taken first, the same in both): the same drafts, q
    equal to float rounding, and the same output: plain greedy decoding's when greedy."""
    native_runs, python_runs = _runs(target, drafts[kind], ModelDrafter, **settings)
    for prompt, fast, slow in zip(PROMPTS, native_runs, python_runs):
        expected = slow.token_ids if settings.get("temperature") else target.generate(
            torch.tensor([prompt]), max_new_tokens=48, do_sample=False,
            repetition_penalty=settings.get("repetition_penalty", 1.0))[0, len(prompt):].tolist()
        assert fast.token_ids == slow.token_ids == expected
        assert [r.drafted for r in fast.rounds] == [r.drafted for r in slow.rounds]
        q = [torch.tensor([p for r in run.rounds for p in r.draft_probs]) for run in (fast, slow)]
        torch.testing.assert_close(q[0], q[1], atol=1e-5, rtol=1e-4)
    rounds = [r for run in native_runs for r in run.rounds if r.num_drafted]
    outcomes = {"none" if r.num_accepted == 0 else "all" if r.num_accepted == r.num_drafted else "part" for r in rounds}
    assert "none" in outcomes and len(outcomes) >= 2  # the cache rolled back after rejections, and went on
    if settings.get("draft_confidence"):
        assert any(0 < r.num_drafted < settings["num_draft_tokens"] for r in rounds)


def test_the_draft_model_with_lookup_takes_the_chain_between_copies(target, drafts):
    native_runs, python_runs = _runs(target, drafts["whole vocabulary"], ModelLookupDrafter, num_draft_tokens=3)
    for fast, slow in zip(native_runs, python_runs):
        assert fast.token_ids == slow.token_ids
        assert [r.drafted for r in fast.rounds] == [r.drafted for r in slow.rounds]
    assert any(r.copied for run in native_runs for r in run.rounds)


@pytest.mark.parametrize("sampling", [Sampling(temperature=1.5), Sampling(temperature=1.5, top_p=0.8),
                                      Sampling(temperature=2.0, top_k=40, top_p=0.9)], ids=["T", "top-p", "top-k-top-p"])
def test_the_native_sampled_chain_draws_from_the_q_it_reports(target, drafts, sampling):
    """Exactness rests on each drafted token being drawn from the q the round reports: the first token of
    thousands of native sampled rounds from one context follows the reported q (chi-square), top-k and top-p
    applied or not; a broken draw (uniforms squared, no longer uniform) fails the same test."""
    if native.kernel() is None:
        pytest.skip("no native kernels here")
    drafter = ModelDrafter(drafts["reduced vocabulary"])
    context = PROMPTS[0]
    drafter.start(context, sampling=sampling, seed=0)
    assert drafter.chain is not None

    def p_value(squared: bool) -> float:
        generator, counts, q = torch.Generator().manual_seed(1), torch.zeros(512, dtype=torch.float64), None
        with torch.inference_mode():
            for _ in range(4000):
                draws = torch.rand(2, dtype=torch.float64, generator=generator)
                index, probs = drafter.chain.run(drafter._visible(context[drafter.lm.length:]), 2, 0.0,
                                                 drafter.sampling, draws ** 2 if squared else draws)
                drafter.lm.trim(len(context) - 1)
                token = int(drafts["reduced vocabulary"].token_ids[index[0]])
                counts[token] += 1
                q = drafter._draft(index, probs).probs[0].double() if q is None else q
        return draws_p_value(counts, q)

    assert p_value(squared=False) > 1e-3
    assert p_value(squared=True) < 1e-6


def test_the_native_nucleus_cuts_where_the_python_transform_cuts():
    """`rownucleus` (the native rounds' top-k and top-p) removes the tokens `specui.sampling` removes, on random rows
    up to SmolLM2's vocabulary; the comparison is sharp enough to catch a cut one token late."""
    if native.kernel() is None:
        pytest.skip("no native kernels here")

    def python(x, s, late=False):
        if s.top_k:
            x = x.masked_fill(x < torch.topk(x, min(s.top_k, x.numel())).values[-1], float("-inf"))
        if s.top_p < 1.0:
            cut = _outside_nucleus(x[None], s.top_p)[0]
            if late:  # one more token cut: the smallest one kept
                cut = cut | (x == x.masked_fill(cut, float("inf")).min())
            x = x.masked_fill(cut, float("-inf"))
        return torch.isinf(x)

    rows = []
    for seed in range(120):
        gen = torch.Generator().manual_seed(seed)
        n = 49152 if seed % 30 == 0 else int(torch.randint(2, 9000, (1,), generator=gen))
        x = torch.randn(n, generator=gen) * (float(torch.rand(1, generator=gen)) * 8 + 0.1)
        s = Sampling(temperature=1.0, top_p=float(torch.rand(1, generator=gen)) * 0.99 + 0.005 if seed % 3 else 1.0,
                     top_k=int(torch.randint(0, 60, (1,), generator=gen)) if seed % 2 else 0)
        rows.append((torch.isinf(nucleus(native.kernel(), x, s)), x, s))
    assert all(torch.equal(cut, python(x, s)) for cut, x, s in rows)
    assert sum(not torch.equal(cut, python(x, s, late=True)) for cut, x, s in rows if s.top_p < 1.0) > 40


def test_every_sampling_takes_the_native_round_but_models_it_cannot_run(target, drafts):
    """A round runs natively greedy and sampled, with top-k and top-p too. There is no chain for a model whose
    products are not all the native kernels' (as a small model's transposed matrices are, outside a draft, on a CPU
    whose GEMM rows are row-invariant)."""
    if native.kernel() is None:
        pytest.skip("no native kernels here")
    for sampling in ({"top_p": 0.9}, {"top_k": 20}, {}):
        drafter = ModelDrafter(drafts["whole vocabulary"])
        SpeculativeEngine(target, drafts["whole vocabulary"]).generate([1, 2, 3], max_new_tokens=4, drafter=drafter,
                                                                       temperature=0.7, seed=1, **sampling)
        assert drafter.chain is not None
    drafter = ModelDrafter(drafts["whole vocabulary"])
    SpeculativeEngine(target, drafts["whole vocabulary"]).generate([1, 2, 3], max_new_tokens=4, drafter=drafter)
    assert drafter.chain is not None and DecoderChain.serves(drafter.lm)
    drafter.lm.stack.params[0][1].native = None  # as if its q/k/v took MKL's products
    assert not StackLayers.serves(drafter.lm.stack)  # so a stack built so has no native layers, and no chain
    drafter.lm.stack.native_layers = None
    assert not DecoderChain.serves(drafter.lm)


def test_a_small_draft_takes_the_native_round_on_every_cpu():
    """A draft's small matrices (as the stdlib pair's, 96 wide) take the native kernels wherever they build, even where
    the target's take MKL's row-invariant GEMM: a draft's rows need not be invariant, and with every product native
    its round is one native call. Greedy output stays plain greedy decoding; sampled rounds draft what the Python
    steps draft."""
    if native.kernel() is None:
        pytest.skip("no native kernels here")
    small = make_model("llama", vocab_size=512, layers=2, hidden=128, seed=4)  # every matrix small
    draft = noisy_copy(small, noise=0.3, seed=5)
    drafter = ModelDrafter(draft)
    out = SpeculativeEngine(small, draft).generate(PROMPTS[0], max_new_tokens=24, drafter=drafter, num_draft_tokens=4)
    assert drafter.chain is not None and all(drafter.lm.stack.params[0][i].native is not None for i in (1, 2, 4, 5))
    plain = SpeculativeEngine(small, draft).generate(PROMPTS[0], max_new_tokens=24, speculative=False)
    assert out.token_ids == plain.token_ids
    native_runs, python_runs = _runs(small, draft, ModelDrafter, num_draft_tokens=4, **SAMPLED)  # sampled rounds too
    for fast, slow in zip(native_runs, python_runs):
        assert fast.token_ids == slow.token_ids and [r.drafted for r in fast.rounds] == [r.drafted for r in slow.rounds]
