"""A researcher's own drafter, plugged in as docs/drafters.md ("Your own drafter") says: its usual mistakes are said
in one line before or as the run goes wrong, and `specui.check_drafter` tells an honest drafter from one whose q is not
the law it draws from."""

import pytest
import torch

import specui
from specui import Draft, SpeculativeEngine
from specui.settings import SettingsError
from tests.helpers import BUNDLED_TARGET, chi_square_target, make_model

PROMPT = [1, 2, 3, 4]


class Repeat:
    """Proposes the last token k times, built the way a notebook would: `torch.tensor([...] * k)`."""

    name = "repeat"

    def start(self, prompt, *, sampling, seed):
        pass

    def propose(self, context, k):
        return Draft(torch.tensor([context[-1]] * k), None)  # k = 0 gives a float tensor: torch.tensor([])

    def observe(self, num_accepted):
        pass


class Fixed:
    """Draws every token from one fixed q and reports `reported` as its q: q itself when honest."""

    name = "fixed"

    def __init__(self, q, reported=None):
        self.q = torch.tensor(q)
        self.reported = self.q if reported is None else torch.tensor(reported)

    def start(self, prompt, *, sampling, seed):
        self.generator = torch.Generator().manual_seed(seed)

    def propose(self, context, k):
        if not k:
            return Draft.empty()
        return Draft(torch.multinomial(self.q, k, replacement=True, generator=self.generator),
                     self.reported.expand(k, -1))

    def observe(self, num_accepted):
        pass


@pytest.fixture(scope="module")
def engine():
    return SpeculativeEngine(make_model("llama", vocab_size=96, layers=2, seed=0), None)


def test_a_drafter_that_builds_its_tokens_with_torch_tensor_runs_to_the_end(engine):
    """At a run's last token the engine asks for k = 0 tokens, and torch.tensor([]) is float32: it was refused as
    '(0,) torch.float32 tokens; a Draft holds a 1-D integer tensor'."""
    plain = engine.generate(PROMPT, max_new_tokens=12, speculative=False).token_ids
    assert engine.generate(PROMPT, max_new_tokens=12, drafter=Repeat()).token_ids == plain


def test_a_drafter_that_edits_the_context_it_reads_leaves_the_run_exact(engine):
    """The context a custom drafter is given is its own copy: appending to it broke the run's cache ('cannot trim a
    cache of 40 tokens to 41')."""
    class Appends(Repeat):
        def propose(self, context, k):
            context.append(5)
            return Draft(torch.tensor([context[-2]] * k, dtype=torch.long), None)

    plain = engine.generate(PROMPT, max_new_tokens=20, speculative=False).token_ids
    assert engine.generate(PROMPT, max_new_tokens=20, drafter=Appends()).token_ids == plain


def test_q_given_as_a_list_is_refused_in_one_line(engine):
    class Listed(Repeat):
        def propose(self, context, k):
            return Draft(torch.tensor([context[-1]] * k, dtype=torch.long), [[1 / 96] * 96] * k)

    with pytest.raises(ValueError, match=r"^drafter 'repeat' gave q as a list; a Draft's probs is a \[n, V\] float "
                                         r"tensor \(or None: deterministic drafts\)$"):
        engine.generate(PROMPT, max_new_tokens=8, drafter=Listed(), temperature=1.0, seed=0)


@pytest.mark.parametrize("method, define, said", [
    ("start", lambda self, prompt: None, r"start\(prompt\) cannot be called as start\(prompt, \*, sampling, seed\)"),
    ("propose", lambda self, context: None, r"propose\(context\) cannot be called as propose\(context, k\)"),
    ("observe", lambda self: None, r"observe\(\) cannot be called as observe\(num_accepted\)"),
    ("start", lambda self, prompt, *, sampling, seed, features: None,
     r"start\(prompt, \*, sampling, seed, features\) cannot be called as start\(prompt, \*, sampling, seed\)"),
])
def test_a_method_that_takes_other_arguments_is_refused_before_the_run(engine, method, define, said):
    """Said before any work, naming the method and how the engine calls it, where a TypeError came from inside the
    engine's round."""
    drafter = type("Mine", (Repeat,), {method: define})()
    with pytest.raises(SettingsError, match=rf"^drafter 'repeat''s {said}; a drafter's methods are start\(prompt, "
                                            r"\*, sampling, seed\), propose\(context, k\), observe\(num_accepted\)"):
        engine.generate(PROMPT, max_new_tokens=8, drafter=drafter)


def test_check_drafter_passes_an_honest_drafter_and_catches_one_whose_q_is_not_its_law():
    engine = SpeculativeEngine(chi_square_target(), None)
    q = [0.5, 0.2, 0.1, 0.1, 0.1]
    honest = specui.check_drafter(engine, Fixed(q), [1, 2, 3], runs=400, greedy_tokens=8)
    assert honest.passed and honest.greedy_identical and honest.cells > 5, str(honest)
    assert str(honest).startswith("drafter 'fixed' passed: 400 sampled runs, each token against the target's law "
                                  "after the tokens before it, chi-square p = ")
    lying = specui.check_drafter(engine, Fixed(q, [0.2] * 5), [1, 2, 3], runs=400, greedy_tokens=8)
    assert not lying.passed and lying.p_value < 1e-6 and lying.greedy_identical, str(lying)
    assert str(lying).startswith("drafter 'fixed' FAILED")


class Stuck(Fixed):
    """Honest for its first two tokens; from the third on it proposes token 1 every time, still reporting q."""

    def propose(self, context, k):
        draft = super().propose(context, k)
        tokens = draft.tokens.clone()
        tokens[2:] = 1
        return Draft(tokens, draft.probs)


def test_check_drafter_catches_a_drafter_off_only_from_its_third_token():
    """The first two tokens of a run never read a round's third draft: judged on them alone, as check_drafter was,
    this drafter passed at K = 4 (p = 0.51, the honest drafter's very p-value); each token given the ones before it
    reads them all."""
    engine = SpeculativeEngine(chi_square_target(), None)
    stuck = specui.check_drafter(engine, Stuck([0.5, 0.2, 0.1, 0.1, 0.1]), [1, 2, 3], runs=300, greedy_tokens=8)
    assert not stuck.passed and stuck.p_value < 1e-6 and stuck.greedy_identical, str(stuck)


def test_check_drafter_refuses_what_it_cannot_test(engine):
    with pytest.raises(ValueError, match=r"^temperature must be above 0"):
        specui.check_drafter(engine, Repeat(), PROMPT, temperature=0)
    with pytest.raises(ValueError, match=r"^runs must be an integer of at least 50"):
        specui.check_drafter(engine, Repeat(), PROMPT, runs=10)


@pytest.mark.slow
@pytest.mark.skipif(not BUNDLED_TARGET.exists(), reason="the bundled pair is not in assets/")
def test_the_documented_bigram_drafter_runs_as_written():
    """docs/drafters.md's "Your own drafter" example, as a notebook runs it: it decodes and passes the check."""
    from tests.engine.test_library_docs import python_blocks, run

    block = python_blocks("docs/drafters.md")[-1]
    assert "class Bigram" in block
    printed = run(block, {"__name__": "__notebook__"})
    assert "drafter 'bigram' passed: 300 sampled runs, each token against the target's law" in printed, printed


def test_specuis_own_drafters_read_the_runs_context_itself(engine, monkeypatch):
    """Prompt lookup indexes the context as it grows, so that a proposal costs O(k): the copy of the whole context
    that a drafter of one's own reads each round (O(L)) was made for it too."""
    from specui.drafters import PromptLookupDrafter

    seen, propose = [], PromptLookupDrafter.propose
    monkeypatch.setattr(PromptLookupDrafter, "propose", lambda self, context, k: seen.append(context) or
                        propose(self, context, k))
    plain = engine.generate(PROMPT * 4, max_new_tokens=12, speculative=False).token_ids
    assert engine.generate(PROMPT * 4, max_new_tokens=12, drafter="prompt_lookup").token_ids == plain
    assert len(seen) > 1 and all(context is seen[0] for context in seen)
