"""A conversation's prompt ids (`specui.prompt_cache.chat_ids`): the chat template's, with each answer as the
tokens the model wrote, where the history carries them for this tokenizer; the text otherwise. The history a chat
preset reads (`chat_history`) leaves out the exchanges a base model continued."""

from __future__ import annotations

import pytest

from specui.prompt_cache import chat_history, chat_ids
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


def test_a_conversation_longer_than_the_context_leaves_out_its_oldest_exchanges_with_room_to_spare():
    """`leave_out_oldest`: whole exchanges (a user message and the answers after it) leave from the start, as many as
    leave a quarter of the context free besides the new tokens; every message when the newest alone does not fit."""
    from specui.prompt_cache import leave_out_oldest

    def conversation(sizes):
        return [{"role": "user" if i % 2 == 0 else "assistant", "content": "", "size": size}
                for i, size in enumerate(sizes)]

    def ids_of(kept):  # 10 ids for the system message and the new message, then each message's size
        return [0] * (10 + sum(m["size"] for m in kept))

    history = conversation([30, 20, 10, 5, 15, 10])  # 100 ids with the rest
    assert leave_out_oldest(history, ids_of, limit=150, new_tokens=10) == (ids_of(history), 0)  # 100 <= 150 - 37 - 10
    assert leave_out_oldest(history, ids_of, limit=120, new_tokens=10) == (ids_of(history[2:]), 2)  # room for 80
    ids, n = leave_out_oldest(history, ids_of, limit=60, new_tokens=10)  # room for 35: only the newest exchange
    assert n == 4 and len(ids) == 35
    ids, n = leave_out_oldest(history, ids_of, limit=40, new_tokens=10)  # room for 20: the new message alone
    assert n == 6 and len(ids) == 10
    ids, n = leave_out_oldest(history, ids_of, limit=16, new_tokens=4)  # not even that: the engine will say so
    assert n == 6 and len(ids) == 10
    answers = [{"role": "user", "size": 5}, {"role": "assistant", "size": 20}, {"role": "assistant", "size": 20},
               {"role": "user", "size": 5}, {"role": "assistant", "size": 5}]
    assert leave_out_oldest(answers, ids_of, limit=60, new_tokens=0)[1] == 3  # an exchange goes with all its answers


def test_a_chat_reads_no_exchange_that_a_base_model_continued():
    def said(role, text, preset=None):
        return {"role": role, "content": text, **({"ids_of": preset} if preset else {})}

    history = [said("user", "hi"), said("assistant", "hello", "chat"), said("user", "def f():"),
               said("assistant", "return 1", "base"), said("user", "and you?"), said("assistant", "fine", "gone")]
    kept = chat_history(history, lambda preset: preset == "base")  # "gone": a preset no longer known is kept
    assert [m["content"] for m in kept] == ["hi", "hello", "and you?", "fine"]
    assert chat_history(history, lambda preset: False) == history and chat_history([], bool) == []
    # an answer without the user message before it (a conversation cut at its oldest end) goes alone
    assert chat_history(history[3:], lambda preset: preset == "base") == history[4:]
