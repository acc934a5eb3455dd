"""A conversation's prompt ids (`specui.prompt_cache.chat_ids`): the chat template's, with each answer as the
tokens the model wrote, where the history carries them for this tokenizer; the text otherwise."""

from __future__ import annotations

import pytest

from specui.prompt_cache import chat_ids
from tests.helpers import ROOT

CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    folder = ROOT / "assets" / "specui-target"
    if not (folder / "tokenizer.json").exists():
        pytest.skip("the bundled pair is not built")
    tok = AutoTokenizer.from_pretrained(folder)
    tok.chat_template = CHATML
    return tok


def canonical(tok, messages):
    text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return list(tok(text, add_special_tokens=False)["input_ids"])


def test_the_answers_are_the_tokens_the_model_wrote(tokenizer):
    text = "def f(x):\n\n    return x"
    wrote = list(tokenizer(text, add_special_tokens=False)["input_ids"])
    wrote = wrote[:2] + [wrote[2]] * 3 + wrote[3:]  # not what tokenizing its text gives
    history = [{"role": "user", "content": "hi"},
               {"role": "assistant", "content": text, "token_ids": wrote, "ids_of": "p"}]
    messages = [*history, {"role": "user", "content": "more"}]
    ids = chat_ids(tokenizer, messages, ids_of="p")
    head = list(tokenizer(tokenizer.apply_chat_template(history[:1], tokenize=False) + "<|im_start|>assistant\n",
                          add_special_tokens=False)["input_ids"])
    assert ids[: len(head)] == head and ids[len(head): len(head) + len(wrote)] == wrote
    assert tokenizer.decode(ids[len(head) + len(wrote):]).startswith("<|im_end|>")
    assert ids != canonical(tokenizer, messages)
    # ids of another preset's tokenizer, or none: the text, tokenized
    assert chat_ids(tokenizer, messages, ids_of="other") == canonical(tokenizer, messages)
    assert chat_ids(tokenizer, messages) == canonical(tokenizer, messages)


def test_a_template_that_changes_the_text_falls_back_to_the_text(tokenizer):
    tokenizer = tokenizer.__class__.from_pretrained(tokenizer.name_or_path)
    tokenizer.chat_template = CHATML.replace("m['content']", "m['content'] | upper")
    messages = [{"role": "user", "content": "hi"},
                {"role": "assistant", "content": "yes", "token_ids": [5, 6, 7], "ids_of": "p"},
                {"role": "user", "content": "more"}]
    assert chat_ids(tokenizer, messages, ids_of="p") == canonical(tokenizer, messages)
