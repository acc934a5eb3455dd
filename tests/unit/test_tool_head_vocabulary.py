"""tools.head_vocabulary: a head's draft vocabulary cut to the ids the answers use most, its weights kept, and the
cut head still loads and drafts exactly."""

import json

import pytest
import torch
from safetensors.torch import load_file

from tests.helpers import make_config


def _answers(folder, streams):
    folder.mkdir(parents=True)
    records = [{"ids": torch.tensor([7, 7, *s]), "prompt_len": 2} for s in streams]  # 7: prompt tokens only
    torch.save(records, folder / "answers-00000.pt")


def test_the_most_used_ids_are_kept_and_the_weights_unchanged(tmp_path):
    from transformers import LlamaForCausalLM

    from specui import heads
    from specui.heads import early_exit
    from specui.heads.common import save
    from tools.head_vocabulary import main

    torch.manual_seed(0)
    target = LlamaForCausalLM(make_config("llama", vocab_size=64, layers=2)).eval()
    head = early_exit.build(target, token_ids=torch.tensor([1, 3, 5, 7, 9, 11]), exit_layer=1)
    with torch.no_grad():
        head.block.linear.weight.normal_()
    save(head, tmp_path / "head", facts={"preset": "test"})
    _answers(tmp_path / "answers", [[3, 3, 3, 9, 9, 11, 40], [9, 3, 1]])  # 3: 4 times, 9: 3, then 1 and 11 once

    main([str(tmp_path / "head"), "3", "--out", str(tmp_path / "cut"), "--answers", str(tmp_path / "answers")])
    before, after = load_file(tmp_path / "head" / "head.safetensors"), load_file(tmp_path / "cut" / "head.safetensors")
    assert after["output.token_ids"].tolist() == [1, 3, 9]  # the two most used, then the tie by id (1 before 11)
    assert all(torch.equal(before[k], after[k]) for k in before if k != "output.token_ids")
    meta = json.loads((tmp_path / "cut" / "specui_head.json").read_text())
    assert meta["vocabulary_cut"]["from"] == 6 and meta["vocabulary_cut"]["to"] == 3
    assert meta["vocabulary_cut"]["answer_tokens_covered"] == {"before": round(9 / 10, 4), "after": round(8 / 10, 4)}

    cut = heads.load(tmp_path / "cut", target)
    assert cut.output.token_ids.tolist() == [1, 3, 9] and cut.output._rows.shape[0] == 3
    with pytest.raises(SystemExit, match="SIZE"):
        main([str(tmp_path / "head"), "6", "--out", str(tmp_path / "cut2"), "--answers", str(tmp_path / "answers")])


def test_a_sharded_head_keeps_every_shard_and_cuts_the_ids_where_they_are(tmp_path):
    from safetensors.torch import save_file

    from tools.head_vocabulary import main

    (tmp_path / "head").mkdir()
    save_file({"layer.weight": torch.ones(4, 4)}, tmp_path / "head" / "head-01.safetensors")
    save_file({"output.token_ids": torch.tensor([2, 4, 6]), "fc.weight": torch.zeros(2, 2)},
              tmp_path / "head" / "head-02.safetensors")
    (tmp_path / "head" / "specui_head.json").write_text(json.dumps({"kind": "eagle"}))
    _answers(tmp_path / "answers", [[6, 6, 4]])
    main([str(tmp_path / "head"), "1", "--out", str(tmp_path / "cut"), "--answers", str(tmp_path / "answers")])
    assert torch.equal(load_file(tmp_path / "cut" / "head-01.safetensors")["layer.weight"], torch.ones(4, 4))
    second = load_file(tmp_path / "cut" / "head-02.safetensors")
    assert second["output.token_ids"].tolist() == [6] and torch.equal(second["fc.weight"], torch.zeros(2, 2))
