"""Greedy verification takes the argmax of the logits, as plain decoding does (issue #12, item 3).

Two logits one ulp apart can round to the same probability: an argmax of the softmax then picks the
first of them, while plain decoding (an argmax of the logits) picks the larger one."""

from __future__ import annotations

import torch

from specui import SpeculativeEngine
from specui.verify_rule import BONUS, RESAMPLED, verify
from tests.helpers import make_model

LOW, HIGH = 5, 9  # token HIGH's logit is one float32 ulp above token LOW's
NEAR_TIE = torch.zeros(96)
NEAR_TIE[LOW] = 0.2
NEAR_TIE[HIGH] = torch.nextafter(torch.tensor(0.2), torch.tensor(1.0))


def test_the_near_tie_is_invisible_in_the_probabilities():
    probs = torch.softmax(NEAR_TIE, -1)
    assert NEAR_TIE[HIGH] > NEAR_TIE[LOW] and probs[HIGH] == probs[LOW]
    assert int(probs.argmax()) == LOW and int(NEAR_TIE.argmax()) == HIGH


def test_verify_follows_the_argmax_it_is_given():
    logits = torch.stack([NEAR_TIE, NEAR_TIE])
    probs = torch.softmax(logits, -1)
    v = verify(target_probs=probs, draft_tokens=torch.tensor([HIGH]), draft_probs=None, generator=None,
               target_argmax=logits.argmax(-1))
    assert (v.num_accepted, v.next_token, v.next_kind) == (1, HIGH, BONUS)
    v = verify(target_probs=probs, draft_tokens=torch.tensor([LOW]), draft_probs=None, generator=None,
               target_argmax=logits.argmax(-1))
    assert (v.num_accepted, v.next_token, v.next_kind) == (0, HIGH, RESAMPLED)


def test_speculative_greedy_equals_plain_at_an_ulp_tie():
    model = make_model("llama", layers=1, seed=0)
    # every position's logits: the near tie (the hook also keeps the lean forward out of the way)
    model.lm_head.register_forward_hook(lambda module, args, out: NEAR_TIE.expand_as(out).clone())
    engine = SpeculativeEngine(model)
    prompt = [1, HIGH, 2, HIGH, HIGH]
    plain = engine.generate(prompt, max_new_tokens=10, speculative=False).token_ids
    assert plain == [HIGH] * 10
    for k in (1, 4):
        spec = engine.generate(prompt, max_new_tokens=10, num_draft_tokens=k, drafter="prompt_lookup")
        assert spec.token_ids == plain
        assert spec.num_accepted > 0  # the drafts of HIGH were accepted, not swapped for LOW
