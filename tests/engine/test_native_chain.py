"""A draft model's greedy chain in one native call (specui.native_chain.DecoderChain, native_head.c): it drafts
the tokens its Python steps draft, with q equal to float rounding, round after round (its KV cache following
every verify outcome, the confidence stop cutting the same rounds short), for a draft over the whole vocabulary
and for one over a reduced vocabulary that borrows the target's embeddings (specui.chat_draft); and greedy
output stays plain greedy decoding. (The EAGLE head's round: tests/engine/test_head_eagle.py.)"""

import pytest
import torch

from specui import SpeculativeEngine, chat_draft, native
from specui.drafters import ModelDrafter, ModelLookupDrafter
from specui.native_chain import DecoderChain
from tests.helpers import make_model, noisy_copy

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
            drafter = cls(draft)
            begin = drafter.start

            def start(*args, use_chain=use_chain, drafter=drafter, begin=begin, **kwargs):
                begin(*args, **kwargs)
                assert drafter.chain is not None  # the chain serves this draft
                drafter.chain = drafter.chain if use_chain else None

            drafter.start = start
            engine = SpeculativeEngine(target, draft)
            runs.append(engine.generate(prompt, max_new_tokens=48, drafter=drafter, **settings))
    return runs[:len(PROMPTS)], runs[len(PROMPTS):]


@pytest.mark.parametrize("kind", ["whole vocabulary", "reduced vocabulary"])
@pytest.mark.parametrize("settings", [{"num_draft_tokens": 1}, {"num_draft_tokens": 4},
                                      {"num_draft_tokens": 6, "draft_confidence": 0.3}], ids=["K1", "K4", "K6-confident"])
def test_the_native_chain_drafts_as_the_python_steps(target, drafts, kind, settings):
    native_runs, python_runs = _runs(target, drafts[kind], ModelDrafter, **settings)
    for prompt, fast, slow in zip(PROMPTS, native_runs, python_runs):
        expected = target.generate(torch.tensor([prompt]), max_new_tokens=48, do_sample=False)[0, len(prompt):]
        assert fast.token_ids == slow.token_ids == expected.tolist()
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


def test_sampling_and_models_it_cannot_run_keep_the_python_steps(target, drafts):
    """A sampled run draws from q with its generators: no chain. Nor for a model whose products are not all the
    native kernels' (a small draft's transposed matrices on a CPU whose GEMM rows are row-invariant)."""
    if native.kernel() is None:
        pytest.skip("no native kernels here")
    drafter = ModelDrafter(drafts["whole vocabulary"])
    SpeculativeEngine(target, drafts["whole vocabulary"]).generate([1, 2, 3], max_new_tokens=4, drafter=drafter,
                                                                   temperature=0.7, seed=1)
    assert drafter.chain is None
    drafter = ModelDrafter(drafts["whole vocabulary"])
    SpeculativeEngine(target, drafts["whole vocabulary"]).generate([1, 2, 3], max_new_tokens=4, drafter=drafter)
    assert drafter.chain is not None and DecoderChain.serves(drafter.lm)
    drafter.lm.stack.params[0][1].native = None  # as if its q/k/v took MKL's products
    assert not DecoderChain.serves(drafter.lm)
