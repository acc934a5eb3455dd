"""`python -m specui` on text as people write it: flags a greedy run would ignore refused as the benchmark refuses
them, a rejection whose token is only whitespace marked where it happened, and replies in any script or emoji shown
and recorded byte for byte."""

from __future__ import annotations

import io

import pytest

from specui.events import Kind
from specui.terminal import parse_args
from specui.terminal_view import LINE_BREAK, RESET, Reply, Wrap, blank_marked, painted, stream_reply
from tests.app.test_ui_unicode import smollm2_tokenizer  # noqa: F401 (fixtures)
from tests.engine.test_terminal import bundled, refused  # noqa: F401

RED = "\x1b[31;4m"


def test_a_seed_with_greedy_decoding_is_refused_as_the_benchmark_refuses_it(capsys):
    said = refused(["--seed", "5", "x"], capsys)
    assert said.endswith("--seed with greedy decoding (--temperature 0, the default): a greedy run draws nothing; "
                         "give --temperature > 0 or leave it out"), said
    assert "--seed with greedy" in refused(["--temperature", "0", "--seed", "0", "x"], capsys)
    assert parse_args(["--temperature", "0.7", "--seed", "5", "x"]).seed == 5  # sampled: the seed draws the reply
    assert parse_args(["x"]).seed is None


@pytest.mark.parametrize("argv", [["--seed", "-3", "x"]])
def test_a_seed_out_of_range_is_still_said_first(argv, capsys):
    assert "--seed must be an integer from 0" in refused(argv, capsys)


def test_a_rejections_token_that_is_only_whitespace_is_marked_where_it_happened():
    """It was left unpainted, as the spaces around a word are: no colour shows on a blank, so the rejection was not
    seen at all. Its spaces are underlined and its line break shown as an arrow before the break."""
    assert painted(*blank_marked("  ", Kind.RESAMPLED), colour=True, safe=True) == f"{RED}  {RESET}"
    assert painted(*blank_marked("\n", Kind.RESAMPLED), colour=True, safe=True) == f"{RED}{LINE_BREAK}{RESET}\n"
    assert painted(*blank_marked("\n  ", Kind.RESAMPLED), colour=True, safe=True) == (
        f"{RED}{LINE_BREAK}{RESET}\n{RED}  {RESET}")
    assert blank_marked(" over ", Kind.RESAMPLED) == (" over ", Kind.RESAMPLED)  # a word: its spaces stay unmarked
    assert blank_marked("\n", Kind.ACCEPTED) == ("\n", Kind.ACCEPTED)  # only a rejection is marked
    wrap = Wrap(8)  # the arrow takes its column where the reply wraps; a rejection's blank is not merged into a word
    pieces = wrap.push("one", Kind.RESAMPLED) + wrap.push(*blank_marked(" ", Kind.RESAMPLED)) + wrap.flush()
    assert "".join(painted(t, k, colour=True, safe=False) for t, k in pieces) == f"{RED}one{RESET}{RED} {RESET}"


@pytest.mark.slow
@pytest.mark.parametrize("width", [None, 30])
def test_a_real_replys_blank_rejections_show_and_its_text_stays_the_models(bundled, width):  # noqa: F811
    tok = bundled.tokenizer
    ids = tok("class A:")["input_ids"]
    reply, out = Reply(), io.StringIO()
    stream_reply(bundled.stream(ids, max_new_tokens=24, into=reply.result), reply, tokenizer=tok, prompt_ids=ids,
                 out=out, colour=True, safe=True, width=width)
    blanks = [p for p, k in zip(reply.pieces, reply.result.kinds) if k == Kind.RESAMPLED and not p.strip()]
    assert blanks and "\n" in blanks[0], reply.pieces  # greedy: the bundled pair rejects its draft at this line break
    assert f"{RED}{LINE_BREAK}{RESET}\n" in out.getvalue()
    assert reply.text == tok.decode(reply.result.token_ids, skip_special_tokens=True)  # the text is the model's


def test_a_rejection_inside_a_characters_bytes_shows_on_the_character(smollm2_tokenizer):  # noqa: F811
    """SmolLM2 writes 🇯🇵 in six tokens, the first two of each flag's half no text alone: a rejection at one of them
    showed nothing, the character coming in the colour of the accepted token that completed it."""
    from tests.app.test_ui_render import make_round

    tok = smollm2_tokenizer
    ids = tok("🇯🇵 ok", add_special_tokens=False)["input_ids"]
    kinds = [Kind.RESAMPLED] + [Kind.ACCEPTED] * (len(ids) - 1)  # the first byte a rejection's, the rest accepted
    rounds = [make_round(drafted=[], num_accepted=0, token_ids=[t], kinds=[k]) for t, k in zip(ids, kinds)]
    reply, out = Reply(), io.StringIO()
    stream_reply(rounds, reply, tokenizer=tok, prompt_ids=[], out=out, colour=True, safe=True)
    assert reply.text == "🇯🇵 ok" and reply.pieces[0] == ""  # the text as written, the first token no text alone
    assert out.getvalue().startswith(f"{RED}🇯{RESET}\x1b[32m🇵{RESET}"), repr(out.getvalue())


@pytest.mark.slow
def test_a_long_prompt_is_said_to_be_read_on_stderr_and_a_short_one_is_not():
    """The reply's first token comes after the prompt's reading, tens of seconds for a pasted file on a CPU, with
    nothing on the screen: a prompt of READ_NOTE_TOKENS or more says so, on stderr (stdout keeps the reply alone)."""
    from tests.engine.test_terminal import run_cli

    long = "".join(f"def f{i}(x):\n    return x + {i}\n\n" for i in range(60))
    status, out, err = run_cli("--preset", "bundled", "--max-new-tokens", "4", long)
    assert status == 0, err
    [note] = [line for line in err.splitlines() if "Reading the prompt" in line]
    assert note.startswith("(Reading the prompt: ") and note.endswith(" tokens…)") and "Reading" not in out
    status, _, err = run_cli("--preset", "bundled", "--max-new-tokens", "4", "def main(argv):")
    assert status == 0 and "Reading the prompt" not in err
