"""The lean forward's layers in one native call (`native_chain.StackLayers`, native_head.c `stack_layers`) and the
MLP's SiLU(gate) * up (native_layer.c `rowswiglu`). The native layers give the Python steps' bits exactly (chain
blocks of any size, features, an early exit's two halves, a token tree's rows), so a tree's rows equal the chain's
either way; `rowswiglu` is torch's SiLU times up to float32 rounding, in either build."""

import pytest
import torch
import torch.nn.functional as F
from transformers import LlamaConfig, LlamaForCausalLM

from specui import native, native_chain
from specui.kv import CachedLM
from specui.lean import KEY_BLOCK, NATIVE_BLOCK
from tests.helpers import native_llama

pytestmark = pytest.mark.skipif(native.best_isa() is None, reason="no x86 CPU with AVX2 and FMA")


@pytest.fixture(scope="module")
def model():
    return native_llama()


def _pair(model):
    """Two caches of the model: one runs its layers natively, the other the Python steps."""
    fast, steps = CachedLM(model), CachedLM(model)
    assert fast.stack.native_forward, "the native layers must run this model for the test to mean anything"
    steps.stack.native_forward = False
    return fast, steps


@pytest.mark.parametrize("past", [0, 37, KEY_BLOCK - 2])  # the second block crosses a key block
def test_native_layers_are_the_python_steps_bit_for_bit(model, past):
    ids = torch.randint(0, 512, (past + 16,), generator=torch.Generator().manual_seed(past)).tolist()
    fast, steps = _pair(model)
    with torch.inference_mode():
        if past:
            for lm in (fast, steps):
                lm.extend(ids[:past], last_only=True, prompt=True)
        for n in (1, 2, 5, 8):
            got = fast.extend(ids[past:past + n], features=(0, 2, 3))
            want = steps.extend(ids[past:past + n], features=(0, 2, 3))
            assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1]), n
            for lm in (fast, steps):
                lm.trim(past)


def test_a_long_prompt_reads_in_parts_with_the_python_steps_bits(model):
    """A prompt on a CPU where MKL is slow (`prompt_rows` None) takes the native layers, in parts of NATIVE_BLOCK
    rows (each part's rows see the parts before it in the cache): the bits of the Python steps' single block."""
    ids = torch.randint(0, 512, (NATIVE_BLOCK + 45,), generator=torch.Generator().manual_seed(5)).tolist()
    fast, steps = _pair(model)
    fast.stack.prompt_rows = None
    with torch.inference_mode():
        got = fast.extend(ids, prompt=True, features=(1,))
        want = steps.extend(ids, features=(1,))  # not a prompt: the few-row kernels, one block
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])


def test_where_mkl_is_fast_only_a_long_prompt_takes_its_products(model, monkeypatch):
    """Where MKL is fast (an Intel CPU), the native layers still read a prompt shorter than NATIVE_PROMPT_ROWS (they
    are faster there): the bits of the same block not marked prompt; from NATIVE_PROMPT_ROWS rows MKL's GEMM does."""
    from specui import lean
    from specui.products import RowLinear

    monkeypatch.setattr(lean, "mkl_fast", lambda: True)
    calls = []
    whole = RowLinear.whole
    monkeypatch.setattr(RowLinear, "whole", lambda self, x: calls.append(x.shape[0]) or whole(self, x))
    ids = torch.randint(0, 512, (lean.NATIVE_PROMPT_ROWS,), generator=torch.Generator().manual_seed(6)).tolist()
    fast = CachedLM(model)
    assert fast.stack.prompt_rows == lean.NATIVE_PROMPT_ROWS
    with torch.inference_mode():
        short = fast.extend(ids[:-1], prompt=True)
        block = CachedLM(model).extend(ids[:-1])
        assert calls == [] and torch.equal(short, block)
        long = CachedLM(model).extend(ids, prompt=True)
    assert calls and set(calls) == {len(ids)}
    torch.testing.assert_close(long[:-1], block, atol=1e-5 * float(block.abs().max()), rtol=0)


def test_an_early_exit_verify_is_the_python_steps_bit_for_bit(model):
    """An early-exit draft's first layers (`extend_early`), then the verify, which starts at the exit for the tokens
    the draft ran and runs the last drafted one from the start."""
    ids = torch.randint(0, 512, (40,), generator=torch.Generator().manual_seed(1)).tolist()
    fast, steps = _pair(model)
    out = []
    with torch.inference_mode():
        for lm in (fast, steps):
            lm.extend(ids[:30], last_only=True)
            hidden = lm.extend_early(ids[30:33], stop=1).clone()
            out.append((hidden, lm.extend(ids[30:34])))
    assert torch.equal(out[0][0], out[1][0]) and torch.equal(out[0][1], out[1][1])


def test_a_one_token_forward_is_a_row_of_the_block(model):
    ids = torch.randint(0, 512, (30,), generator=torch.Generator().manual_seed(2)).tolist()
    lm = CachedLM(model)
    with torch.inference_mode():
        lm.extend(ids[:24], last_only=True)
        block = lm.extend(ids[24:30])
        lm.trim(24)
        alone = torch.cat([lm.extend([token]) for token in ids[24:30]])
    assert torch.equal(block, alone)


@pytest.mark.parametrize("native_tree", [True, False], ids=["native", "python-steps"])
def test_tree_rows_equal_native_chain_rows(model, native_tree):
    tree, parents, paths = [9, 10, 11, 12], [-1, 0, 0, 1], {1: [9, 10], 2: [9, 11], 3: [9, 10, 12]}
    prefix = list(range(100, 140))
    with torch.inference_mode():
        lm = CachedLM(model)
        lm.stack.native_forward = native_tree
        lm.extend(prefix, last_only=True)
        rows = lm.extend_tree(tree, parents=parents)
        for node, path in paths.items():
            chain = CachedLM(model)
            chain.extend(prefix, last_only=True)
            assert torch.equal(chain.extend(path)[-1], rows[node]), node


@pytest.mark.parametrize("past", [40, KEY_BLOCK - 3])  # the tree's rows cross a key block
def test_native_tree_rows_are_the_python_steps_bit_for_bit(model, past):
    """A tree fed in two calls (the second's nodes see the first's), with features: logits, features and the cache
    the native layers leave equal the Python steps' bits; a one-node tree too."""
    ids = torch.randint(0, 512, (past + 12,), generator=torch.Generator().manual_seed(past)).tolist()
    fast, steps = _pair(model)
    with torch.inference_mode():
        for lm in (fast, steps):
            lm.extend(ids[:past], last_only=True, prompt=True)
        for nodes, parents in ((ids[past:past + 7], [-1, 0, 0, 1, 1, 2, -1]), (ids[past + 7:past + 11], [3, 7, 8, 6]),
                               (ids[past + 11:], [9])):
            got = fast.extend_tree(nodes, parents=parents, features=(1, 3))
            want = steps.extend_tree(nodes, parents=parents, features=(1, 3))
            assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1]), parents
        length = fast.length
        assert torch.equal(fast.cache.keys[..., :length], steps.cache.keys[..., :length])
        assert torch.equal(fast.cache.values[:, :, :length], steps.cache.values[:, :, :length])


def test_tree_decoding_on_native_layers_equals_generate(model):
    """Token trees verified by the native layers: greedy output is the model's own greedy `generate`."""
    from specui import SpeculativeEngine
    from tests.helpers import noisy_copy

    engine = SpeculativeEngine(model, noisy_copy(model, noise=0.3, seed=2))
    assert CachedLM(model).stack.native_forward  # the engine's target cache is one of these
    prompt = [5, 17, 3, 88, 41]
    expected = model.generate(torch.tensor([prompt]), max_new_tokens=24, do_sample=False, eos_token_id=None,
                              pad_token_id=0)[0, len(prompt):].tolist()
    for width, nodes in ((2, 0), (3, 7)):
        result = engine.generate(prompt, max_new_tokens=24, num_draft_tokens=3, tree_width=width, tree_nodes=nodes)
        assert result.token_ids == expected, (width, nodes)
        assert any(r.tree for r in result.rounds)


@pytest.mark.parametrize("ffn", [1, 7, 8, 16, 17, 776, 1536])
def test_rowswiglu_is_silu_times_up(kernel, ffn):
    gen = torch.Generator().manual_seed(ffn)
    gu = torch.randn(5, 2 * ffn, generator=gen) * 4
    gu[0, : min(ffn, 6)] = torch.tensor([0.0, -0.0, 90.0, -90.0, 1e4, -1e4])[: min(ffn, 6)]  # e^-|g| underflows
    gate, up = gu[:, :ffn], gu[:, ffn:]
    got = native_chain.swiglu(kernel, gu)
    torch.testing.assert_close(got, F.silu(gate) * up, rtol=3e-6, atol=1e-6)
    alone = torch.cat([native_chain.swiglu(kernel, gu[r:r + 1]) for r in range(5)])
    assert torch.equal(got, alone) and got.isfinite().all()


def test_rowswiglu_gives_the_same_bits_in_both_builds():
    if native.best_isa() != "avx512":
        pytest.skip("this CPU has no AVX-512")
    gu = torch.randn(3, 2 * 777, generator=torch.Generator().manual_seed(0)) * 5
    assert torch.equal(native_chain.swiglu(native.kernel("avx512"), gu), native_chain.swiglu(native.kernel("avx2"), gu))


def test_a_small_model_keeps_the_python_steps():
    """Small matrices take the native kernels only where MKL's GEMM rows are not row-invariant: such a model keeps its
    Python steps on every CPU (a draft model's native rounds still use its layers' structs)."""
    torch.manual_seed(0)
    small = LlamaForCausalLM(LlamaConfig(vocab_size=96, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                         num_attention_heads=4, num_key_value_heads=2, bos_token_id=None,
                                         eos_token_id=None, pad_token_id=None)).eval()
    stack = CachedLM(small).stack
    assert not stack.native_forward and stack._rows(torch.zeros(1, 64)).shape[0] == 2
    assert (stack.native_layers is not None) == native_chain.StackLayers.serves(stack)
