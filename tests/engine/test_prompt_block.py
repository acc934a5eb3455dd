"""A prompt's block through the lean forward's MKL products (`DecoderStack.forward(prompt=True)`) and on more
CPU threads (`SpeculativeEngine(prompt_threads=)`): the same model to float32 rounding, the same bits every
time it is computed, greedy speculative output still plain greedy output, torch's thread count put back."""

import pytest
import torch

from specui.engine import SpeculativeEngine
from specui.kv import CachedLM
from specui.lean import PROMPT_ROWS
from specui.loading import LoadedPair
from specui.presets import load_config
from specui.products import RowLinear
from tests.helpers import make_model, noisy_copy, random_prompts

HIDDEN = 256  # q/k/v of 256 x 512 and gate/up of 1024 x 256: large enough for the MKL products


@pytest.fixture
def wide():
    return make_model("llama", hidden=HIDDEN, layers=2, vocab_size=128, seed=1)


@pytest.fixture(autouse=True)
def mkl_is_fast(monkeypatch):
    """The MKL prompt path, as on an Intel CPU (elsewhere a stack whose products are all native reads a prompt
    through them: `test_where_mkl_is_slow_a_prompt_takes_the_native_kernels`), from PROMPT_ROWS rows whether or
    not native layers run the stack (they read prompts of fewer than NATIVE_PROMPT_ROWS themselves:
    tests/engine/test_native_layers.py)."""
    import specui.lean

    monkeypatch.setattr(specui.lean, "mkl_fast", lambda: True)
    monkeypatch.setattr(specui.lean, "NATIVE_PROMPT_ROWS", PROMPT_ROWS)


def _count_whole(monkeypatch) -> list[int]:
    calls = []
    original = RowLinear.whole

    def counted(self, x):
        calls.append(x.shape[0])
        return original(self, x)

    monkeypatch.setattr(RowLinear, "whole", counted)
    return calls


def test_a_prompt_block_is_the_same_model_and_the_same_bits_each_time(wide, monkeypatch):
    calls = _count_whole(monkeypatch)
    ids = torch.randint(0, 128, (40,), generator=torch.Generator().manual_seed(2)).tolist()
    runs = []
    for threads in (1, 2, 1):
        torch.set_num_threads(threads)
        lm = CachedLM(wide)
        with torch.inference_mode():
            logits = lm.extend(ids, prompt=True)
            after = lm.extend(ids[:3])  # the rounds that follow read the prompt's keys and values
        runs.append((logits, after, lm.cache.keys[..., :43].clone(), lm.cache.values[:, :, :43].clone()))
    torch.set_num_threads(1)
    assert calls and all(rows == 40 for rows in calls)  # the MKL products ran, over the prompt's rows
    assert all(torch.equal(a, b) for a, b in zip(runs[0], runs[2]))  # the same bits on the same thread count
    with torch.inference_mode():
        full = wide(torch.tensor([ids + ids[:3]])).logits[0]
    tolerance = 1e-5 * full.abs().max()
    assert all((a - b).abs().max() <= tolerance for a, b in zip(runs[0][:2], runs[1][:2]))  # on 2: to rounding
    assert (torch.cat(runs[0][:2]) - full).abs().max() <= tolerance  # transformers' own forward, to rounding


def test_short_blocks_and_blocks_not_marked_prompt_keep_the_row_invariant_products(wide, monkeypatch):
    calls = _count_whole(monkeypatch)
    lm = CachedLM(wide)
    with torch.inference_mode():
        lm.extend(list(range(PROMPT_ROWS - 1)), prompt=True)  # too short to pay
        lm.extend(list(range(PROMPT_ROWS + 5)))  # not a prompt: a verify's rows are never MKL's
        CachedLM(wide).extend(list(range(PROMPT_ROWS + 5)))
    assert calls == []
    with torch.inference_mode():  # a follow-up turn's new tokens after a kept conversation (specui.prompt_cache)
        logits = lm.extend(list(range(PROMPT_ROWS + 5)), prompt=True)
        full = wide(torch.tensor([list(range(PROMPT_ROWS - 1)) + list(range(PROMPT_ROWS + 5)) * 2])).logits[0]
    assert calls and all(rows == PROMPT_ROWS + 5 for rows in calls)  # MKL's products over the block's rows
    torch.testing.assert_close(logits, full[-(PROMPT_ROWS + 5):], atol=1e-5 * float(full.abs().max()), rtol=0)


@pytest.mark.parametrize("prompt_threads", [1, 2])
def test_greedy_speculative_equals_plain_with_prompts_read_on_more_threads(wide, prompt_threads, monkeypatch):
    calls = _count_whole(monkeypatch)
    seen = []
    original = CachedLM.extend

    def spy(self, ids, **kw):
        if kw.get("prompt"):
            seen.append(torch.get_num_threads())
        return original(self, ids, **kw)

    monkeypatch.setattr(CachedLM, "extend", spy)
    torch.set_num_threads(1)
    draft = noisy_copy(wide, noise=0.3, seed=3)
    engine = SpeculativeEngine(wide, draft, prompt_threads=prompt_threads)
    for prompt in random_prompts(3, vocab_size=128, seed=4, min_len=PROMPT_ROWS + 2, max_len=60):
        plain = engine.generate(prompt, max_new_tokens=24, speculative=False, ignore_eos=True)
        spec = engine.generate(prompt, max_new_tokens=24, num_draft_tokens=3, ignore_eos=True)
        assert spec.token_ids == plain.token_ids
        reference = wide.generate(torch.tensor([prompt]), max_new_tokens=24, do_sample=False, min_new_tokens=24)
        assert plain.token_ids == reference[0, len(prompt):].tolist()
        assert torch.get_num_threads() == 1  # put back for the rounds and after
    assert calls  # the prompts took the MKL products
    assert seen and set(seen) == {prompt_threads}  # the target's and the draft's prompts, on that many threads


def test_prompt_threads_are_checked_and_resolved(wide, tmp_path):
    with pytest.raises(ValueError, match="prompt_threads must be a positive integer"):
        SpeculativeEngine(wide, prompt_threads=0)
    (tmp_path / "models.yaml").write_text("presets:\n  a: {target: x, prompt_threads: all}\n"
                                          "  b: {target: x, prompt_threads: 3}\n  c: {target: x}\n")
    config = load_config(tmp_path / "models.yaml")
    pairs = {name: LoadedPair(preset=config.get(name), target=wide, draft=None, tokenizer=None) for name in "abc"}
    assert pairs["a"].prompt_threads == len(__import__("os").sched_getaffinity(0))
    assert pairs["b"].prompt_threads == 3 and pairs["b"].engine().prompt_threads == 3
    assert pairs["c"].prompt_threads is None


def test_a_long_prompt_takes_native_attention_in_blocks(wide, monkeypatch):
    """A prompt longer than PREFILL_SDPA rows on a float32 stack: native attention (row blocks on torch's
    threads), not sdpa's, and still transformers' model to float32 rounding, rounds after it included."""
    import specui.lean
    from specui import native

    if native.kernel() is None:
        pytest.skip("no native kernels on this machine")
    monkeypatch.setattr(native, "ATTEND_ROWS", 64)  # several blocks of rows
    sdpa = []
    monkeypatch.setattr(specui.lean.F, "scaled_dot_product_attention", lambda *a, **k: sdpa.append(1))
    ids = torch.randint(0, 128, (specui.lean.PREFILL_SDPA + 90,), generator=torch.Generator().manual_seed(3)).tolist()
    torch.set_num_threads(2)
    try:
        lm = CachedLM(wide)
        with torch.inference_mode():
            logits = torch.cat([lm.extend(ids, prompt=True), lm.extend(ids[:2])])
    finally:
        torch.set_num_threads(1)
    assert not sdpa
    monkeypatch.undo()
    with torch.inference_mode():
        full = wide(torch.tensor([ids + ids[:2]])).logits[0]
    # float32 rounding over a 300-token prompt on two threads: 1.0e-5 of the largest logit on an Intel VM (2026-11-28)
    assert (logits - full).abs().max() <= 3e-5 * full.abs().max()


def test_where_mkl_is_slow_a_prompt_takes_the_native_kernels(wide, monkeypatch):
    """On a CPU where MKL's GEMM is slow (`products.mkl_fast` false: not Intel's), a stack whose products are all
    native reads a prompt through them, with the bits of the same block not marked prompt."""
    import specui.lean

    monkeypatch.setattr(specui.lean, "mkl_fast", lambda: False)
    calls = _count_whole(monkeypatch)
    lm = CachedLM(wide)
    if lm.stack is None or lm.stack.native_layers is None:
        pytest.skip("not every product takes the native kernels on this machine")
    ids = list(range(PROMPT_ROWS + 9))
    with torch.inference_mode():
        prompt = lm.extend(ids, prompt=True)
        block = CachedLM(wide).extend(ids)
    assert calls == [] and torch.equal(prompt, block)
