"""Drafts that borrow the target's embeddings and draft over a reduced vocabulary (specui.chat_draft)."""

from __future__ import annotations

import json

import pytest
import torch

from specui import chat_draft


def tiny_target(seed: int = 0, vocab: int = 120):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=4,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                         tie_word_embeddings=True, initializer_range=0.3, bos_token_id=None, eos_token_id=None,
                         pad_token_id=None)
    model = LlamaForCausalLM(config).eval()
    model.generation_config.eos_token_id = None
    return model


def test_build_borrows_embeddings_and_output_rows():
    target = tiny_target()
    token_ids = torch.tensor([0, 3, 7, 50, 119])
    draft = chat_draft.build(target, num_layers=2, token_ids=token_ids, init_layers=[0, 3])
    assert draft.model.embed_tokens is target.model.embed_tokens
    assert torch.equal(draft.lm_head.weight, target.lm_head.weight[token_ids])
    assert not draft.lm_head.weight.requires_grad
    assert torch.equal(draft.model.layers[1].mlp.up_proj.weight, target.model.layers[3].mlp.up_proj.weight)
    with torch.inference_mode():
        logits = draft(input_ids=torch.tensor([[1, 2, 118]])).logits
    assert logits.shape == (1, 3, 5)


def test_a_full_copy_computes_the_target():
    target = tiny_target()
    every = torch.arange(120)
    draft = chat_draft.build(target, num_layers=4, token_ids=every, init_layers=[0, 1, 2, 3]).eval()
    ids = torch.tensor([[5, 9, 11, 100, 7]])
    with torch.inference_mode():
        assert torch.equal(draft(input_ids=ids).logits, target(input_ids=ids).logits)


def test_save_and_load_round_trip(tmp_path):
    target = tiny_target()
    token_ids = torch.tensor([1, 2, 4, 8, 16, 32, 64])
    draft = chat_draft.build(target, num_layers=2, token_ids=token_ids, init_layers=[0, 1]).eval()
    with torch.no_grad():
        for p in draft.model.layers.parameters():
            p.copy_(p.half().float())  # what survives the float16 files exactly
    chat_draft.save(draft, tmp_path / "d", facts={"note": "test"}, shard_bytes=20_000)
    meta = json.loads((tmp_path / "d" / chat_draft.META).read_text())
    assert len(meta["files"]) > 1 and meta["note"] == "test"  # sharded under the size given
    assert chat_draft.is_draft_folder(tmp_path / "d")
    loaded = chat_draft.load(tmp_path / "d", target)
    assert torch.equal(loaded.token_ids, token_ids)
    ids = torch.tensor([[3, 1, 4, 1, 5, 9, 2, 6]])
    with torch.inference_mode():
        assert torch.equal(loaded(input_ids=ids).logits, draft(input_ids=ids).logits)


def test_load_refuses_another_target(tmp_path):
    draft = chat_draft.build(tiny_target(), num_layers=1, token_ids=torch.arange(10), init_layers=[0])
    chat_draft.save(draft, tmp_path / "d")
    with pytest.raises(ValueError, match="made for a target of width 64 and 120 tokens"):
        chat_draft.load(tmp_path / "d", tiny_target(vocab=200))
