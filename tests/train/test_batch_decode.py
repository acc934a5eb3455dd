"""specui.train.batch_decode: a batch of left-padded prompts decoded over a static cache (replayed CUDA graphs on
a GPU; the same steps eagerly here) gives transformers' generate() answers: greedy token for token, sampled
after the same temperature and top-p."""

from __future__ import annotations

import pytest
import torch

from specui.train.batch_decode import _pick, answer_batch
from tests.helpers import make_model

PAD = 0


def left_padded(lengths: list[int], *, vocab_size: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    width = max(lengths)
    ids = torch.full((len(lengths), width), PAD, dtype=torch.long)
    mask = torch.zeros(len(lengths), width, dtype=torch.long)
    for row, n in enumerate(lengths):
        ids[row, width - n:] = torch.randint(1, vocab_size, (n,), generator=g)
        mask[row, width - n:] = 1
    return ids, mask


def generated(model, ids, mask, *, max_new: int, eos: int) -> torch.Tensor:
    out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=max_new, do_sample=False,
                         pad_token_id=PAD, eos_token_id=eos)
    return torch.cat([out, torch.full((ids.shape[0], ids.shape[1] + max_new - out.shape[1]), PAD)], dim=1)


@pytest.mark.parametrize("arch", ["llama", "qwen2"])  # grouped-query attention; qwen2's q, k, v biases
def test_greedy_answers_equal_generate(arch):
    model = make_model(arch, vocab_size=96, layers=3, seed=1)
    ids, mask = left_padded([5, 11, 2, 8], vocab_size=96, seed=2)
    never = 10_000  # no row ends: every answer runs to max_new
    with torch.inference_mode():
        expected = generated(model, ids, mask, max_new=12, eos=never)
    assert torch.equal(answer_batch(model, ids, mask, max_new=12, eos=never, pad=PAD), expected)
    eos = int(expected[0, ids.shape[1] + 3])  # row 0 ends at its 4th token, the others where that token comes
    with torch.inference_mode():
        expected = generated(model, ids, mask, max_new=12, eos=eos)
    mine = answer_batch(model, ids, mask, max_new=12, eos=eos, pad=PAD)
    assert torch.equal(mine, expected)
    assert mine[0, ids.shape[1] + 3] == eos and (mine[0, ids.shape[1] + 4:] == PAD).all()


def test_a_batch_whose_rows_all_ended_stops_and_pads():
    model = make_model("llama", vocab_size=64, layers=2, seed=3)
    ids, mask = left_padded([6], vocab_size=64, seed=4)
    ids, mask = ids.repeat(2, 1), mask.repeat(2, 1)  # two rows, one prompt: both end at the first token
    first = answer_batch(model, ids, mask, max_new=40, eos=10_000, pad=PAD)[0, ids.shape[1]]
    out = answer_batch(model, ids, mask, max_new=40, eos=int(first), pad=PAD)
    assert out.shape == (2, ids.shape[1] + 40) and (out[:, ids.shape[1]] == first).all()
    assert (out[:, ids.shape[1] + 1:] == PAD).all()


def test_top_p_keeps_what_transformers_keeps():
    from transformers.generation.logits_process import TemperatureLogitsWarper, TopPLogitsWarper

    torch.manual_seed(5)
    logits = torch.randn(64, 500) * 3
    theirs = TopPLogitsWarper(0.9)(None, TemperatureLogitsWarper(0.7)(None, logits.clone()))
    kept = torch.isfinite(theirs)
    draws = torch.stack([_pick(logits, {"temperature": 0.7, "top_p": 0.9}) for _ in range(200)], dim=1)
    assert kept.gather(1, draws).all()  # every draw inside transformers' nucleus
    assert (kept.sum(1) > 1).any()  # and the nucleus is not just the top token
    assert torch.equal(_pick(logits, None), logits.argmax(-1))


def test_sampled_answers_follow_the_seed():
    model = make_model("llama", vocab_size=96, layers=2, seed=6)
    ids, mask = left_padded([3, 7, 5], vocab_size=96, seed=7)
    sample = {"temperature": 0.7, "top_p": 0.9}
    runs = []
    for seed in (11, 11, 12):
        torch.manual_seed(seed)
        runs.append(answer_batch(model, ids, mask, max_new=16, eos=10_000, pad=PAD, sample=sample))
    assert torch.equal(runs[0], runs[1]) and not torch.equal(runs[0], runs[2])
    assert torch.equal(runs[0][:, : ids.shape[1]], ids)
