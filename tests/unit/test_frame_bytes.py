"""`python -m tools.frame_bytes`: a streamed reply's frames on the bundled pair go as appends, counted by gradio's own
diff (bytes, no time asserted)."""

import pytest

from tests.helpers import ui_config

pytestmark = pytest.mark.slow


def test_frame_bytes_counts_appends_and_bytes_a_frame(capsys):
    ui_config()  # skips where the bundled pair is not built
    from tools import frame_bytes

    off, on = frame_bytes.main(["--preset", "bundled", "--max-new-tokens", "12"])
    for row in (off, on):
        changed = row["frames"] - 1 - row["unchanged"]  # the first frame goes whole, a diff after it
        assert 0 < row["appends"] < changed  # the final frame (and compare's plain column) replace the message
        assert row["bytes_a_frame"] == round(row["bytes"] / row["frames"])
    assert not off["compare"] and on["compare"] and capsys.readouterr().out.count("\n") == 2
