"""tools.draft_vocabulary on the shipped heads: a head above 8 MB is saved in shards (head-01.safetensors...), as the
chat preset's EAGLE head is, and its draft vocabulary is read from them as from a head in one file."""

import json

import pytest

from specui.chat_draft import VOCABULARY
from specui.heads.common import load_state
from tests.helpers import ROOT
from tools.draft_vocabulary import main


@pytest.mark.parametrize("head", ["smollm2-heads/eagle", "bundled-heads/eagle"])  # in shards; in one file
def test_the_ids_written_are_the_heads(head, tmp_path, capsys):
    folder = ROOT / "assets" / head
    main([str(folder), str(tmp_path)])
    written = json.loads((tmp_path / VOCABULARY).read_text())
    assert written["token_ids"] == load_state(folder)["output.token_ids"].tolist()
    assert f"{len(written['token_ids'])} ids" in capsys.readouterr().out


def test_a_folder_that_is_no_head_is_refused_in_one_line(tmp_path):
    with pytest.raises(SystemExit, match="not a head folder"):
        main([str(tmp_path), str(tmp_path)])


def test_a_draft_folder_that_does_not_exist_is_refused_in_one_line(tmp_path):
    with pytest.raises(SystemExit, match="no-such-draft: no such folder"):  # was a FileNotFoundError's traceback
        main([str(ROOT / "assets" / "bundled-heads" / "eagle"), str(tmp_path / "no-such-draft")])
