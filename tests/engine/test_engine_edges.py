"""Engine edge cases: cache paths, EOS, budgets, context limits, provenance invariants, streams."""

import threading

import pytest
import torch

from specui import SpeculativeEngine
from specui.drafters import Draft
from specui.engine import ContextLengthError
from specui.kv import CachedLM
from tests.helpers import make_model, random_prompts

PROMPT = [4, 8, 15, 16, 23, 42]


class ScriptedDrafter:
    """Proposes the known plain continuation, optionally corrupted from a position on in each block."""

    name = "scripted"

    def __init__(self, prompt_len, future, *, corrupt_from=None, vocab=96):
        self.prompt_len, self.future, self.corrupt_from, self.vocab = prompt_len, future, corrupt_from, vocab

    def start(self, prompt, *, sampling, seed):
        pass

    def propose(self, context, k):
        done = len(context) - self.prompt_len
        block = self.future[done:done + k]
        if self.corrupt_from is not None:
            block = [t if i < self.corrupt_from else (t + 1) % self.vocab for i, t in enumerate(block)]
        return Draft(torch.tensor(block, dtype=torch.long), None)

    def observe(self, num_accepted):
        pass


@pytest.fixture(scope="module")
def engine(llama_pair):
    return SpeculativeEngine(*llama_pair)


@pytest.fixture(scope="module")
def plain(engine):
    return engine.generate(PROMPT, max_new_tokens=40, speculative=False).token_ids


@pytest.mark.parametrize("corrupt_from, path", [(None, "all accepted"), (0, "all rejected"), (2, "partly accepted")])
@pytest.mark.parametrize("k", [1, 3, 8])
def test_each_cache_path_keeps_greedy_exact(engine, plain, corrupt_from, path, k):
    drafter = ScriptedDrafter(len(PROMPT), plain, corrupt_from=corrupt_from)
    result = engine.generate(PROMPT, max_new_tokens=40, num_draft_tokens=k, drafter=drafter)
    assert result.token_ids == plain
    full = [r for r in result.rounds if r.num_drafted == k]
    if path == "all accepted":
        assert all(r.num_accepted == k and r.kinds[-1] == "bonus" for r in full)
    elif path == "all rejected":
        assert all(r.num_accepted == 0 and r.kinds == ["resampled"] for r in full)
    else:
        assert all(r.num_accepted == min(2, k) for r in full)


def test_eos_inside_a_block_ends_generation_there(llama_pair, plain):
    eos = plain[9]
    first = plain.index(eos)
    engine = SpeculativeEngine(*llama_pair, eos_token_id=eos)
    result = engine.generate(PROMPT, max_new_tokens=40, num_draft_tokens=8,
                             drafter=ScriptedDrafter(len(PROMPT), plain))
    assert result.token_ids == plain[:first + 1] and result.stop_reason == "eos"
    assert any(eos in r.drafted[:-1] for r in result.rounds)  # the EOS really sat inside a block
    assert engine.generate(PROMPT, max_new_tokens=40, speculative=False).token_ids == plain[:first + 1]
    ignored = engine.generate(PROMPT, max_new_tokens=40, num_draft_tokens=8, ignore_eos=True)
    assert ignored.token_ids == plain and ignored.stop_reason == "length"


def test_eos_from_generation_config(llama_pair, plain):
    target, draft = llama_pair
    target.generation_config.eos_token_id = [plain[5], 95]
    try:
        result = SpeculativeEngine(target, draft).generate(PROMPT, max_new_tokens=40)
    finally:
        target.generation_config.eos_token_id = None
    assert result.token_ids[-1] == plain[5] and len(result.token_ids) <= 6


@pytest.mark.parametrize("max_new_tokens", [1, 2, 3, 7, 9, 17])
def test_max_new_tokens_is_never_exceeded(engine, plain, max_new_tokens):
    oracle = ScriptedDrafter(len(PROMPT), plain)
    for drafter in (oracle, "model", "prompt_lookup"):
        result = engine.generate(PROMPT, max_new_tokens=max_new_tokens, num_draft_tokens=8, drafter=drafter)
        assert result.token_ids == plain[:max_new_tokens] and result.stop_reason == "length"
    sampled = engine.generate(PROMPT, max_new_tokens=max_new_tokens, num_draft_tokens=8, temperature=1.0, seed=1)
    assert len(sampled.token_ids) == max_new_tokens


def test_context_limit_is_a_clear_error():
    target = make_model("llama", layers=2, max_positions=32)
    draft = make_model("llama", layers=1, max_positions=20, seed=3)
    engine = SpeculativeEngine(target, draft)
    assert len(engine.generate(list(range(30)), max_new_tokens=2, speculative=False).token_ids) == 2
    with pytest.raises(ContextLengthError, match="target model's context of 32"):
        engine.generate(list(range(30)), max_new_tokens=3, speculative=False)
    with pytest.raises(ContextLengthError, match="draft model's context of 20"):
        engine.generate(list(range(18)), max_new_tokens=4)
    assert len(engine.generate(list(range(18)), max_new_tokens=4, drafter="prompt_lookup").token_ids) == 4


@pytest.mark.parametrize("kwargs, message", [
    (dict(input_ids=[]), "empty"),
    (dict(input_ids=[1, 96]), "vocabulary"),
    (dict(input_ids=[1, -1]), "vocabulary"),
    (dict(input_ids=[1, 2.0]), "integer"),
    (dict(num_draft_tokens=0), "num_draft_tokens"),
    (dict(max_new_tokens=0), "max_new_tokens"),
    (dict(temperature=-0.5), "temperature"),
    (dict(top_p=0), "top_p"),
    (dict(drafter="ngram"), "unknown drafter"),
])
def test_bad_arguments_are_explained_before_any_work(engine, kwargs, message):
    kwargs = {"input_ids": [1, 2], **kwargs}
    with pytest.raises(ValueError, match=message):
        engine.stream(**kwargs)  # raised at the call, not at the first next()


def test_model_drafter_needs_a_draft_model(llama_pair):
    with pytest.raises(ValueError, match="needs a draft model"):
        SpeculativeEngine(llama_pair[0]).generate([1, 2], drafter="model")


@pytest.mark.parametrize("temperature", [0.0, 0.9])
def test_provenance_invariants(engine, temperature):
    for i, prompt in enumerate(random_prompts(6, vocab_size=96, seed=3)):
        result = engine.generate(prompt, max_new_tokens=30, num_draft_tokens=1 + i, temperature=temperature,
                                 top_k=20 if temperature else 0, seed=i, drafter="model" if i % 2 else "prompt_lookup")
        assert len(result.token_ids) == len(result.kinds) == 30
        assert result.token_ids == [t for r in result.rounds for t in r.token_ids]
        for r in result.rounds:
            n, k = r.num_accepted, r.num_drafted
            assert r.kinds == ["accepted"] * n + [r.kinds[-1]]  # at most one non-accepted token, always last
            assert r.kinds[-1] == ("bonus" if n == k else "resampled")  # a bonus only after every draft passed
            assert r.token_ids[:n] == r.drafted[:n]
            assert len(r.target_probs) == len(r.draft_probs) == k
            # sampled, the rule reads rows up to the first rejection: only those drafts have p and min(1, p/q)
            judged = k if temperature == 0 else min(n + 1, k)
            assert len(r.accept_probs) == judged
            assert None not in r.target_probs[:judged]
            assert all(p is None for p in r.target_probs[judged:]) or temperature == 0
            assert len(r.token_target_probs) == len(r.token_draft_probs) == len(r.token_ids)
            assert all(0.0 <= a <= 1.0 for a in r.accept_probs)
            assert len(r.uniforms) == (0 if temperature == 0 else k)
            if temperature:  # the recorded draws really decided the verdict
                assert all(u < a for u, a in zip(r.uniforms[:n], r.accept_probs[:n]))
                if n < k:
                    assert not r.uniforms[n] < r.accept_probs[n] or r.accept_probs[n] == 0
                    assert r.residual_top and abs(sum(p for _, p in r.residual_top)) <= 1.0 + 1e-5
            assert r.draft_s >= 0 and r.verify_s > 0
        assert [r.index for r in result.rounds] == list(range(len(result.rounds)))
        elapsed = [r.elapsed_s for r in result.rounds]
        assert elapsed == sorted(elapsed) and result.total_s == elapsed[-1] > result.prefill_s


def test_plain_decoding_reports_plain_tokens(engine):
    result = engine.generate(PROMPT, max_new_tokens=5, speculative=False, temperature=0.8, seed=2)
    assert result.kinds == ["plain"] * 5 and all(not r.drafted for r in result.rounds)
    assert result.mean_accepted_length == 1.0 and result.acceptance_rate is None


def test_stream_closed_half_way_leaves_the_engine_reusable(engine):
    settings = dict(max_new_tokens=30, num_draft_tokens=4, temperature=0.9, seed=11)
    reference = engine.generate(PROMPT, **settings)
    stream = engine.stream(PROMPT, **settings)
    first = [next(stream), next(stream)]
    stream.close()
    assert [t for r in first for t in r.token_ids] == reference.token_ids[:sum(len(r.token_ids) for r in first)]
    again = engine.generate(PROMPT, **settings)
    assert again.token_ids == reference.token_ids and again.kinds == reference.kinds


def test_stream_consumed_from_other_threads(engine, plain):
    """Servers such as Gradio advance a generator from worker threads; each step must stand alone."""
    stream = engine.stream(PROMPT, max_new_tokens=40, num_draft_tokens=3)
    tokens = []
    while True:
        box = []
        worker = threading.Thread(target=lambda: box.append(next(stream, None)))
        worker.start()
        worker.join()
        if box[0] is None:
            break
        tokens.extend(box[0].token_ids)
    assert tokens == plain
    assert not torch.is_inference_mode_enabled()


def test_cache_trim_by_absolute_length(llama_pair):
    target, _ = llama_pair
    seq = [3, 1, 4, 1, 5, 9, 2, 6]
    with torch.no_grad():
        full = target(torch.tensor([seq])).logits[0]
    lm = CachedLM(target)
    with torch.inference_mode():
        lm.extend(seq[:5])
        lm.extend([7, 7, 7])  # rejected later
        lm.trim(5)
        assert lm.length == 5 == lm.cache.get_seq_length()
        lm.trim(5)  # trimming to the current length is a no-op, never an emptying
        assert lm.cache.get_seq_length() == 5
        logits = lm.extend(seq[5:])
    assert torch.allclose(logits, full[5:], atol=1e-4)
    with pytest.raises(ValueError):
        lm.trim(9)


@pytest.mark.parametrize("how", [{"speculative": False}, {"num_draft_tokens": 3}, {"num_draft_tokens": 3, "tree_width": 2}])
def test_each_round_records_its_target_forward_within_its_verify(engine, how):
    """`Round.forward_s`: the seconds of the target's forward itself, part of `verify_s` (the benchmark's budget
    splits a verify into the forward, as slow as it ran in the loop, and the decision's bookkeeping)."""
    result = engine.generate(PROMPT, max_new_tokens=12, ignore_eos=True, seed=0, **how)
    assert result.rounds and all(0.0 < r.forward_s <= r.verify_s for r in result.rounds)
