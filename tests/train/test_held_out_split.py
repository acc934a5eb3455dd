"""The heads' trainers hold out whole prompts (`specui.train.head_data.held_out_split`): the answers to one prompt
(a greedy answer and its samples share most of their tokens) never sit on both sides of the split, so the held-out
figure a run reports is not learnt from a sibling. A split by answer (the trainers' until stop 87) fails the test."""

import torch

from specui.train.head_data import held_out_split


def _sequences(prompts: int, answers_each: int, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    out = []
    for p in range(prompts):
        prompt = torch.randint(0, 1000, (5 + p % 7,), generator=gen)
        for _ in range(answers_each):
            out.append((torch.cat([prompt, torch.randint(0, 1000, (20,), generator=gen)]), len(prompt)))
    return out


def by_answer(sequences, share, seed):  # the broken variant: answers split one by one
    order = torch.randperm(len(sequences), generator=torch.Generator().manual_seed(seed)).tolist()
    n = max(1, int(len(order) * share))
    return sorted(order[:n]), sorted(order[n:])


def _siblings_apart(split, sequences) -> bool:
    held, train = split
    prompts = lambda idx: {tuple(sequences[i][0][:sequences[i][1]].tolist()) for i in idx}  # noqa: E731
    return bool(prompts(held) & prompts(train))


def test_whole_prompts_are_held_out():
    sequences = _sequences(prompts=60, answers_each=4)
    held, train = held_out_split(sequences, 0.1, seed=3)
    assert sorted(held + train) == list(range(len(sequences))) and not set(held) & set(train)
    assert not _siblings_apart((held, train), sequences)
    assert 24 <= len(held) <= 24 + 3  # the share, rounded up to whole prompts
    assert held_out_split(sequences, 0.1, seed=3) == (held, train)  # seeded
    assert held_out_split(sequences, 0.1, seed=4) != (held, train)
    assert _siblings_apart(by_answer(sequences, 0.1, seed=3), sequences)  # what the test is for


def test_windows_without_a_prompt_are_each_their_own():
    sequences = [(torch.arange(i, i + 10), 0) for i in range(40)]
    held, train = held_out_split(sequences, 0.25, seed=0)
    assert len(held) == 10 and len(train) == 30
    assert len(held_out_split(sequences, 0.0, seed=0)[0]) == 1  # at least one, as before
