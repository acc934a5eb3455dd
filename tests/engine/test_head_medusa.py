"""Medusa heads: greedy decoding with them is plain greedy decoding (transformers' own `generate`),
the sampled law is the target's (chi-square, a lying drafter caught), the state they draft from is the
target's final normed state of the token before cur, and they save, load and train."""

import pytest
import torch

import specui.heads
from specui import SpeculativeEngine
from specui.heads import common, medusa
from specui.sampling import Sampling
from tests.engine.head_helpers import PATHS, LyingDrafter, halved, hidden_states, path_of, perturb, sticky_target, toy_batch
from tests.engine.test_engine_greedy import hf_greedy
from tests.engine.test_engine_sampling import SETTINGS, VOCAB, exact_first_two, observed_first_two, p_value
from tests.helpers import chi_square_target, make_model, random_prompts

NEW_TOKENS = 20


@pytest.fixture(scope="module")
def sticky():
    target = sticky_target(seed=0)
    return target, perturb(medusa.build(target, num_heads=4), scale=0.01, seed=1)


@pytest.fixture(scope="module")
def small():
    """A 5-token target (the exactness tests' own) and heads over 4 of its ids, far from the target."""
    target = chi_square_target(VOCAB)
    heads = perturb(medusa.build(target, token_ids=torch.tensor([0, 1, 2, 4]), num_heads=2), scale=0.3, seed=2)
    return target, heads


@pytest.mark.parametrize("kind", ["sticky", "random"])
def test_greedy_equals_transformers(sticky, kind):
    if kind == "sticky":
        target, heads = sticky
    else:
        target = make_model("llama", layers=3, seed=3)
        heads = perturb(medusa.build(target, num_heads=3, num_blocks=2), scale=0.05, seed=4)
    engine = SpeculativeEngine(target, heads={"medusa": heads})
    paths = dict.fromkeys(PATHS, 0)
    for prompt in random_prompts(4, vocab_size=96, seed=7) + [[5]]:
        expected = hf_greedy(target, prompt, NEW_TOKENS)
        for k in (1, 2, 3, 5, 8):
            result = engine.generate(prompt, max_new_tokens=NEW_TOKENS, num_draft_tokens=k, drafter="medusa")
            assert result.token_ids == expected, (kind, prompt, k)
            for r in result.rounds:
                assert r.num_drafted <= min(k, heads.num_heads)
                if path_of(r):
                    paths[path_of(r)] += 1
    if kind == "sticky":
        assert all(paths.values()), paths  # every outcome of a round happened
    else:
        assert paths["all rejected"], paths


def test_one_token_prompt_drafts_from_round_two(sticky):
    target, heads = sticky
    result = SpeculativeEngine(target, heads={"medusa": heads}).generate([7], max_new_tokens=12, num_draft_tokens=3,
                                                                           drafter="medusa")
    assert result.rounds[0].num_drafted == 0 and result.rounds[1].num_drafted == 3
    assert result.token_ids == hf_greedy(target, [7], 12)


class Spy(medusa.MedusaDrafter):
    """Checks, after every verify, that the state kept is the target's final normed state of the last
    verified token (computed again by transformers over the whole sequence)."""

    def start(self, prompt, **kw):
        super().start(prompt, **kw)
        self.sequence, self.checked = list(prompt), 0
        if len(prompt) > 1:
            self._check(hidden_states(self.target, prompt)[-1][len(prompt) - 2])

    def propose(self, context, k):
        assert context[: len(self.sequence)] == self.sequence
        self.sequence = list(context)
        self.draft = super().propose(context, k)
        return self.draft

    def observe(self, num_accepted, *, features):
        assert features.shape == (num_accepted + 1, self.target.config.hidden_size)
        super().observe(num_accepted, features=features)
        verified = self.sequence + self.draft.tokens[:num_accepted].tolist()
        self._check(hidden_states(self.target, verified)[-1][len(verified) - 1])

    def _check(self, expected):
        torch.testing.assert_close(self.state, expected, atol=1e-4, rtol=1e-4)
        self.checked += 1


def test_the_state_is_the_target_final_state_before_cur(sticky):
    target, heads = sticky
    spy = Spy(heads)
    spy.target = target
    engine = SpeculativeEngine(target, heads={"medusa": heads})
    for settings in ({}, {"temperature": 1.0, "seed": 3}):
        result = engine.generate([3, 9, 4, 3, 9], max_new_tokens=16, num_draft_tokens=4, drafter=spy, **settings)
        assert spy.checked == 1 + len(result.rounds)
        assert len(result.token_ids) == 16
    assert spy.target_features == (target.config.num_hidden_layers,)


@pytest.mark.parametrize("name", list(SETTINGS))
def test_sampling_is_exact(small, name):
    target, heads = small
    engine = SpeculativeEngine(target, heads={"medusa": heads})
    first = engine.generate([1, 2], max_new_tokens=3, num_draft_tokens=2, drafter="medusa", seed=0, **SETTINGS[name])
    assert first.rounds[0].num_drafted == 2  # both heads draft in round 1
    counts = observed_first_two(engine, [1, 2], num_draft_tokens=2, drafter="medusa", **SETTINGS[name])
    assert p_value(counts, exact_first_two(target, [1, 2], Sampling(**SETTINGS[name]))) > 1e-3


def test_a_drafter_that_misreports_q_is_caught(small):
    target, heads = small
    engine = SpeculativeEngine(target)
    lying = LyingDrafter(heads.make_drafter(target))
    counts = observed_first_two(engine, [1, 2], num_draft_tokens=2, drafter=lying, temperature=1.0)
    assert p_value(counts, exact_first_two(target, [1, 2], Sampling(temperature=1.0))) < 1e-6


def test_q_is_zero_outside_the_head_ids(small):
    target, heads = small
    drafter = heads.make_drafter(target)
    drafter.start([1, 2], sampling=Sampling(temperature=1.0), seed=0, features=torch.randn(1, 32))
    draft = drafter.propose([1, 2], 5)
    assert draft.tokens.shape == (2,) and draft.probs.shape == (2, VOCAB)
    assert (draft.probs[:, 3] == 0).all() and torch.allclose(draft.probs.sum(-1), torch.ones(2))
    assert set(draft.tokens.tolist()) <= {0, 1, 2, 4}


def test_save_and_load_through_the_registry(small, tmp_path):
    target, heads = small
    heads = halved(heads)  # a head is saved in half precision: compare with the rounded one
    folder = common.save(heads, tmp_path / "medusa", facts={"note": "test"})
    loaded = specui.heads.load(folder, target)
    assert isinstance(loaded, medusa.MedusaHeads) and loaded.arguments == heads.arguments
    assert loaded.output.token_ids.tolist() == [0, 1, 2, 4]
    for key, value in heads.state_dict().items():
        assert torch.equal(loaded.state_dict()[key], value), key
    settings = dict(max_new_tokens=12, temperature=1.0, num_draft_tokens=2, drafter="medusa", seed=5)
    runs = [SpeculativeEngine(target, heads={"medusa": h}).generate([1, 2, 3], **settings) for h in (heads, loaded)]
    assert runs[0].token_ids == runs[1].token_ids and runs[0].kinds == runs[1].kinds
    other = make_model("llama", vocab_size=VOCAB, layers=3, hidden=32, seed=10)
    with pytest.raises(ValueError, match="trained for a target"):
        specui.heads.load(folder, other)


def reference_loss(heads, batch):
    """The definition, position by position: head i at t against the target's distribution at t + i."""
    logits = heads(batch["hidden"][heads.feature_layers[0]])
    mask, logp = batch["mask"], batch["target_logp"]
    losses = []
    for i in range(1, heads.num_heads + 1):
        terms = [-(logp[b, t + i].exp() * logits[b, t, i - 1].log_softmax(-1)).sum()
                 for b in range(mask.shape[0]) for t in range(mask.shape[1] - i) if mask[b, t] and mask[b, t + i]]
        losses.append(torch.stack(terms).mean())
    return torch.stack(losses).mean()


def test_training_loss_follows_its_definition_and_learns(sticky):
    target, _ = sticky
    target.requires_grad_(False)  # the trainer trains the head only
    heads = medusa.build(target, token_ids=torch.arange(0, 96, 2), num_heads=3)
    ids = torch.tensor(random_prompts(4, vocab_size=96, seed=9, min_len=12, max_len=12))
    mask = torch.ones_like(ids, dtype=torch.bool)
    mask[1, 8:] = False  # a shorter sequence, padded
    batch = toy_batch(target, ids, token_ids=heads.output.token_ids, mask=mask)
    torch.testing.assert_close(heads.training_loss(batch), reference_loss(heads, batch))
    optimizer = torch.optim.Adam(heads.parameters(), lr=3e-3)
    losses = []
    for _ in range(15):
        loss = heads.training_loss(batch)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert all(p.grad is not None for p in heads.parameters() if p.requires_grad)
    assert losses[-1] < losses[0] - 0.05, losses
    assert heads.feature_layers == (target.config.num_hidden_layers,)


def test_bad_arguments_are_refused(sticky):
    target, _ = sticky
    with pytest.raises(ValueError, match="num_heads"):
        medusa.build(target, num_heads=0)
    with pytest.raises(ValueError, match="trained for a target"):
        medusa.build(target, target_shape={"hidden_size": 8, "num_layers": 1, "vocab_size": 96})
