"""Loading presets through the real `from_pretrained` path, from local folders of tiny random models."""

import socket
import time

import pytest
import torch

from specui import SpeculativeEngine
from specui import hub as specui_hub
from specui.loading import LoadError, PairCache, load_pair
from specui.presets import load_config
from tests.helpers import char_tokenizer, noisy_copy, make_model, save_tiny_model


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    """Local folders for three architectures, a draft with another tokenizer, and a models.yaml naming them."""
    root = tmp_path_factory.mktemp("hub")
    for arch in ("llama", "qwen2", "gpt2"):
        target = make_model(arch, layers=2, seed=0)
        save_tiny_model(root / f"{arch}-target", arch, layers=2, seed=0, model=target)
        save_tiny_model(root / f"{arch}-draft", arch, layers=1, seed=1, model=noisy_copy(target, noise=0.3, seed=2))
    save_tiny_model(root / "other-tokenizer", "llama", layers=1, seed=3, tokenizer=char_tokenizer(reverse=True))
    (root / "models.yaml").write_text(
        "default: llama\n"
        "presets:\n"
        + "".join(f"  {a}:\n    target: ./{a}-target\n    draft: ./{a}-draft\n    dtype: float32\n    device: cpu\n"
                  for a in ("llama", "qwen2", "gpt2"))
        + "  mismatched:\n    target: ./llama-target\n    draft: ./other-tokenizer\n    device: cpu\n"
        "  lookup:\n    target: ./gpt2-target\n    device: cpu\n"
        "  quantized:\n    target: ./llama-target\n    draft: ./llama-draft\n    quantization: 4bit\n"
        "  offline:\n    target: specui-test-org/no-such-model\n    draft: specui-test-org/no-such-draft\n"
    )
    return load_config(root / "models.yaml")


@pytest.mark.parametrize("arch", ["llama", "qwen2", "gpt2"])
def test_pairs_load_and_speculate_exactly(hub, arch):
    from specui import native

    lines, compiles = [], native.needs_compiling()
    pair = load_pair(hub.get(arch), progress=lines.append)
    assert lines[-1] == "Ready" and any("draft" in line for line in lines)
    assert not native.needs_compiling()  # compiled while loading, not in the first reply; said only when it did
    assert ("Compiling specui's native kernels" in lines[-2]) == compiles
    assert not any("native kernels" in line for line in lines[:-2])
    assert pair.device.type == "cpu" and pair.target.dtype == torch.float32
    ids = pair.tokenizer("def f(x):\n    return x").input_ids
    engine = SpeculativeEngine(pair.target, pair.draft)
    plain = engine.generate(ids, max_new_tokens=16, speculative=False)
    spec = engine.generate(ids, max_new_tokens=16, num_draft_tokens=hub.get(arch).num_draft_tokens)
    assert spec.token_ids == plain.token_ids and spec.num_drafted > 0


def test_prompt_lookup_preset_loads_without_a_draft(hub):
    pair = load_pair(hub.get("lookup"))
    assert pair.draft is None and pair.preset.drafter == "prompt_lookup"


def test_mismatched_tokenizers_are_rejected_naming_both(hub):
    with pytest.raises(LoadError) as e:
        load_pair(hub.get("mismatched"))
    message = str(e.value)
    assert "'mismatched'" in message and "other-tokenizer" in message and "llama-target" in message


def test_quantization_without_cuda_is_explained(hub):
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA; the message is for machines without it")
    with pytest.raises(LoadError, match="'quantized' asks for 4bit quantization, which needs a CUDA GPU"):
        load_pair(hub.get("quantized"))


def test_unreachable_hub_names_the_preset(hub, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(LoadError, match="Preset 'offline' could not be loaded"):
        load_pair(hub.get("offline"))


def test_a_hub_out_of_reach_is_said_at_once_without_offline_mode(hub, monkeypatch):
    """Without HF_HUB_OFFLINE, transformers retried the Hub for about a minute before it failed; the probe says so
    in the time one refused connection takes, naming both models."""
    with socket.socket() as closed:  # a port nothing listens on: its connections are refused
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    for proxy in specui_hub._PROXIES:
        monkeypatch.delenv(proxy, raising=False)
    started = time.perf_counter()
    with pytest.raises(LoadError, match="needs specui-test-org/no-such-model and specui-test-org/no-such-draft from "
                                        "the Hugging Face Hub, which this machine cannot reach") as refused:
        load_pair(hub.get("offline"))
    # a folder written without ./ reads as a Hub id: the message says there is no such folder either
    meant = "(Meant as a local folder? There is no specui-test-org/no-such-model beside models.yaml.)"
    assert meant in str(refused.value)
    assert time.perf_counter() - started < 30  # not a minute of retries (a generous bound: the probe takes ms)
    assert specui_hub.unreachable([("specui-test-org/no-such-model", None)]) == ["specui-test-org/no-such-model"]
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:1")  # a proxy may reach what this machine cannot: not judged
    assert specui_hub.unreachable([("specui-test-org/no-such-model", None)]) == []



def test_a_hub_out_of_reach_on_a_space_says_what_its_owner_can_do(hub, monkeypatch):
    """A Space's owner reads the refusal in its logs: 'connect once' and 'a local folder?' are no help there; the
    Space's variable SPECUI_PRESET (or the Hub id, or a token) is."""
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("SPACE_ID", "someone/specui")
    for proxy in specui_hub._PROXIES:
        monkeypatch.delenv(proxy, raising=False)
    with pytest.raises(LoadError, match=r"cannot reach, .*: check the Hub id \(a gated or private model needs an "
                                        r"HF_TOKEN secret\), or set the Space's variable SPECUI_PRESET") as refused:
        load_pair(hub.get("offline"))
    assert "connect once" not in str(refused.value) and "Meant as a local folder" not in str(refused.value)


def test_a_reachable_hub_or_a_cached_model_is_not_refused(monkeypatch):
    from tests.unit.test_spaces_cached_hub import answering

    with answering(404) as endpoint:  # a Hub that answers (a model it has not): transformers says what it says
        monkeypatch.setenv("HF_HUB_OFFLINE", "0")
        monkeypatch.setenv("HF_ENDPOINT", endpoint)
        for proxy in specui_hub._PROXIES:
            monkeypatch.delenv(proxy, raising=False)
        assert specui_hub.answers("specui-test-org/no-such-model")
        assert specui_hub.unreachable([("specui-test-org/no-such-model", None)]) == []
    monkeypatch.setattr(specui_hub, "silence", lambda model_id, revision=None, timeout=0: "cannot be reached")
    monkeypatch.setattr(specui_hub, "is_cached", lambda model_id, revision=None: model_id == "org/cached")
    assert specui_hub.unreachable([("org/cached", None)]) == []
    assert specui_hub.unreachable([("org/cached", None), ("org/missing", "v1")]) == ["org/missing"]


def test_cache_keeps_the_loaded_pair_when_another_fails_its_checks(hub):
    """A preset refused before anything loads (4-bit without CUDA, a missing folder) leaves the loaded pair;
    one that fails as it loads (a draft of another tokenizer) has let it go already, so that a pair loads with the
    memory to itself (tests/engine/test_pair_switch.py), and the next choice of it loads it again."""
    cache = PairCache(capacity=1)
    first = cache.get(hub.get("llama"))
    assert cache.get(hub.get("llama")) is first
    with pytest.raises(LoadError, match="CUDA"):
        cache.get(hub.get("quantized"))
    assert cache.get(hub.get("llama")) is first  # still loaded, not reloaded
    with pytest.raises(LoadError):
        cache.get(hub.get("mismatched"))
    again = cache.get(hub.get("llama"))
    assert again is not first and cache.get(hub.get("llama")) is again
    second = cache.get(hub.get("gpt2"))
    assert second is not again and cache.get(hub.get("gpt2")) is second


def test_missing_local_folder_is_named(tmp_path):
    from specui.presets import parse_config

    config = parse_config({"presets": {"gone": {"target": "./nowhere", "draft": "./nowhere-either"}}},
                          path=tmp_path / "models.yaml")
    with pytest.raises(LoadError, match=r"Preset 'gone': the target folder .*nowhere has no config.json"):
        load_pair(config.get("gone"))


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
@pytest.mark.parametrize("field", ["device", "draft_device"])
def test_a_cuda_device_without_cuda_is_one_load_error(hub, field):
    from dataclasses import replace

    with pytest.raises(LoadError, match=f"asks for {field}: cuda:0, and this machine has no CUDA GPU"):
        load_pair(replace(hub.get("llama"), **{field: "cuda:0"}))


def test_preset_threads_apply_on_cpu(hub):
    from dataclasses import replace

    before = torch.get_num_threads()
    try:
        load_pair(replace(hub.get("llama"), threads=1))
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


def test_a_folder_without_a_tokenizer_says_so(tmp_path):
    """transformers said only "Couldn't instantiate the backend tokenizer from one of:" (no file, no folder)."""
    from specui.presets import parse_config

    make_model("llama", layers=1).save_pretrained(tmp_path / "weights-only")
    config = parse_config({"presets": {"bare": {"target": "./weights-only", "device": "cpu"}}},
                          path=tmp_path / "models.yaml")
    with pytest.raises(LoadError, match=r"Preset 'bare': the target .*weights-only has no tokenizer .*save_pretrained"):
        load_pair(config.get("bare"))


@pytest.mark.parametrize("role", ["target", "draft"])
def test_an_encoder_is_refused_as_not_a_causal_language_model(tmp_path, role):
    """A BERT folder loaded (as transformers' BertLMHeadModel) and then failed at the first reply with KeyError."""
    from transformers import BertConfig, BertLMHeadModel

    from specui.presets import parse_config

    save_tiny_model(tmp_path / "llama", "llama", layers=1, seed=0)
    bert = BertLMHeadModel(BertConfig(vocab_size=96, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                      intermediate_size=64))
    save_tiny_model(tmp_path / "bert", "llama", layers=1, seed=0, model=bert)
    pair = {"target": "./bert"} if role == "target" else {"target": "./llama", "draft": "./bert"}
    config = parse_config({"presets": {"enc": {**pair, "device": "cpu"}}}, path=tmp_path / "models.yaml")
    with pytest.raises(LoadError, match=rf"Preset 'enc': the {role} .*bert is not a causal language model "
                                        r"\(BertLMHeadModel: .*decoder-only"):
        load_pair(config.get("enc"))


def test_the_causality_check_reads_a_vocabulary_of_fewer_than_three_tokens():
    """The check fed ids 0, 1 and 2 whatever the vocabulary: a causal model of two tokens (a coin's, a toy's) was
    refused with a traceback, IndexError 'index out of range in self', instead of loading."""
    from specui.loading import check_causal

    for vocab_size in (1, 2):
        check_causal(make_model("llama", vocab_size=vocab_size, layers=1), "a tiny model")  # loads: no exception


def test_a_folder_whose_tokenizer_is_a_vocab_txt_loads(tmp_path):
    """A model whose tokenizer is a word-piece vocab.txt named by config.json's tokenizer_class (as Chinese GPT-2s on
    the Hub are saved), which transformers reads, was refused as 'has no tokenizer': the check knew other files."""
    from specui.presets import parse_config

    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *"abcdefghijklmnopqrstuvwxyz", "你", "好"]
    model = make_model("gpt2", vocab_size=len(words), layers=1)
    model.config.tokenizer_class = "BertTokenizer"
    model.save_pretrained(tmp_path / "gpt2-chinese")
    (tmp_path / "gpt2-chinese" / "vocab.txt").write_text("\n".join(words) + "\n")
    config = parse_config({"presets": {"zh": {"target": "./gpt2-chinese", "device": "cpu"}}},
                          path=tmp_path / "models.yaml")
    pair = load_pair(config.get("zh"))
    ids = pair.tokenizer("你好 a b c", add_special_tokens=False)["input_ids"]
    assert type(pair.tokenizer).__name__ == "BertTokenizer" and ids == [31, 32, 5, 6, 7]
    plain = SpeculativeEngine(pair.target).generate(ids, max_new_tokens=6, speculative=False)
    assert pair.engine().generate(ids, max_new_tokens=6).token_ids == plain.token_ids


@pytest.mark.slow
def test_loads_in_two_threads_at_once_each_give_the_models_saved():
    """Two loads at once (two visitors' presets, a script's threads): transformers' from_pretrained untied the bundled
    target's output layer and initialised it anew ("lm_head.weight MISSING"), refused by the causality check or kept
    as a silently different model, and a lazy `from transformers import` raised ImportError. Loads take turns."""
    import threading

    preset = load_config(None).get("bundled")
    ids = torch.tensor([[5, 6, 7, 8]])
    reference = load_pair(preset).target
    with torch.no_grad():
        expected = reference(input_ids=ids).logits
    pairs, errors, said = [], [], []

    def load_three():
        for _ in range(3):
            try:
                pairs.append(load_pair(preset, progress=said.append))
            except Exception as e:
                errors.append(e)

    threads = [threading.Thread(target=load_three) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == [] and len(pairs) == 6
    for pair in pairs:
        target = pair.target
        assert target.lm_head.weight.data_ptr() == target.get_input_embeddings().weight.data_ptr()
        with torch.no_grad():
            assert torch.equal(target(input_ids=ids).logits, expected)
