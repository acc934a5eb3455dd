"""`python -m specui.train heads --hard-labels` on the bundled target: the heads learn the target's greedy
tokens (each greedy answer's next token over their ids), sampled answers and corpus windows left out;
`--bf16` computes the target's states from a bfloat16 copy (the caller's target untouched)."""

import json

import pytest
import torch
import torch.nn.functional as F

from specui.heads.common import soft_loss, targets
from specui.loading import load_pair
from specui.presets import load_config
from specui.train.head_data import FeatureCache, answer_sequences
from specui.train.heads import main
from tests.helpers import BUNDLED_TARGET

pytestmark = pytest.mark.skipif(not BUNDLED_TARGET.exists(), reason="the bundled pair is not built")


def write_answers(folder, *, greedy: int, sampled: int, seed: int = 0):
    """Answers as `python -m specui.train.chat --write-answers` writes them: greedy in answers-*.pt,
    sampled in sampled-*.pt."""
    gen = torch.Generator().manual_seed(seed)
    folder.mkdir()
    for name, count in (("answers", greedy), ("sampled", sampled)):
        if count:
            torch.save([{"ids": torch.randint(0, 500, (30 + 3 * i,), generator=gen), "prompt_len": 8}
                        for i in range(count)], folder / f"{name}-00000.pt")
    return folder


def test_labels_are_each_next_tokens_draft_row(tmp_path):
    folder = write_answers(tmp_path / "a", greedy=3, sampled=2)
    sequences, _ = answer_sequences(str(folder), max_len=64, greedy_only=True)
    assert len(sequences) == 3 and len(answer_sequences(str(folder), max_len=64)[0]) == 5
    target = load_pair(load_config().get("bundled")).target.eval()
    cache = FeatureCache(target, sequences, layers=(2,), log=lambda *_: None)
    token_ids = torch.arange(0, 500, 2)  # the even ids only: odd next tokens lie outside the heads' ids
    rows = target.get_output_embeddings().weight.detach()[token_ids]
    batch = cache.batch([0, 1, 2], token_ids=token_ids, rows=rows, device="cpu", hard=True)
    labels = targets(batch)
    assert "target_logp" not in batch and labels.dtype == torch.long
    for row, (seq, first) in enumerate(sequences):
        n = len(seq)
        for t in range(labels.shape[1]):
            nxt = int(seq[t + 1]) if t + 1 < n else None
            expected = nxt // 2 if t >= first - 1 and nxt is not None and nxt % 2 == 0 else -100
            assert int(labels[row, t]) == expected, (row, t)
    soft = cache.batch([0, 1, 2], token_ids=token_ids, rows=rows, device="cpu")
    assert targets(soft) is soft["target_logp"] and torch.equal(soft["hidden"][2], batch["hidden"][2])


def test_hard_loss_is_the_cross_entropy_to_the_counted_labels():
    logits = torch.randn(6, 10, requires_grad=True)
    labels = torch.tensor([3, -100, 0, 9, -100, 2])
    counted = labels >= 0
    assert torch.allclose(soft_loss(logits, labels), F.cross_entropy(logits[counted], labels[counted]))
    none = soft_loss(logits, torch.full((6,), -100))
    none.backward()  # a batch with nothing to learn still steps
    assert float(none.detach()) == 0.0 and logits.grad is not None


def test_bf16_states_come_from_a_copy_and_stay_close():
    target = load_pair(load_config().get("bundled")).target.eval()
    before = {k: v.clone() for k, v in target.state_dict().items()}
    sequences = [(torch.randint(0, 500, (40,), generator=torch.Generator().manual_seed(1)), 0)]
    exact = FeatureCache(target, sequences, layers=(2, 8), log=lambda *_: None)
    half = FeatureCache(target, sequences, layers=(2, 8), log=lambda *_: None, dtype=torch.bfloat16)
    assert all(torch.equal(v, target.state_dict()[k]) for k, v in before.items()) and target.dtype == torch.float32
    for layer in (2, 8):
        a, b = exact.states[0][layer].float(), half.states[0][layer].float()
        assert not torch.equal(a, b) and float((a - b).norm() / a.norm()) < 0.05


def test_heads_train_on_greedy_answers_only(tmp_path, capsys):
    answers = write_answers(tmp_path / "a", greedy=6, sampled=4)
    out = tmp_path / "heads"
    common = ["--preset", "bundled", "--seq", "48", "--batch", "3", "--threads", "1", "--exit-layer", "8",
              "--medusa-heads", "2", "--vocab", "300", "--states", "none"]
    main([*common, "--out", str(out), "--answers", str(answers), "--hard-labels", "--bf16", "--steps", "3"])
    assert "6 sequences" in capsys.readouterr().out  # the 4 sampled answers left out
    for name in ("eagle", "medusa", "early_exit"):
        meta = json.loads((out / name / "specui_head.json").read_text())
        assert "greedy tokens" in meta["labels"] and meta["steps"] == 3

    engine_config = tmp_path / "models.yaml"
    bundled = load_config().get("bundled")
    engine_config.write_text(f"default: b\npresets:\n  b:\n    target: {bundled.target}\n    draft: {bundled.draft}\n"
                             f"    dtype: float32\n    heads:\n      eagle: {out / 'eagle'}\n"
                             f"      medusa: {out / 'medusa'}\n")
    pair = load_pair(load_config(engine_config).get("b"))
    engine, prompt = pair.engine(), pair.tokenizer("import os\n")["input_ids"]
    plain = engine.generate(prompt, max_new_tokens=24, speculative=False).token_ids
    for name in ("eagle", "medusa"):
        assert engine.generate(prompt, max_new_tokens=24, num_draft_tokens=3, drafter=name).token_ids == plain

    only_sampled = write_answers(tmp_path / "s", greedy=0, sampled=3)
    with pytest.raises(SystemExit, match="sampled ones only"):
        main([*common, "--out", str(tmp_path / "x"), "--answers", str(only_sampled), "--hard-labels"])
    with pytest.raises(SystemExit):
        main([*common, "--out", str(tmp_path / "y"), "--windows", "8", "--hard-labels"])
    assert "--windows are text the target did not write" in capsys.readouterr().err


def test_a_head_learns_its_labels():
    """A Medusa head trained on one batch's hard labels comes to predict them (a repeating answer: the token two
    ahead follows from the current one, which the target's state holds)."""
    from specui.heads import medusa

    target = load_pair(load_config().get("bundled")).target.eval()
    seq = torch.tensor([11, 12, 13] + [40, 97, 230, 310, 402, 451] * 7)
    cache = FeatureCache(target, [(seq, 4)], layers=(), log=lambda *_: None)
    token_ids = torch.arange(500)
    rows = target.get_output_embeddings().weight.detach()[token_ids]
    batch = cache.batch([0], token_ids=token_ids, rows=rows, device="cpu", hard=True)
    torch.manual_seed(0)
    head = medusa.build(target, token_ids=token_ids, num_heads=1).float().train()
    opt = torch.optim.Adam([p for p in head.parameters() if p.requires_grad], lr=3e-2)

    def agreement():
        with torch.no_grad():
            logits = head(batch["hidden"][cache.final])[0, :-2, 0]  # head 1 at t: the token t + 2
        labels = batch["labels"][0, 1:-1]
        counted = labels >= 0
        return float((logits.argmax(-1)[counted] == labels[counted]).float().mean())

    start = agreement()
    for _ in range(120):
        loss = head.training_loss(batch)
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert agreement() > max(0.9, start + 0.3)
