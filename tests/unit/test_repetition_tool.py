"""tools.repetition: the repeated share of a reply's 4-grams per penalty, every drafter's output checked."""

import pytest

from tests.helpers import BUNDLED_TARGET
from tools.repetition import repeated


def test_repeated_counts_the_ngrams_seen_before():
    assert repeated([1, 2, 3, 4, 1, 2, 3, 4]) == 1 / 5  # (1, 2, 3, 4) again, of 5 4-grams
    assert repeated([7] * 6) == 2 / 3 and repeated([1, 2, 3]) == 0.0 and repeated(list(range(9))) == 0.0


@pytest.mark.slow
@pytest.mark.skipif(not BUNDLED_TARGET.exists(), reason="the bundled pair is built by python -m specui.train")
def test_the_stdlib_pair_repeats_less_with_a_penalty_and_stays_exact(capsys):
    from tools import repetition

    repetition.main(["--preset", "bundled", "--penalties", "1.0,1.5", "--drafters", "model,prompt_lookup",
                     "--tokens", "48", "--prompts", "2"])
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and all(line.endswith("identical to plain 4/4") for line in lines)
    shares = [float(line.split("reply ")[1].split()[0]) for line in lines]
    assert shares[1] < shares[0], lines
