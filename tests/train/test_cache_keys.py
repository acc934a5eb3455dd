"""The trainers' caches of what a target computes (`specui.train heads`' states.pt and continuations.pt, `specui.train
exit`'s states.pt) are read back only for the target that computed them: a user who trains heads for target X, then
for target Y with the same data and the same --states file (as the docs suggest for runs that share data), gets Y's
states, not X's. Two tiny random Llamas of one shape stand for X and Y."""

import torch

from specui.train.exit_head import exit_states
from specui.train.head_data import FeatureCache, continuation_sequences
from tests.helpers import make_config


def _target(seed: int):
    from transformers import LlamaForCausalLM

    torch.manual_seed(seed)
    return LlamaForCausalLM(make_config("llama", vocab_size=64, layers=2, hidden=32)).eval()


def _sequences() -> list[tuple[torch.Tensor, int]]:
    gen = torch.Generator().manual_seed(0)
    return [(torch.randint(0, 64, (12 + i,), generator=gen), 4) for i in range(3)]


def test_the_states_cache_of_one_target_is_not_read_for_another(tmp_path):
    x, y, sequences, path = _target(0), _target(1), _sequences(), tmp_path / "states.pt"
    FeatureCache(x, sequences, layers=(1,), path=path, log=lambda *_: None)
    read = FeatureCache(y, sequences, layers=(1,), path=path, log=lambda *_: None)
    own = FeatureCache(y, sequences, layers=(1,), log=lambda *_: None)  # y's, computed without a file
    assert torch.equal(read.states[0][1], own.states[0][1]) and torch.equal(read.lse[2], own.lse[2])
    again = []
    FeatureCache(y, sequences, layers=(1,), path=path, log=again.append)  # y's own file now: read back
    assert any("read from" in line for line in again)


def test_states_from_a_bfloat16_copy_are_not_read_for_a_float32_run(tmp_path):
    x, sequences, path = _target(0), _sequences(), tmp_path / "states.pt"
    FeatureCache(x, sequences, layers=(1,), path=path, log=lambda *_: None, dtype=torch.bfloat16)
    read = FeatureCache(x, sequences, layers=(1,), path=path, log=lambda *_: None)
    own = FeatureCache(x, sequences, layers=(1,), log=lambda *_: None)
    assert torch.equal(read.states[1][1], own.states[1][1])


def test_the_exit_states_and_the_continuations_of_one_target_are_not_read_for_another(tmp_path):
    x, y, sequences = _target(0), _target(1), _sequences()
    exit_states(x, sequences, layer=1, path=tmp_path / "exit.pt")
    read = exit_states(y, sequences, layer=1, path=tmp_path / "exit.pt")
    own = exit_states(y, sequences, layer=1, path=tmp_path / "own.pt")
    assert torch.equal(read["states"][0], own["states"][0])
    stream = torch.randint(0, 64, (200,), generator=torch.Generator().manual_seed(1))
    settings = dict(count=4, length=16, new_tokens=8, seed=0, log=lambda *_: None)
    continuation_sequences(x, stream, path=tmp_path / "continuations.pt", **settings)
    read = continuation_sequences(y, stream, path=tmp_path / "continuations.pt", **settings)
    own = continuation_sequences(y, stream, **settings)
    assert all(torch.equal(a, b) for (a, _), (b, _) in zip(read, own))


def test_the_key_of_a_target_is_the_same_whatever_the_number_of_threads():
    """The key summed each parameter in float64, whose rounding follows how torch splits the sum among its threads:
    SmolLM2's key under --threads 8 was not its key under torch's default, so a --states file shared between runs of
    one target with other --threads was computed again (hours of CPU for the chat answers). The sums are exact now;
    one value changed, or two swapped, still gives another key."""
    from transformers import LlamaForCausalLM

    from specui.train.head_data import target_key

    torch.manual_seed(0)
    x, before = LlamaForCausalLM(make_config("llama", vocab_size=50000, layers=1, hidden=512)).eval(), []
    threads = torch.get_num_threads()
    try:
        for n in (1, 2, 3, 4, 8, 16):
            torch.set_num_threads(n)
            before.append(target_key(x))
    finally:
        torch.set_num_threads(threads)
    assert len(set(before)) == 1
    with torch.no_grad():
        row = x.model.embed_tokens.weight
        row[[0, 1]] = row[[1, 0]]  # two rows swapped: the same values, other places
        swapped = target_key(x)
        row[0, 0] += 1e-3  # one value moved
        assert swapped != before[0] and target_key(x) not in (swapped, before[0])
