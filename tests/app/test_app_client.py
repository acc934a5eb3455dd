"""The served app through `gradio_client`: the /generate endpoint, readable errors, concurrent visitors.

The app runs in this process (launch(prevent_thread_lock=True) on a free port) on the bundled pair;
max_new_tokens stays small so the module takes seconds on two CPU cores.
"""

from __future__ import annotations

import threading
from dataclasses import replace

import pytest

from tests.gradio_calls import chat_call
from tests.helpers import ROOT, served_app, ui_config

pytestmark = pytest.mark.slow  # serves the app on the bundled pair

gradio_client = pytest.importorskip("gradio_client")
INJECTION = "<img src=x onerror=alert(1)>"
PROMPT = "def main(argv):\n    "
KINDS = {"accepted", "resampled", "bonus"}


@pytest.fixture(scope="module")
def app():
    config = ui_config(with_broken=True)
    with served_app(config) as url:
        yield url, config


@pytest.fixture(scope="module")
def client(app):
    return gradio_client.Client(app[0], verbose=False)


def generate(client, prompt=PROMPT, **settings):
    settings.setdefault("max_new_tokens", 16)
    return client.predict(prompt, api_name="/generate", **settings)


def test_generate_is_a_named_endpoint(client):
    endpoints = client.view_api(print_info=False, return_format="dict")["named_endpoints"]
    names = [p["parameter_name"] for p in endpoints["/generate"]["parameters"]]
    assert names == ["prompt", "preset", "drafter", "num_draft_tokens", "adaptive", "temperature", "top_p", "top_k",
                     "max_new_tokens", "seed", "compare", "tree_width", "tree_nodes",
                     "system", "draft_confidence", "repetition_penalty"]  # docs/showcase.md (new ones last)
    reference = (ROOT / "docs" / "showcase.md").read_text()
    assert all(f"`{name}`" in reference for name in names)


def test_greedy_compare_reports_identical_output_and_a_speedup(client):
    out = generate(client, compare=True, max_new_tokens=24, seed=0)
    assert out["tokens"], out
    assert {t["kind"] for t in out["tokens"]} <= KINDS
    joined = "".join(t["text"] for t in out["tokens"])  # the text leaves out a closing end-of-text token
    assert joined == out["text"] if out["stop_reason"] == "length" else joined.startswith(out["text"])
    assert out["identical"] is True and out["plain_text"] == out["text"]
    assert out["speedup"] > 0
    stats = out["stats"]
    assert stats["tokens"] == len(out["tokens"]) and stats["tokens_per_s"] > 0
    assert 0.0 <= stats["acceptance_rate"] <= 1.0 and stats["mean_accepted_length"] >= 1.0
    for token in out["tokens"]:
        assert 0.0 <= token["p"] <= 1.0
        if token["kind"] == "accepted":
            assert token["accept"] == 1.0 and token["q"] is not None


def test_sampling_with_a_seed_is_reproducible_and_has_no_identity_claim(client):
    first = generate(client, temperature=0.8, top_p=0.95, top_k=50, seed=1234, compare=True)
    again = generate(client, temperature=0.8, top_p=0.95, top_k=50, seed=1234)
    assert first["text"] == again["text"] and first["seed"] == 1234
    assert first["identical"] is None  # sampled runs are two draws, not a check


def test_prompt_lookup_and_adaptive_k(client):
    out = generate(client, "a = 1\nb = 2\na = 1\nb = 2\na = 1\n", drafter="prompt lookup", adaptive=True,
                   num_draft_tokens=3)
    assert out["tokens"] and out["stats"]["rounds"] >= 1


def test_token_trees_through_the_api(client):
    out = generate(client, compare=True, max_new_tokens=24, num_draft_tokens=3, tree_width=2, seed=0)
    assert out["tokens"] and out["identical"] is True and out["plain_text"] == out["text"]
    dynamic = generate(client, max_new_tokens=16, num_draft_tokens=3, tree_width=3, tree_nodes=8)
    assert dynamic["tokens"] and dynamic["stats"]["rounds"] >= 1
    with pytest.raises(gradio_client.exceptions.AppError, match="tree"):
        generate(client, drafter="prompt lookup", tree_width=2)


def test_a_repetition_penalty_keeps_the_output_exact_and_changes_it(client):
    plain = generate(client, max_new_tokens=24, seed=0)
    out = generate(client, compare=True, max_new_tokens=24, seed=0, repetition_penalty=1.5)
    assert out["identical"] is True and out["plain_text"] == out["text"]
    assert out["text"] != plain["text"]  # the stdlib pair repeats itself: the penalty changes what it writes


def test_an_injected_prompt_is_just_text(client):
    out = generate(client, INJECTION, max_new_tokens=8)
    assert len(out["tokens"]) >= 1


@pytest.mark.parametrize("settings, words", [
    ({"num_draft_tokens": 0}, "num draft tokens"),
    ({"temperature": -1.0}, "temperature"),
    ({"max_new_tokens": 100_000}, "max new tokens"),
    ({"preset": "nope"}, "no preset named 'nope'"),
    ({"preset": "broken"}, "has no config.json"),
    ({"tree_width": 0}, "tree width"),
    ({"repetition_penalty": 0.0}, "repetition penalty must be above 0"),
    ({"repetition_penalty": 50.0}, "repetition penalty must be from"),
])
def test_errors_are_readable_and_the_app_keeps_serving(client, settings, words):
    with pytest.raises(gradio_client.exceptions.AppError, match=words) as caught:
        generate(client, **settings)
    assert "Traceback" not in str(caught.value)
    assert generate(client, max_new_tokens=4)["tokens"]


@pytest.mark.parametrize("settings, words", [
    ({"compare": "no"}, "compare must be true or false, got 'no'"),  # was read as true: a comparison ran
    ({"adaptive": 1}, "adaptive must be true or false, got 1"),
    ({"max_new_tokens": True}, "max_new_tokens must be a whole number, got True"),  # was read as 1
    ({"max_new_tokens": "8"}, "max_new_tokens must be a whole number, got '8'"),
    ({"temperature": "hot"}, "temperature must be a number, got 'hot'"),
    ({"system": 5}, "system must be a string, got 5"),
    ({"drafter": ["model"]}, "drafter must be a string"),
])
def test_wrong_json_types_are_refused_naming_the_parameter(client, settings, words):
    with pytest.raises(gradio_client.exceptions.AppError, match=words):
        generate(client, **settings)


def test_a_prompt_that_is_no_string_is_refused_in_words(client):
    """A number as the prompt reached the session's prompt.strip(): Gradio's opaque 'raised an exception'."""
    with pytest.raises(gradio_client.exceptions.AppError, match="prompt must be a string, got 5"):
        generate(client, 5)
    out = generate(client, max_new_tokens=8.0, num_draft_tokens=3.0)  # JSON's whole numbers as floats pass
    assert len(out["tokens"]) == 8


def test_the_theory_is_at_the_k_chosen_as_in_the_chat_tab(client):
    """stats.theory: Theorem 3.8 at the K asked for (as the chat tab's stats line and the Teach tab), even where the
    token budget cut every round short (K 7, 4 new tokens: 3 drafts at most a round); the run's own K with adaptive
    K; none for token trees."""
    out = generate(client, num_draft_tokens=7, max_new_tokens=4, drafter="model")
    theory, stats = out["stats"]["theory"], out["stats"]
    assert stats["mean_k"] <= 3 and theory["k"] == 7
    assert theory["speedup"] > 0 and 0 <= theory["alpha"] <= 1 and theory["c"] == stats["cost_ratio"]
    assert set(theory) == {"alpha", "k", "c", "tokens_per_round", "speedup", "best_k", "best_k_speedup"}
    adaptive = generate(client, num_draft_tokens=7, max_new_tokens=24, drafter="model", adaptive=True)["stats"]
    assert adaptive["theory"] is None or adaptive["theory"]["k"] <= max(2 * 7, 8)
    tree = generate(client, drafter="model", num_draft_tokens=2, tree_width=2, max_new_tokens=8)["stats"]
    assert tree["theory"] is None


def test_a_preset_named_without_a_drafter_or_k_drafts_as_that_preset_says():
    """drafter and num_draft_tokens left out follow the preset named, as the page's controls do: they were the default
    preset's, so a prompt-lookup preset named alone failed ('drafter='model' needs a draft model') and any other
    preset ran at the default preset's K."""
    from specui.presets import Preset

    config = ui_config()
    bundled = config.get(None)
    solo = Preset(name="solo", target=bundled.target, drafter="prompt_lookup", num_draft_tokens=3, threads=1,
                  description="the bundled target alone, drafted for by prompt lookup")
    with served_app(replace(config, presets={**config.presets, "solo": solo})) as url:
        client = gradio_client.Client(url, verbose=False)
        out = generate(client, "a = 1\nb = 2\na = 1\nb = 2\na = 1\n", preset="solo", max_new_tokens=12)
        assert out["tokens"] and out["stats"]["theory"]["k"] == 3 and out["stats"]["mean_k"] <= 3
        own = generate(client, max_new_tokens=12)  # the default preset, its drafter and K, as before
        assert own["stats"]["theory"]["k"] == bundled.k_for() and {t["kind"] for t in own["tokens"]} <= KINDS
        given = generate(client, preset="solo", drafter="prompt lookup", num_draft_tokens=5, max_new_tokens=12)
        assert given["stats"]["mean_k"] <= 5 and given["tokens"]


def test_an_empty_prompt_and_a_prompt_past_the_context_are_explained(client, app):
    with pytest.raises(gradio_client.exceptions.AppError, match="Type a prompt"):
        generate(client, "   ")
    preset = app[1].get(None)
    with pytest.raises(gradio_client.exceptions.AppError, match="context"):
        generate(client, "x = 1\n" * 4000, max_new_tokens=1024, preset=preset.name)


def test_concurrent_visitors_get_their_own_runs(app, client):
    expected = {seed: generate(client, temperature=0.9, seed=seed)["text"] for seed in (1, 2)}
    results, errors = {}, []

    def visit(seed):
        try:
            results[seed] = generate(gradio_client.Client(app[0], verbose=False), temperature=0.9, seed=seed)["text"]
        except Exception as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=visit, args=(seed,)) for seed in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not errors
    assert results == expected


def test_the_chat_event_streams_frames(client):
    job = chat_call(client, PROMPT, num_draft_tokens=4, max_new_tokens=16)  # the page's other defaults: greedy, no tree
    outputs = list(job)
    assert len(outputs) >= 2  # a loading frame, then tokens
    chat = outputs[-1][0]
    assert chat[-1]["role"] == "assistant" and "tok-" in str(chat[-1]["content"])


def test_a_stop_request_ends_the_run_between_rounds(app):
    """The session itself (no server): Stop is honoured at the next round, and the frame says so."""
    from specui.loading import PairCache
    from specui.ui.session import Settings, Showcase

    showcase, halt = Showcase(app[1], PairCache()), threading.Event()
    frames = []
    for frame, run in showcase.run(PROMPT, Settings(max_new_tokens=200, compare=True), stop=halt):
        frames.append(frame)
        if run.spec.rounds:
            halt.set()
    assert run.phase == "stopped" and frames[-1].done
    assert len(run.spec.rounds) == 1 and run.plain is None
    assert "stopped" in frames[-1].message and "Stopped" in frames[-1].stats


def test_the_zerogpu_call_pickles_its_arguments_and_results(app, monkeypatch):
    """On a ZeroGPU Space `@spaces.GPU` pickles what goes in and comes out: the decorated call takes
    a key, not the showcase (models, locks) or the stop event, and every frame it yields pickles."""
    import pickle

    from specui.loading import PairCache
    from specui.ui import session

    showcase, halt = session.Showcase(app[1], PairCache()), threading.Event()
    inner = showcase.calls.on_gpu

    def as_on_zerogpu(*args):
        pickle.dumps(args)
        for item in inner(*args):
            yield pickle.loads(pickle.dumps(item))

    monkeypatch.setattr(showcase.calls, "on_gpu", as_on_zerogpu)
    settings = session.Settings(max_new_tokens=12, compare=True)
    frames = [frame for frame, _ in session.decode(showcase, PROMPT, settings, history=[{"role": "user", "content": "x"}])]
    assert frames[-1].done and frames[-1].figures and "identical" in frames[-1].message
    for frame, run in session.decode(showcase, PROMPT, replace(settings, max_new_tokens=200), stop=halt):
        halt.set()  # the event itself stayed in this process, and still stops the run
    assert run.phase == "stopped" and not showcase.calls.live
