"""Token trees with the draft model: greedy output equals transformers' greedy `generate` (lean and
transformers forwards, several widths and budgets, static and dynamic), sampled output follows the
target's exact law (chi-square; deterministic top-w children, and i.i.d. sampled children with
duplicates), a broken tree rule is caught, every round's caches match a fresh prefill, and the
settings refuse what cannot draft trees."""

import pytest
import torch

from specui import SpeculativeEngine, arena
from specui.drafters.tree import DraftTree
from specui.kv import CachedLM
from specui.sampling import Sampling, logits_to_probs, sample
from specui.settings import DecodeSettings, SettingsError
from tests.engine.test_engine_sampling import exact_first_two, observed_first_two, p_value
from tests.helpers import five_token_pair, make_model, noisy_copy

SHAPES = [(2, 0), (3, 0), (2, 4), (4, 10)]  # (tree_width, tree_nodes): static, then dynamic


@pytest.fixture(scope="module", params=["llama", "gpt2"])
def pair(request):
    target = make_model(request.param, seed=3)
    return target, noisy_copy(target, noise=0.08, seed=1)


def outcome(round_):
    if not round_.tree_path:
        return "root rejected"
    return "full depth" if len(round_.tree_path) == round_.num_draft_tokens else "partial"


@pytest.mark.parametrize("shape", SHAPES)
def test_greedy_equals_generate(pair, shape):
    target, draft = pair
    engine = SpeculativeEngine(target, draft)
    assert (CachedLM(target).stack is not None) == (target.config.model_type == "llama")  # both forwards run
    seen = set()
    for prompt, k in (([5, 17, 3, 88, 41], 3), ([9], 4)):
        result = engine.generate(prompt, max_new_tokens=40, num_draft_tokens=k, tree_width=shape[0],
                                 tree_nodes=shape[1])
        expected = target.generate(torch.tensor([prompt]), max_new_tokens=40, do_sample=False)[0, len(prompt):]
        assert result.token_ids == expected.tolist()
        seen |= {outcome(r) for r in result.rounds if r.tree is not None}
        for r in result.rounds:
            if r.tree is not None:
                assert len(r.tree) <= (shape[1] or len(r.tree))
    assert seen == {"root rejected", "partial", "full depth"}


class Recording(CachedLM):
    made: list = []

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        Recording.made.append(self)


def keys_of(lm, length):
    if lm.stack is not None:
        return lm.cache.keys[..., :length].clone()
    return torch.cat([layer.keys[..., :length, :] for layer in lm.cache.layers])


@pytest.mark.parametrize("shape", [(3, 0), (2, 5)])
def test_caches_match_a_fresh_prefill_every_round(pair, shape, monkeypatch):
    """After each round the target's cache holds the context but cur, the draft's its valid prefix, with the
    keys a fresh forward computes: compaction keeps exactly the accepted path on every outcome."""
    import specui.drafters.model as model_module
    import specui.prompt_cache as target_module  # where the engine makes the target's cache

    target, draft = pair
    Recording.made = []
    monkeypatch.setattr(target_module, "CachedLM", Recording)
    monkeypatch.setattr(model_module, "CachedLM", Recording)
    engine = SpeculativeEngine(target, draft)
    seen = set()
    for seed in range(2, 8):  # runs until every outcome was checked (a full-depth round is the rarest)
        context = [5, 17, 3, 88, 41]
        Recording.made = []
        for round_ in engine.stream(list(context), max_new_tokens=60, num_draft_tokens=3, temperature=0.5, seed=seed,
                                    tree_width=shape[0], tree_nodes=shape[1]):
            context += round_.token_ids
            seen.add(outcome(round_))
            for lm, model in zip(Recording.made[:2], (target, draft)):
                fresh = CachedLM(model)
                with torch.inference_mode():
                    fresh.extend(context[: lm.length])
                assert lm.length <= len(context) - 1 + (model is draft)
                torch.testing.assert_close(keys_of(lm, lm.length), keys_of(fresh, lm.length), atol=1e-5, rtol=1e-5)
        if seen == {"root rejected", "partial", "full depth"}:
            break
    assert seen == {"root rejected", "partial", "full depth"}


def test_tree_settings_are_checked():
    with pytest.raises(SettingsError, match="cannot draft trees"):
        DecodeSettings(tree_width=2, drafter="prompt_lookup")
    with pytest.raises(SettingsError, match="cannot draft trees"):
        DecodeSettings(tree_width=2, drafter="early_exit")


@pytest.mark.parametrize("drafter, reason", [("prompt_lookup", "no distributions to rank children by"),
                                             ("model_lookup", "copied rounds give no distributions"),
                                             ("early_exit", "target's own cache of its first layers"),
                                             ("early_exit_lookup", "target's own cache of its first layers")])
def test_a_refused_tree_says_why_that_drafter_cannot(drafter, reason):
    """Early exit gives distributions: its refusal must not say it gives none (it said so for every drafter)."""
    with pytest.raises(SettingsError, match="cannot draft trees") as refused:
        DecodeSettings(tree_width=2, drafter=drafter)
    assert reason in str(refused.value)
    assert arena.skip_reason(drafter).startswith("cannot draft token trees (") and reason in arena.skip_reason(drafter)



def test_an_engines_default_drafter_refused_a_tree_says_why_too():
    """A run that names no drafter reaches the engine's own check, which has the drafter object and its label
    ("early exit"): the reason is that drafter's, not the generic one."""
    from specui.heads import early_exit

    target = make_model("llama", vocab_size=96, layers=3, seed=0)
    head = early_exit.build(target, exit_layer=1)
    engine = SpeculativeEngine(target, heads={"early_exit": head}, drafter="early_exit")
    with pytest.raises(ValueError, match="target's own cache of its first layers"):
        engine.generate([1, 2, 3], max_new_tokens=4, tree_width=2)
    with pytest.raises(ValueError, match="no distributions to rank children by"):  # prompt lookup, the default here
        SpeculativeEngine(target).generate([1, 2, 3], max_new_tokens=4, tree_width=2)
    with pytest.raises(SettingsError, match="tree methods"):
        DecodeSettings(tree_width=2, drafter=type("Chain", (), {"start": id, "propose": id, "observe": id})())
    with pytest.raises(SettingsError, match="needs a tree"):
        DecodeSettings(tree_nodes=4)
    with pytest.raises(SettingsError, match="static tree"):
        DecodeSettings(tree_width=4, num_draft_tokens=5)
    assert DecodeSettings(tree_width=4, num_draft_tokens=5, tree_nodes=32).tree_nodes == 32
    with pytest.raises(ValueError, match="cannot draft token trees"):  # the engine's default drafter: prompt lookup
        SpeculativeEngine(make_model("llama", seed=0)).generate([1, 2], tree_width=2)


# -- sampling exactness (a 5-token vocabulary, as tests/engine/test_engine_sampling.py) ----------------

VOCAB = 5
SETTINGS = {"t1": dict(temperature=1.0), "t0.7-topk3-topp0.8": dict(temperature=0.7, top_k=3, top_p=0.8)}


@pytest.fixture(scope="module")
def small():
    return five_token_pair()


class SampledTree:
    """A drafter whose tree has `width` children per node drawn i.i.d. from the draft model's q (with
    replacement: duplicates happen), to depth 2: SpecInfer's rule verifies it."""

    name = "sampled tree"

    def __init__(self, draft, width=3):
        self.draft, self.width = draft, width

    def start(self, prompt, *, sampling, seed):
        self.sampling, self.gen = sampling, torch.Generator().manual_seed(seed ^ 0x7EE)

    def propose(self, context, k):
        raise AssertionError("a tree drafter")

    def observe(self, num_accepted):
        pass

    def propose_tree(self, context, k, *, width, nodes):
        tokens, parents, probs = [], [], []
        if k == 0:
            return DraftTree(torch.empty(0, dtype=torch.long), [], None, sampled=False)
        with torch.no_grad():
            q_root = logits_to_probs(self.draft(torch.tensor([context])).logits[0, -1], self.sampling)
            for _ in range(self.width):
                tokens.append(int(sample(q_root, self.gen)))
                parents.append(-1)
                probs.append(q_root)
            for first in range(self.width if k > 1 else 0):
                q = logits_to_probs(self.draft(torch.tensor([context + [tokens[first]]])).logits[0, -1], self.sampling)
                for _ in range(2):
                    tokens.append(int(sample(q, self.gen)))
                    parents.append(first)
                    probs.append(q)
        return DraftTree(torch.tensor(tokens), parents, torch.stack(probs), sampled=True)

    def observe_tree(self, path, **_):
        pass


@pytest.mark.slow
@pytest.mark.parametrize("name", list(SETTINGS))
def test_static_tree_sampling_is_exact(small, name):
    target, draft = small
    prompt = [1, 2]
    counts = observed_first_two(SpeculativeEngine(target, draft), prompt, num_draft_tokens=2, tree_width=3,
                                **SETTINGS[name])
    assert p_value(counts, exact_first_two(target, prompt, Sampling(**SETTINGS[name]))) > 1e-3


@pytest.mark.slow
def test_dynamic_tree_sampling_is_exact(small):
    target, draft = small
    counts = observed_first_two(SpeculativeEngine(target, draft), [1, 2], num_draft_tokens=2, tree_width=2,
                                tree_nodes=3, temperature=1.5, top_p=0.9)
    assert p_value(counts, exact_first_two(target, [1, 2], Sampling(temperature=1.5, top_p=0.9))) > 1e-3


@pytest.mark.slow
def test_a_dynamic_tree_pruned_by_a_confidence_floor_samples_exactly(small):
    """draft_confidence prunes a dynamic tree to its likely paths (`grow(floor=)`): still exact."""
    target, draft = small
    engine = SpeculativeEngine(target, draft)
    settings = dict(num_draft_tokens=3, tree_width=3, tree_nodes=6, temperature=1.0, draft_confidence=0.2)
    sizes = {len(engine.generate([1, 2], max_new_tokens=3, seed=s, **settings).rounds[0].tree) for s in range(30)}
    assert min(sizes) < 6  # the floor pruned some trees
    counts = observed_first_two(engine, [1, 2], **settings)
    assert p_value(counts, exact_first_two(target, [1, 2], Sampling(temperature=1.0))) > 1e-3


@pytest.mark.slow
def test_sampled_children_with_duplicates_are_exact(small):
    target, draft = small
    drafter = SampledTree(draft)
    counts = observed_first_two(SpeculativeEngine(target, draft), [1, 2], num_draft_tokens=2, tree_width=3,
                                drafter=drafter, temperature=1.0)
    assert p_value(counts, exact_first_two(target, [1, 2], Sampling(temperature=1.0))) > 1e-3


@pytest.mark.slow
@pytest.mark.parametrize("sampled", [False, True])
def test_skipping_the_residual_update_is_caught(small, sampled, monkeypatch):
    from specui import tree_verify

    monkeypatch.setattr(tree_verify, "_residual", lambda p, q, rejected: p)  # siblings see the untouched p
    target, draft = small
    extra = dict(drafter=SampledTree(draft)) if sampled else {}
    counts = observed_first_two(SpeculativeEngine(target, draft), [1, 2], num_draft_tokens=2, tree_width=3,
                                temperature=1.0, **extra)
    assert p_value(counts, exact_first_two(target, [1, 2], Sampling(temperature=1.0))) < 1e-6
