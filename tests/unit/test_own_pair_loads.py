"""A workstation user's own model pair, given as folders (models.yaml or --target/--draft): what real pairs get wrong
either decodes exactly (greedy equal to plain decoding) or is refused at load in one line that says what to change.
Tiny random models saved with a character tokenizer (tests/helpers.py), loaded through `load_engine` as a user's
script would, without the warm-up."""

from __future__ import annotations

import pytest
import torch

from specui.load_checks import LoadError
from specui.loading import load_engine
from tests.helpers import char_tokenizer, make_model, noisy_copy, save_tiny_model

PROMPT = [5, 9, 14, 5, 9, 14, 22, 31]
VOCAB = 96  # make_model's and char_tokenizer's


def _engine(**preset):
    config = {"presets": {"own": {"target": "t", **preset}}}
    return load_engine("own", config=config, warm_up=False)


def test_a_draft_padded_past_the_targets_vocabulary_decodes_exactly(tmp_path, monkeypatch):
    """A draft of the target's tokenizer whose embedding matrices are padded with rows past the target's (as real
    checkpoints pad to a multiple of 64 or 128) loads, cut to the target's rows, where `SpeculativeEngine` refused it
    with a traceback ('vocabulary (128 tokens) is larger than the target's (96)'). Its padded rows are made the
    largest logits, so a draft that kept them would propose ids the target has no row for: greedy must equal plain
    decoding's, and the draft, a close copy of the target, must have its drafts accepted."""
    monkeypatch.chdir(tmp_path)
    target = make_model("llama", layers=2, seed=0)
    draft = noisy_copy(target, noise=0.02, seed=1)
    draft.resize_token_embeddings(VOCAB + 32, mean_resizing=False)
    with torch.no_grad():
        draft.get_output_embeddings().weight[VOCAB:] = 50 * draft.get_output_embeddings().weight[:32]
    save_tiny_model(tmp_path / "t", "llama", layers=2, seed=0, model=target)
    save_tiny_model(tmp_path / "d", "llama", layers=2, seed=0, model=draft)
    engine = _engine(draft="d")
    assert engine.draft_model.get_output_embeddings().weight.shape[0] == VOCAB
    plain = engine.generate(PROMPT, max_new_tokens=24, speculative=False, ignore_eos=True).token_ids
    spec = engine.generate(PROMPT, max_new_tokens=24, drafter="model", num_draft_tokens=4, ignore_eos=True)
    assert spec.token_ids == plain
    assert spec.acceptance_rate > 0.3


def test_chat_on_a_target_without_a_chat_template_is_refused_at_load_saying_what_to_change(tmp_path, monkeypatch):
    """`chat_template: true` (`--chat`) on a base model, whose tokenizer has no chat template, is refused as the
    tokenizer is read, saying to set chat_template: false (or leave out --chat), where it loaded and every reply then
    failed in transformers' apply_chat_template ('Cannot use chat template functions because tokenizer.chat_template
    is not set ...') with a traceback."""
    monkeypatch.chdir(tmp_path)
    save_tiny_model(tmp_path / "t", "llama", layers=1, seed=0)
    with pytest.raises(LoadError) as refused:
        _engine(chat_template=True)
    said = str(refused.value)
    assert "no chat template" in said and "chat_template: false for presets.own" in said and "\n" not in said
    tokenizer = char_tokenizer()
    tokenizer.chat_template = "{% for m in messages %}{{ m['content'] }}{% endfor %}"
    save_tiny_model(tmp_path / "t", "llama", layers=1, seed=0, tokenizer=tokenizer)
    assert _engine(chat_template=True).preset.chat_template  # with a template: loads


def test_a_base_pair_given_on_the_command_line_with_chat_is_told_to_leave_out_chat(tmp_path, monkeypatch):
    """The same for `--target T --chat` (the preset `command-line`): the line names the flag."""
    from specui.presets import load_config, with_pair

    monkeypatch.chdir(tmp_path)
    save_tiny_model(tmp_path / "t", "llama", layers=1, seed=0)
    preset = with_pair(load_config(), "t", chat=True).get(None)
    with pytest.raises(LoadError, match="leave out --chat"):
        load_engine(preset, warm_up=False)


@pytest.mark.parametrize("reverse", [False, True])
def test_a_draft_of_another_tokenizer_is_refused_saying_how_the_two_differ(tmp_path, monkeypatch, reverse):
    """A draft whose tokenizer is not the target's is refused as it loads, where it said only 'their vocabularies
    differ': of another size, the two sizes; of the same size with other tokens (the same characters in reverse
    order), the first id the two read differently."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    monkeypatch.chdir(tmp_path)
    save_tiny_model(tmp_path / "t", "llama", layers=1, seed=0)
    if reverse:
        tokenizer = char_tokenizer(reverse=True)
    else:  # one token fewer
        chars = {"[UNK]": 0, **{chr(c): c - 31 for c in range(32, 126)}}
        words = Tokenizer(models.WordLevel(vocab=chars, unk_token="[UNK]"))
        words.pre_tokenizer = pre_tokenizers.Split("", behavior="isolated")
        tokenizer = PreTrainedTokenizerFast(tokenizer_object=words, unk_token="[UNK]")
    save_tiny_model(tmp_path / "d", "llama", layers=1, seed=1, tokenizer=tokenizer)
    with pytest.raises(LoadError) as refused:
        _engine(draft="d")
    said = str(refused.value)
    assert ("both have 96 tokens, but id 1 is '~' in the draft's and ' ' in the target's" if reverse
            else "the draft's has 95 tokens, the target's 96") in said
    assert "Pick a draft from the target's model family" in said and "\n" not in said


def test_half_precision_on_a_cpu_is_refused_where_the_targets_own_forward_runs(tmp_path, monkeypatch):
    """dtype: bfloat16 (or float16) for a target that specui's lean forward does not compute (GPT-2 here) runs
    transformers' own forward on the CPU, whose K+1-row verify rounds otherwise than a one-token forward: greedy output
    parted from plain decoding's (a GPT-2 pair and a close copy, here: 1 prompt of 2 at 32 tokens), silently. It is
    refused as the target loads, saying to set dtype: float32; float32 loads, and a Llama target (the lean forward,
    batch-invariant in any dtype) loads in bfloat16."""
    from specui.load_checks import check_exact_forward
    from specui.presets import load_config

    monkeypatch.chdir(tmp_path)
    save_tiny_model(tmp_path / "t", "gpt2", layers=1, seed=0)
    (tmp_path / "models.yaml").write_text("presets:\n  own: {target: t, dtype: bfloat16}\n")
    with pytest.raises(LoadError) as refused:
        _engine(dtype="bfloat16")
    said = str(refused.value)  # from its config.json, before its weights load (test_own_pair_before_loading)
    assert "is a 'gpt2' model, which runs its own transformers forward" in said
    assert "Set dtype: float32 (or auto) for presets.own in models.yaml" in said and "\n" not in said
    preset = load_config(tmp_path / "models.yaml").get("own")  # a Hub model's kind is known once loaded
    with pytest.raises(LoadError, match=r"^who \(GPT2LMHeadModel\) runs its own transformers forward .* Set dtype"):
        check_exact_forward(preset, make_model("gpt2", layers=1).to(torch.bfloat16), "who")
    assert _engine(dtype="float32").target_model.dtype == torch.float32
    save_tiny_model(tmp_path / "t", "llama", layers=1, seed=0)
    assert _engine(dtype="bfloat16").target_model.dtype == torch.bfloat16


def test_half_precision_refusals_once_loaded_name_the_loaded_dtype_and_why_the_lean_forward_does_not_run(tmp_path):
    """The refusal once the target has loaded names the dtype it loaded in, where it named the preset's: with a
    device_map and dtype: auto (the checkpoint's own dtype, bfloat16 here) it said 'in auto is not batch-invariant'
    and 'Set dtype: float32 (or auto)', and auto was what loaded it so. And a Mistral whose config has a sliding window
    (as Mistral 7B v0.1's) says why the lean forward does not compute it, where it read 'MistralForCausalLM runs its
    own transformers forward (specui's lean forward computes Llama, Mistral and Qwen2 decoders)'."""
    from transformers import AutoModelForCausalLM, MistralConfig

    from specui.load_checks import check_exact_forward
    from specui.presets import load_config

    (tmp_path / "models.yaml").write_text("presets:\n  spread: {target: t, device_map: auto}\n"
                                          "  own: {target: t, dtype: bfloat16}\n")
    presets = load_config(tmp_path / "models.yaml")
    with pytest.raises(LoadError) as refused:
        check_exact_forward(presets.get("spread"), make_model("gpt2", layers=1).to(torch.bfloat16), "who")
    said = str(refused.value)
    assert "not batch-invariant in bfloat16" in said and "Set dtype: float32 for presets.spread" in said
    assert "auto" not in said and "\n" not in said
    torch.manual_seed(0)
    mistral = AutoModelForCausalLM.from_config(MistralConfig(
        vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=1, num_attention_heads=4,
        num_key_value_heads=2, sliding_window=4096)).eval().to(torch.bfloat16)
    with pytest.raises(LoadError) as refused:
        check_exact_forward(presets.get("own"), mistral, "who")
    said = str(refused.value)
    assert "computes a mistral decoder with full sdpa attention (no sliding window)" in said
    assert "computes Llama, Mistral and Qwen2 decoders" not in said and "Set dtype: float32 (or auto)" in said
