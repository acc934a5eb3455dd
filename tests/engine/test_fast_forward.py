"""specui.kv's DecoderStack (specui.lean): the lean Llama-style forward computes the model's own logits,
through extends of every size, trims of every kind and buffer growth; other models fall back.

It is not transformers' forward bit for bit: its products are GEMMs whose rows do not depend on how
many rows are computed (MKL's GEMV, which transformers' one-token forward takes, sums in another
order). So these tests check it against transformers within float32 rounding and by greedy tokens,
and check batch invariance directly (tests/test_batch_invariance.py): that is what makes greedy
speculative decoding emit plain greedy decoding's tokens by construction."""

import pytest
import torch

from specui.kv import CachedLM, DecoderStack
from tests.helpers import make_model


def _walk(lm: CachedLM, seq: list[int]) -> torch.Tensor:
    """One pass through every path: prefill, one token, a block, a trim, a block past the first
    buffer (256 positions), a last-only block, a trim to the same length, one more token."""
    parts = [lm.extend(seq[:7]), lm.extend(seq[7:8]), lm.extend(seq[8:12])]
    lm.trim(9)  # 3 rejected
    parts.append(lm.extend(seq[9:300]))  # grows the static buffer
    parts.append(lm.extend(seq[300:305], last_only=True))
    lm.trim(305)
    lm.trim(303)
    parts.append(lm.extend(seq[303:306]))
    assert lm.length == 306 == lm.cache.get_seq_length()
    return torch.cat(parts)


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_stack_equals_the_model_forward_to_rounding(arch):
    model = make_model(arch, layers=3, seed=0, max_positions=512)  # grouped-query attention: 4 heads, 2 kv heads
    if arch == "qwen2":
        with torch.no_grad():  # give the q/k/v biases values, so they are tested
            for layer in model.model.layers:
                for proj in (layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj):
                    proj.bias.normal_(0, 0.3)
    seq = torch.randint(0, 96, (310,), generator=torch.Generator().manual_seed(3)).tolist()
    fast, slow = CachedLM(model), CachedLM(model, fast=False)
    assert fast.stack is not None and slow.stack is None
    with torch.inference_mode():
        a, b = _walk(fast, seq), _walk(slow, seq)
        full = model(torch.tensor([seq[:306]])).logits[0]
    scale = b.abs().max()
    assert (a - b).abs().max() <= 1e-5 * scale  # the same model, to float32 rounding
    assert torch.equal(a.argmax(-1), b.argmax(-1))  # and the same greedy tokens
    assert torch.allclose(a[:7], full[:7], atol=1e-4)  # and the same model as a full forward


def test_unsupported_models_use_their_own_forward():
    assert DecoderStack.build(make_model("gpt2")) is None
    eager = make_model("llama")
    eager.config._attn_implementation = "eager"
    assert DecoderStack.build(eager) is None
    training = make_model("llama").train()
    assert DecoderStack.build(training) is None
    lm = CachedLM(make_model("gpt2"))
    with torch.inference_mode():
        assert lm.extend([1, 2, 3]).shape[0] == 3
        lm.trim(1)
    assert lm.cache.get_seq_length() == 1


def test_engine_across_buffer_growth_matches_transformers(llama_pair):
    """Greedy plain and speculative decoding through the stack's buffer growth (past 256 positions)
    emit what transformers' own greedy generate emits."""
    from specui import SpeculativeEngine

    target, draft = llama_pair
    prompt = torch.randint(0, 96, (250,), generator=torch.Generator().manual_seed(5)).tolist()
    engine = SpeculativeEngine(target, draft)
    plain = engine.generate(prompt, max_new_tokens=24, speculative=False).token_ids
    ids = torch.tensor([prompt])
    reference = target.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=24,
                                min_new_tokens=24, pad_token_id=0)[0, 250:].tolist()
    assert plain == reference
    for k in (1, 4):
        assert engine.generate(prompt, max_new_tokens=24, num_draft_tokens=k).token_ids == plain
