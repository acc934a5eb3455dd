"""Shared fixtures: tiny random-initialised transformers models, built in-process (no downloads).

`make_pair` returns a target and a draft sharing one vocabulary. The draft is a noisy copy of the
target, so it agrees often but not always: rounds see every path (all rejected, partly accepted,
all accepted). A large initializer range keeps the logits peaked, so greedy argmaxes have clear
margins and float32 batched vs one-token forwards cannot flip them.
"""

from __future__ import annotations

import copy
import os

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
torch.set_num_threads(1)  # tiny models: one thread is several times faster than two on a busy 2-core machine


def make_config(arch: str, *, vocab_size: int, layers: int, hidden: int = 64, max_positions: int = 512,
                init_range: float = 0.3):
    from transformers import GPT2Config, LlamaConfig, Qwen2Config

    if arch == "llama":
        return LlamaConfig(vocab_size=vocab_size, hidden_size=hidden, intermediate_size=2 * hidden,
                           num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
                           max_position_embeddings=max_positions, initializer_range=init_range,
                           bos_token_id=None, eos_token_id=None, pad_token_id=None)
    if arch == "qwen2":
        return Qwen2Config(vocab_size=vocab_size, hidden_size=hidden, intermediate_size=2 * hidden,
                           num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
                           max_position_embeddings=max_positions, initializer_range=init_range,
                           bos_token_id=None, eos_token_id=None, pad_token_id=None, use_sliding_window=False)
    if arch == "gpt2":
        return GPT2Config(vocab_size=vocab_size, n_embd=hidden, n_layer=layers, n_head=4, n_positions=max_positions,
                          initializer_range=init_range, bos_token_id=None, eos_token_id=None)
    raise ValueError(arch)


def make_model(arch: str = "llama", *, vocab_size: int = 96, layers: int = 3, seed: int = 0, **kw):
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(make_config(arch, vocab_size=vocab_size, layers=layers, **kw))
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = None
    return model.eval()


def noisy_copy(model, *, noise: float, seed: int):
    """A draft that agrees with `model` often but not always."""
    draft = copy.deepcopy(model)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in draft.parameters():
            p.add_(torch.randn(p.shape, generator=gen) * noise * p.std().clamp_min(1e-3))
    return draft


@pytest.fixture(scope="session")
def llama_pair():
    target = make_model("llama", layers=3, seed=0)
    return target, noisy_copy(target, noise=0.35, seed=1)


def random_prompts(n: int, *, vocab_size: int, seed: int, min_len: int = 2, max_len: int = 24) -> list[list[int]]:
    """Prompts with some repetition inside, so prompt lookup finds matches."""
    gen = torch.Generator().manual_seed(seed)
    prompts = []
    for _ in range(n):
        length = int(torch.randint(min_len, max_len + 1, (1,), generator=gen))
        base = torch.randint(0, vocab_size, (max(1, length // 2),), generator=gen).tolist()
        prompts.append((base * 3)[:length])
    return prompts


def char_tokenizer(*, reverse: bool = False):
    """A 96-token character-level tokenizer (printable ASCII + [UNK]) in transformers' fast format."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    chars = [chr(c) for c in range(32, 127)]
    if reverse:
        chars = chars[::-1]
    vocab = {"[UNK]": 0, **{ch: i + 1 for i, ch in enumerate(chars)}}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Split("", behavior="isolated")
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]")


def save_tiny_model(folder, arch: str, *, layers: int, seed: int, tokenizer=None, model=None):
    """Save a random-initialised model (and its tokenizer) as a complete Hugging Face folder."""
    model = model if model is not None else make_model(arch, layers=layers, seed=seed)
    model.save_pretrained(folder)
    (tokenizer or char_tokenizer()).save_pretrained(folder)
    return str(folder)
