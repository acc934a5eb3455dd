"""The UI's pure pieces without a server: token HTML, escaping, incremental decoding, stats, settings."""

from __future__ import annotations

import html
from dataclasses import replace
from html.parser import HTMLParser

import pytest

from specui import metrics, runstats
from specui.events import GenerationResult, Round
from specui.text import TokenText
from specui.ui import render, stats
from specui.ui.request import Settings, SettingsError

INJECTION = "<img src=x onerror=alert(1)>"


class Spans(HTMLParser):
    """Collects every element's tag and attributes, and the text inside token spans."""

    def __init__(self):
        super().__init__()
        self.tags, self.tokens, self._in = [], [], None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.append((tag, attrs))
        if tag == "span" and "tok" in attrs.get("class", "").split():
            self._in = {"class": attrs["class"], "title": attrs.get("title"), "value": attrs.get("value"), "text": ""}
            self.tokens.append(self._in)

    def handle_endtag(self, tag):
        if tag == "span":
            self._in = None

    def handle_data(self, data):
        if self._in is not None:
            self._in["text"] += data


def parse(markup: str) -> Spans:
    parser = Spans()
    parser.convert_charrefs = True
    parser.feed(markup)
    return parser


def make_round(*, drafted, num_accepted, token_ids, kinds, index=0, draft_s=0.01, verify_s=0.02, elapsed_s=0.0):
    k = len(drafted)
    return Round(index=index, token_ids=token_ids, kinds=kinds, drafted=drafted, num_accepted=num_accepted,
                 target_probs=[0.5 + 0.01 * i for i in range(k)], draft_probs=[0.4 + 0.01 * i for i in range(k)],
                 accept_probs=[1.0 if i < num_accepted else 0.25 for i in range(k)], uniforms=[0.1] * k,
                 token_target_probs=[0.9] * len(token_ids),
                 token_draft_probs=[0.8] * num_accepted + [None] * (len(token_ids) - num_accepted),
                 residual_top=[], num_draft_tokens=k, draft_s=draft_s, verify_s=verify_s, elapsed_s=elapsed_s)


# -- escaping ---------------------------------------------------------------------------------------


def test_escape_text_never_leaves_markup_and_keeps_whitespace_on_one_line():
    out = render.escape_text(f'{INJECTION}\n\t  "quoted" & \'single\'')
    assert "<" not in out and ">" not in out and '"' not in out and "'" not in out
    assert "\n" not in out and "&#10;" in out and "&#9;" in out and "  " in out
    assert html.unescape(out) == f'{INJECTION}\n\t  "quoted" & \'single\''


def test_injection_token_and_prompt_render_as_text():
    view = render.TokenView(text=INJECTION, kind="accepted", p=0.5, q=0.25, accept=1.0, token_id=7)
    for markup in (render.render_tokens([view]), render.render_prompt(INJECTION), render.render_error(INJECTION),
                   render.render_reply([view], plain=[view], spec_title=INJECTION, plain_title=INJECTION,
                                       note=INJECTION),
                   # a streamed compare frame: the plain column's title stands in its place (render.NEXT_COLUMN)
                   render.render_reply([view], plain=[], spec_title=INJECTION, plain_title=INJECTION, streaming="spec"),
                   render.render_race([(INJECTION, [view], 1.0)])):
        parsed = parse(markup)
        assert all(tag != "img" for tag, _ in parsed.tags), markup
        assert "<img" not in markup
        assert INJECTION in html.unescape(markup)


def test_token_text_in_the_tooltip_is_escaped_too():
    view = render.TokenView(text='"><script>alert(1)</script>', kind="bonus", p=0.5, token_id=1)
    parsed = parse(render.token_span(view, shown="x"))  # the Teach tab's: its tooltip written out, as a title
    assert [tag for tag, _ in parsed.tags] == ["span"]
    assert "<script>" in parsed.tokens[0]["title"]  # as text inside the attribute
    short = parse(render.token_span(replace(view, text="é" + view.text)))  # a reply's: its repr in the value
    assert [tag for tag, _ in short.tags] == ["span"] and "<script>" in short.tokens[0]["value"]


def test_a_special_token_is_marked_as_one():
    """An end-of-turn token is one of the run's tokens (the target chose it; it may be an accepted draft): it shows,
    small, with a tooltip that says it is not text."""
    end_view = render.TokenView(text="<|im_end|>", kind="accepted", p=0.9, q=0.8, token_id=2, special=True)
    word_view = render.TokenView(text="Paris", kind="accepted", token_id=3)
    end, word = parse(render.token_span(end_view)), parse(render.token_span(word_view))
    assert "tok-special" in end.tokens[0]["class"] and "tok-special" not in word.tokens[0]["class"]  # tokens.js: a note
    assert "a special token" in render.tooltip(end_view) and "special" not in render.tooltip(word_view)


# -- token spans ------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["accepted", "resampled", "bonus", "plain", "rejected"])
def test_each_kind_is_a_span_with_its_class_and_a_tooltip_giving_p_q_and_acceptance(kind):
    view = render.TokenView(text=" x", kind=kind, p=0.123456, q=0.5 if kind != "plain" else None,
                            accept=0.25 if kind in ("accepted", "resampled", "rejected") else None, token_id=3)
    token = parse(render.render_tokens([view])).tokens[0]
    assert f"tok-{kind}" in token["class"].split()
    assert token["text"] == " x"
    assert token["value"] == render.tip_value(view) and token["title"] is None  # tokens.js writes the title out
    title = render.tooltip(view)
    assert "p (target) = 0.1235" in title
    assert ("q (draft) = 0.5000" if kind != "plain" else "q (draft) = –") in title
    assert "accept prob" in title and ("0.250" in title if view.accept is not None else "= –" in title)


def test_whitespace_and_code_indentation_survive_exactly():
    pieces = ["def", " f", "():", "\n", "    ", "return", "\n\n", "\t", "x"]
    views = [render.TokenView(text=t, kind="plain") for t in pieces]
    markup = render.render_tokens(views)
    assert "\n" not in markup  # one line: a markdown renderer cannot split it
    assert "pre-wrap" in markup and "monospace" in markup
    assert "".join(t["text"] for t in parse(markup).tokens) == "".join(pieces)


def test_caret_only_while_streaming():
    views = [render.TokenView(text="a", kind="bonus")]
    assert "specui-caret" in render.render_reply(views, streaming="spec")
    assert "specui-caret" not in render.render_reply(views)


def test_a_token_block_is_one_named_keyboard_stop_not_one_per_token():
    views = [render.TokenView(text=t, kind="accepted") for t in ("a", "b", "c")]
    markup = render.render_reply(views)
    assert markup.count('tabindex="0"') == 1 and 'role="group"' in markup  # the block, for tokens.js's arrow keys
    assert f'title="{render.attribute(render.TOKENS_LABEL)}"' in markup  # its name (no aria-label: sanitised)
    assert "arrow keys" in render.legend_html()


def test_style_css_writes_one_dark_selector_a_rule():
    """Gradio scopes `.dark .x, .dark .y` as if only .x were dark: the rest never matched on a dark page."""
    from pathlib import Path

    css = (Path(render.__file__).parent / "style.css").read_text()
    rules = [r.split("{")[0] for r in css.replace("}", "}\n").split("\n") if "{" in r]
    assert not [r for r in rules if ".dark" in r and "," in r]


def test_compare_reply_has_two_columns_and_the_verdict():
    spec = [render.TokenView(text="a", kind="accepted")]
    plain = [render.TokenView(text="a", kind="plain")]
    verdict = render.render_verdict(identical=True, speedup=1.8)
    markup = render.render_reply(spec, plain=plain, spec_title="speculative", plain_title="plain", verdict=verdict)
    assert markup.count('class="specui-col"') == 2
    assert "identical output" in markup and "1.80×" in markup
    assert "outputs differ at token 3" in render.render_verdict(identical=False, speedup=None, first_difference=3)
    assert "identical" not in render.render_verdict(identical=None, speedup=2.0)


def test_legend_names_every_kind():
    legend = render.legend_html()
    for kind in ("accepted", "resampled", "bonus", "plain", "rejected"):
        assert f"tok-{kind}" in legend


def test_race_replays_emitted_tokens_at_their_times_and_scales_the_bars():
    spec = [render.TokenView(text="a", kind="accepted", time_s=0.5),
            render.TokenView(text="b", kind="rejected", time_s=0.5),
            render.TokenView(text="c", kind="bonus", time_s=0.5)]
    plain = [render.TokenView(text="a", kind="plain", time_s=0.7), render.TokenView(text="c", kind="plain", time_s=1.0)]
    markup = render.render_race([("speculative", spec, 0.5), ("plain", plain, 1.0)], nonce=3)
    assert 'data-nonce="3"' in markup
    assert "tok-rejected" not in markup
    assert markup.count("animation-delay:0.500s") == 2 and "animation-delay:1.000s" in markup
    assert "width:50.0%" in markup and "width:100.0%" in markup


# -- rounds to views ----------------------------------------------------------------------------------


def test_round_views_put_rejected_drafts_before_the_resampled_token():
    rnd = make_round(drafted=[10, 11, 12, 13], num_accepted=1, token_ids=[10, 20], kinds=["accepted", "resampled"])
    pushed = []
    views = render.round_views(rnd, lambda t: pushed.append(t) or f"<{t}>", lambda t: f"?{t}", time_s=1.5)
    assert [v.kind for v in views] == ["accepted", "rejected", "rejected", "rejected", "resampled"]
    assert [v.text for v in views] == ["<10>", "?11", "?12", "?13", "<20>"]
    assert pushed == [10, 20]  # rejected drafts never enter the decoded text
    accepted, first_rejected, *_, resampled = views
    assert (accepted.p, accepted.q, accepted.accept) == (0.9, 0.8, 1.0)
    assert (first_rejected.p, first_rejected.q, first_rejected.accept) == pytest.approx((0.51, 0.41, 0.25))
    assert "rejected here" in first_rejected.note and "discarded" in views[2].note
    assert resampled.accept == 0.25 and resampled.q is None  # the rejected draft's acceptance probability
    assert all(v.time_s == 1.5 for v in views)


def test_round_views_of_a_fully_accepted_round_end_with_the_bonus():
    rnd = make_round(drafted=[1, 2], num_accepted=2, token_ids=[1, 2, 3], kinds=["accepted", "accepted", "bonus"])
    views = render.round_views(rnd, str, str, time_s=0.0)
    assert [v.kind for v in views] == ["accepted", "accepted", "bonus"]
    assert views[-1].accept is None and views[-1].q is None
    assert not any(v.note for v in views)


def test_a_round_that_drafted_nothing_says_its_bonus_is_the_targets_own():
    """Prompt lookup without a match (or the budget's last token) drafts nothing: the round's token is a bonus in the
    rule's terms (every one of zero drafts accepted), and its tooltip says nothing was drafted."""
    rnd = make_round(drafted=[], num_accepted=0, token_ids=[7], kinds=["bonus"])
    (view,) = render.round_views(rnd, str, str, time_s=0.0)
    assert view.kind == "bonus" and "nothing was drafted this round" in render.tooltip(view)


def test_round_views_say_which_tokens_were_copied_from_the_context():
    """The model + lookup drafter's copied rounds: their drafts' tooltips say so, the target's own token does not."""
    from dataclasses import replace

    rnd = replace(make_round(drafted=[10, 11, 12], num_accepted=1, token_ids=[10, 20], kinds=["accepted", "resampled"]),
                  copied=True)
    views = render.round_views(rnd, str, str, time_s=0.0)
    assert [("copied from the context" in v.note) for v in views] == [True, True, True, False]
    assert "copied from the context" in render.tooltip(views[0]) and "rejected here" in views[1].note


# -- incremental decoding ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def byte_tokenizer():
    """A tiny byte-level BPE (GPT-2 style), trained in-process: tokens can split UTF-8 characters."""
    from tokenizers import ByteLevelBPETokenizer
    from transformers import PreTrainedTokenizerFast

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(["def main():\n    return 1\n", "class A:\n    pass\n"] * 20, vocab_size=300,
                            min_frequency=2, special_tokens=["<|endoftext|>"])
    return PreTrainedTokenizerFast(tokenizer_object=bpe._tokenizer, eos_token="<|endoftext|>")


def test_token_text_pieces_join_to_the_decoded_text_even_across_split_characters(byte_tokenizer):
    prompt = byte_tokenizer("x =", add_special_tokens=False)["input_ids"]
    text = ' "héllo → 世界 🎉"\n\tdef main():\n        return 1'
    ids = byte_tokenizer(text, add_special_tokens=False)["input_ids"]
    decoder = TokenText(byte_tokenizer, prompt)
    pieces = [decoder.push(i) for i in ids]
    pieces[-1] += decoder.flush()
    assert "".join(pieces) == text
    assert "\ufffd" not in "".join(pieces)
    assert "" in pieces  # some tokens held part of a character, shown by the token that completes it


def test_token_text_peek_does_not_advance(byte_tokenizer):
    ids = byte_tokenizer(" return", add_special_tokens=False)["input_ids"]
    decoder = TokenText(byte_tokenizer, byte_tokenizer("def", add_special_tokens=False)["input_ids"])
    assert decoder.peek(ids[0]) == decoder.push(ids[0])


# -- stats --------------------------------------------------------------------------------------------


def _result(rounds, prefill=0.1):
    result = GenerationResult(prefill_s=prefill)
    for r in rounds:
        result.add(r)
    return result


def test_engine_time_and_stats():
    rounds = [make_round(drafted=[1, 2], num_accepted=2, token_ids=[1, 2, 3], kinds=["accepted", "accepted", "bonus"],
                         index=0, draft_s=0.02, verify_s=0.08),
              make_round(drafted=[4, 5], num_accepted=0, token_ids=[6], kinds=["resampled"], index=1,
                         draft_s=0.02, verify_s=0.08)]
    result = _result(rounds)
    assert runstats.round_times(result) == pytest.approx([0.2, 0.3])
    s = runstats.run_stats(result)
    assert (s.tokens, s.rounds) == (4, 2)
    assert s.tokens_per_s == pytest.approx(4 / 0.3)
    assert s.acceptance_rate == pytest.approx(0.5) and s.mean_accepted_length == pytest.approx(2.0)
    assert s.cost_ratio == pytest.approx(0.01 / 0.08)
    value, alpha, k = s.theory.speedup, s.theory.alpha, s.theory.k
    assert k == 2 and metrics.expected_tokens_per_round(alpha, 2) == pytest.approx(2.0, abs=1e-6)
    assert value == pytest.approx(metrics.theoretical_speedup(alpha, 2, 0.01 / 0.08))
    plain = runstats.run_stats(_result([make_round(drafted=[], num_accepted=0, token_ids=[1], kinds=["plain"], index=i,
                                                draft_s=0.0, verify_s=0.1) for i in range(4)]))
    assert runstats.speedup(s, plain) == pytest.approx((4 / 0.3) / (4 / 0.5))
    line = stats.stats_html(s, plain, status=INJECTION)
    for words in ("acceptance rate", "50.0%", "mean accepted length", "tokens/s", "speedup", "theoretical speedup"):
        assert words in line
    assert "<img" not in line


def test_the_stats_line_gives_the_k_chosen_where_the_token_budget_cut_every_round_short():
    """K 64 with 64 new tokens: no round may ask for more than 63 drafts (one token is the round's own), and every
    round asks for fewer than the last; the stats line's theory is at K=64, the K chosen (adaptive K: the run's)."""
    from specui.ui.runs import Run

    kinds = ["accepted", "accepted", "resampled"]
    rounds = [make_round(drafted=list(range(k)), num_accepted=2, token_ids=[1, 2, 3], kinds=kinds, index=i)
              for i, k in enumerate((63, 60, 57))]
    run = Run(Settings(num_draft_tokens=64, max_new_tokens=64), spec=_result(rounds))
    spec, _ = run.stats()
    assert spec.theory.k == 64 and "K=64," in stats.stats_html(spec)
    assert spec.theory.speedup == pytest.approx(metrics.theory(rounds, c=spec.cost_ratio, k=64).speedup)
    adaptive, _ = Run(Settings(num_draft_tokens=64, max_new_tokens=64, adaptive=True), spec=_result(rounds)).stats()
    assert adaptive.theory.k == 63


def test_first_difference():
    assert runstats.first_difference([1, 2, 3], [1, 2, 3]) is None
    assert runstats.first_difference([1, 2, 3], [1, 5, 3]) == 1
    assert runstats.first_difference([1, 2], [1, 2, 3]) == 2


# -- settings -----------------------------------------------------------------------------------------


def test_settings_from_widgets():
    s = Settings.from_ui(preset="bundled", drafter="prompt lookup", num_draft_tokens=5.0, adaptive=True,
                         temperature=0.7, top_p=0.9, top_k=None, max_new_tokens=32.0, seed=None, compare=True)
    assert (s.drafter, s.num_draft_tokens, s.top_k, s.max_new_tokens, s.seed, s.greedy) == \
        ("prompt_lookup", 5, 0, 32, None, False)
    assert s.system == "" and Settings.from_ui(num_draft_tokens=4, max_new_tokens=16,
                                               system="  Answer in French.\n").system == "Answer in French."


@pytest.mark.parametrize("bad, words", [
    ({"num_draft_tokens": 0}, "num draft tokens"), ({"temperature": -1}, "temperature"), ({"top_p": 0}, "top-p"),
    ({"max_new_tokens": 2.5}, "max new tokens"), ({"drafter": "oracle"}, "drafter"), ({"seed": "abc"}, "seed"),
    ({"system": "x" * 4001}, "system prompt is 4001 characters"),
])
def test_bad_settings_say_which_and_why(bad, words):
    values = {"num_draft_tokens": 4, "max_new_tokens": 16, **bad}
    with pytest.raises(SettingsError, match=words):
        Settings.from_ui(**values)


# -- prompts --------------------------------------------------------------------------------------------


def test_instruct_presets_get_the_chat_template_and_base_presets_continue_the_prompt(byte_tokenizer):
    from types import SimpleNamespace

    from specui.presets import load_config
    from specui.ui.session import Showcase

    byte_tokenizer.chat_template = "{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}[assistant] "
    showcase = Showcase(config=load_config(), cache=None)  # the pairs below name presets it does not hold
    history = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    instruct = SimpleNamespace(preset=SimpleNamespace(chat_template=True, name="p"), tokenizer=byte_tokenizer)
    ids = showcase.encode(instruct, "def f():", history)
    assert byte_tokenizer.decode(ids) == "[user] hi\n[assistant] hello\n[user] def f():\n[assistant] "
    wrote = byte_tokenizer("hallo", add_special_tokens=False)["input_ids"]  # the tokens the model wrote
    history[1] |= {"token_ids": wrote, "ids_of": "p"}
    ids = showcase.encode(instruct, "def f():", history)
    assert byte_tokenizer.decode(ids) == "[user] hi\n[assistant] hallo\n[user] def f():\n[assistant] "
    base = SimpleNamespace(preset=SimpleNamespace(chat_template=False, name="b"), tokenizer=byte_tokenizer)
    assert byte_tokenizer.decode(showcase.encode(base, "def f():", history)) == "def f():"


def test_a_greedy_divergence_is_explained_and_escaped():
    from types import SimpleNamespace

    from specui.ui import render
    from specui.ui.chat_view import _divergence_note

    def run_of(ids, probs):
        return SimpleNamespace(token_ids=ids, rounds=[SimpleNamespace(token_target_probs=probs)])

    run = SimpleNamespace(spec=run_of([5, 7, 9], [0.9, 0.41, 0.5]), plain=run_of([5, 8, 2], [0.9, 0.40, 0.6]))
    note = _divergence_note(run)
    assert "token 1" in note and "near-tie" in note and "not a near-tie" not in note
    far = SimpleNamespace(spec=run_of([5, 7], [0.9, 0.9]), plain=run_of([5, 8], [0.9, 0.05]))
    assert "not a near-tie" in _divergence_note(far)
    html_out = render.render_verdict(identical=False, speedup=1.5, first_difference=1, explanation=note + " <b>")
    assert "outputs differ at token 1: token 1" in html_out and "&lt;b&gt;" in html_out and "<b>" not in html_out
