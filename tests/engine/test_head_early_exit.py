"""The early-exit head: greedy decoding with it is plain greedy decoding (transformers' own `generate`),
the target's cache stays in step on every outcome of a round (the verify forward reusing the draft's
early layers), the sampled law is the target's (chi-square, a lying drafter caught), and the head
saves, loads and trains; the same on the GPU's graph stack (run eagerly here). A target without either
stack is refused with a clear error."""

import pytest
import torch

import specui.heads
from specui import SpeculativeEngine
from specui.graphs import GraphStack
from specui.heads import common, early_exit
from specui.sampling import Sampling, logits_to_probs
from tests.engine.head_helpers import PATHS, LyingDrafter, halved, hidden_states, path_of, perturb, toy_batch
from tests.engine.test_engine_greedy import hf_greedy
from tests.engine.test_engine_sampling import SETTINGS, VOCAB, exact_first_two, observed_first_two, p_value
from tests.helpers import chi_square_target, make_model, random_prompts

NEW_TOKENS = 20


@pytest.fixture(scope="module")
def target():
    return make_model("llama", layers=3, seed=0)


@pytest.fixture(scope="module")
def graph_target():
    """The same target on `specui.graphs.GraphStack`, the GPU's forward (eager on a CPU, same shapes)."""
    model = make_model("llama", layers=3, seed=0)
    GraphStack.attach(model, graphs=False)
    return model


@pytest.fixture(scope="module")
def small():
    """A 5-token target (the exactness tests' own) and an exit after its first layer, over 4 of its ids."""
    target = chi_square_target(VOCAB)
    head = perturb(early_exit.build(target, token_ids=torch.tensor([0, 1, 3, 4]), exit_layer=1), scale=0.2, seed=2)
    return target, head


@pytest.mark.parametrize("stack", ["lean", "graphs"])
@pytest.mark.parametrize("exit_layer", [1, 2])
def test_greedy_equals_transformers(request, stack, exit_layer):
    target = request.getfixturevalue("target" if stack == "lean" else "graph_target")
    head = perturb(early_exit.build(target, exit_layer=exit_layer), scale=0.02, seed=exit_layer)
    engine = SpeculativeEngine(target, heads={"early_exit": head})
    paths = dict.fromkeys(PATHS, 0)
    for prompt in random_prompts(4, vocab_size=96, seed=7) + [[5]]:
        expected = hf_greedy(target, prompt, NEW_TOKENS)
        for k in (1, 2, 3, 5, 8):
            result = engine.generate(prompt, max_new_tokens=NEW_TOKENS, num_draft_tokens=k, drafter="early_exit")
            assert result.token_ids == expected, (exit_layer, prompt, k)
            for r in result.rounds:
                if path_of(r):
                    paths[path_of(r)] += 1
    assert all(paths.values()), paths  # every outcome of a round happened


class Spy(early_exit.EarlyExitDrafter):
    """Checks the target's cache around every round, the verify forward's reuse of the draft's early
    layers, and each draft's q against the head on transformers' own hidden states."""

    def start(self, prompt, *, target, **kw):
        super().start(prompt, target=target, **kw)
        self.paths, self.reused = dict.fromkeys(PATHS, 0), []
        forward = target.stack.forward

        def watched(ids, cache, **kw):  # how many tokens the verify forward starts at the exit layer
            self.reused.append(0 if kw.get("early") is None else kw["early"][1].shape[0])
            return forward(ids, cache, **kw)

        target.stack.forward = watched

    def propose(self, context, k):
        assert self.target.length == len(context) - 1 and self.target.early_length == self.target.length
        self.context, self.draft = list(context), super().propose(context, k)
        assert self.target.early_length == self.target.length + k  # cur and every draft token but the last
        if k:
            self._check_q()
        return self.draft

    def observe(self, num_accepted):
        super().observe(num_accepted)
        k = self.draft.tokens.shape[0]
        assert self.reused[-1] == k  # the verify forward began cur and x_1..x_{k-1} at layer E
        assert self.target.length == len(self.context) + num_accepted == self.target.early_length
        if k:
            self.paths[PATHS[0] if num_accepted == 0 else PATHS[2] if num_accepted == k else PATHS[1]] += 1

    def _check_q(self):
        fed = self.context + self.draft.tokens[:-1].tolist()
        states = hidden_states(self.target.model, fed)[self.head.exit_layer][len(self.context) - 1:]
        q = torch.zeros(states.shape[0], self.head.output.vocab_size)
        q[:, self.head.output.token_ids] = logits_to_probs(self.head(states), self.sampling)
        torch.testing.assert_close(self.draft.probs, q, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("settings", [{}, {"temperature": 1.0, "top_k": 20}])
def test_cache_stays_in_step_on_every_outcome(target, settings):
    head = perturb(early_exit.build(target, exit_layer=2), scale=0.02, seed=2)
    engine = SpeculativeEngine(target)
    paths = dict.fromkeys(PATHS, 0)
    for seed, prompt in enumerate(random_prompts(3, vocab_size=96, seed=11) + [[4]]):
        spy = Spy(head)
        result = engine.generate(prompt, max_new_tokens=16, num_draft_tokens=3, drafter=spy, seed=seed, **settings)
        plain = engine.generate(prompt, max_new_tokens=16, speculative=False, seed=seed, **settings)
        if not settings:
            assert result.token_ids == plain.token_ids
        paths = {p: paths[p] + spy.paths[p] for p in PATHS}
    assert all(paths.values()), paths


@pytest.mark.parametrize("stack", ["lean", "graphs"])
@pytest.mark.parametrize("name", list(SETTINGS))
def test_sampling_is_exact(small, name, stack):
    target, head = small
    if stack == "graphs":
        target = chi_square_target(VOCAB)
        GraphStack.attach(target, graphs=False)
    engine = SpeculativeEngine(target, heads={"early_exit": head})
    counts = observed_first_two(engine, [1, 2], num_draft_tokens=2, drafter="early_exit", **SETTINGS[name])
    assert p_value(counts, exact_first_two(target, [1, 2], Sampling(**SETTINGS[name]))) > 1e-3


def test_a_drafter_that_misreports_q_is_caught(small):
    target, head = small
    lying = LyingDrafter(head.make_drafter(target))
    counts = observed_first_two(SpeculativeEngine(target), [1, 2], num_draft_tokens=2, drafter=lying, temperature=1.0)
    assert p_value(counts, exact_first_two(target, [1, 2], Sampling(temperature=1.0))) < 1e-6


def test_a_target_without_the_lean_stack_is_refused():
    target = make_model("llama", layers=3, seed=0)
    target.set_attn_implementation("eager")  # the lean stack computes sdpa attention only
    engine = SpeculativeEngine(target, heads={"early_exit": early_exit.build(target, exit_layer=1)})
    with pytest.raises(ValueError, match="lean forward"):
        engine.generate([1, 2, 3], max_new_tokens=4, drafter="early_exit")


def test_save_and_load_through_the_registry(small, tmp_path):
    target, head = small
    head = halved(head)  # a head is saved in half precision: compare with the rounded one
    folder = common.save(head, tmp_path / "exit")
    loaded = specui.heads.load(folder, target)
    assert isinstance(loaded, early_exit.EarlyExitHead) and loaded.arguments == head.arguments
    assert loaded.exit_layer == 1 and loaded.output.token_ids.tolist() == [0, 1, 3, 4]
    for key, value in head.state_dict().items():
        assert torch.equal(loaded.state_dict()[key], value), key
    settings = dict(max_new_tokens=12, temperature=1.0, num_draft_tokens=2, drafter="early_exit", seed=5)
    runs = [SpeculativeEngine(target, heads={"early_exit": h}).generate([1, 2, 3], **settings) for h in (head, loaded)]
    assert runs[0].token_ids == runs[1].token_ids and runs[0].kinds == runs[1].kinds
    with pytest.raises(ValueError, match="trained for a target"):
        specui.heads.load(folder, make_model("llama", vocab_size=VOCAB, layers=3, hidden=32, seed=10))


def test_an_untrained_head_is_the_logit_lens(target):
    """Its norm weight starts at one and its block as the identity: the target's final norm and output
    rows (in float16, as every head holds them) on the state entering the exit layer."""
    head = early_exit.build(target, exit_layer=2)
    states = hidden_states(target, [3, 1, 4, 1, 5])[2]
    with torch.no_grad():
        lens = torch.nn.functional.linear(target.model.norm(states), target.lm_head.weight.half().float())
        torch.testing.assert_close(head(states), lens, atol=1e-5, rtol=1e-5)


def test_training_loss_follows_its_definition_and_learns(target):
    target.requires_grad_(False)  # the trainer trains the head only
    head = early_exit.build(target, token_ids=torch.arange(0, 96, 2), exit_layer=1)
    ids = torch.tensor(random_prompts(4, vocab_size=96, seed=9, min_len=12, max_len=12))
    mask = torch.ones_like(ids, dtype=torch.bool)
    mask[2, 5:] = False
    batch = toy_batch(target, ids, token_ids=head.output.token_ids, mask=mask)
    logits = head(batch["hidden"][1])
    expected = -(batch["target_logp"].exp() * logits.log_softmax(-1)).sum(-1)[mask].mean()
    torch.testing.assert_close(head.training_loss(batch), expected)
    optimizer = torch.optim.Adam(head.parameters(), lr=3e-3)
    losses = []
    for _ in range(15):
        loss = head.training_loss(batch)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert all(p.grad is not None for p in head.parameters())
    assert losses[-1] < losses[0] - 0.05, losses
    assert head.feature_layers == (1,)


@pytest.mark.parametrize("exit_layer", [0, 3])
def test_an_exit_layer_outside_the_target_is_refused(target, exit_layer):
    with pytest.raises(ValueError, match="exit_layer"):
        early_exit.build(target, exit_layer=exit_layer)
    with pytest.raises(ValueError, match="mlp_hidden"):
        early_exit.build(target, exit_layer=1, mlp_hidden=-4)


@pytest.fixture(scope="module")
def small_mlp():
    """`small`'s target with an exit that adds a gated MLP after its block (perturbed: not the identity)."""
    target = chi_square_target(VOCAB)
    head = early_exit.build(target, token_ids=torch.tensor([0, 1, 3, 4]), exit_layer=1, mlp_hidden=24)
    return target, perturb(head, scale=0.2, seed=3)


def test_an_mlp_head_drafts_plain_greedy_decoding(target):
    head = perturb(early_exit.build(target, exit_layer=1, mlp_hidden=40), scale=0.02, seed=4)
    engine = SpeculativeEngine(target, heads={"early_exit": head})
    for prompt in random_prompts(3, vocab_size=96, seed=8) + [[5]]:
        expected = hf_greedy(target, prompt, NEW_TOKENS)
        for k in (1, 3):
            assert engine.generate(prompt, max_new_tokens=NEW_TOKENS, num_draft_tokens=k,
                                   drafter="early_exit").token_ids == expected, (prompt, k)


@pytest.mark.parametrize("name", list(SETTINGS))
def test_an_mlp_head_samples_exactly_and_a_lie_is_caught(small_mlp, name):
    target, head = small_mlp
    engine = SpeculativeEngine(target, heads={"early_exit": head})
    counts = observed_first_two(engine, [1, 2], num_draft_tokens=2, drafter="early_exit", **SETTINGS[name])
    assert p_value(counts, exact_first_two(target, [1, 2], Sampling(**SETTINGS[name]))) > 1e-3
    if name == next(iter(SETTINGS)):
        lying = LyingDrafter(head.make_drafter(target))
        counts = observed_first_two(SpeculativeEngine(target), [1, 2], num_draft_tokens=2, drafter=lying,
                                    temperature=1.0)
        assert p_value(counts, exact_first_two(target, [1, 2], Sampling(temperature=1.0))) < 1e-6


def test_an_mlp_head_saves_loads_and_starts_as_the_identity(small_mlp, tmp_path):
    target, head = small_mlp
    head = halved(head)
    folder = common.save(head, tmp_path / "exit")
    loaded = specui.heads.load(folder, target)
    assert loaded.arguments["mlp_hidden"] == 24 and loaded.mlp is not None
    for key, value in head.state_dict().items():
        assert torch.equal(loaded.state_dict()[key], value), key
    fresh = early_exit.build(target, token_ids=torch.tensor([0, 1, 3, 4]), exit_layer=1, mlp_hidden=8)
    plain = early_exit.build(target, token_ids=torch.tensor([0, 1, 3, 4]), exit_layer=1)
    assert "mlp_hidden" not in plain.arguments  # heads saved before the MLP load as they were
    states = hidden_states(target, [1, 2, 3])[1]
    with torch.no_grad():
        torch.testing.assert_close(fresh(states), plain(states))
