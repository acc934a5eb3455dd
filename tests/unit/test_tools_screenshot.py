"""tools.screenshot writes no picture of a run that ended in an error: it saved the page as it was (the error in the
chat, a toast over the settings) and said nothing, so a README screenshot taken while the app's run failed went in
as the app at work."""

import pytest

from tests.helpers import require_browser

pytestmark = [pytest.mark.slow, pytest.mark.browser]


def test_a_run_that_ends_in_an_error_writes_no_picture(tmp_path):
    require_browser()
    from tools.screenshot import screenshot

    config = tmp_path / "models.yaml"  # its one preset's model folder does not exist: the run says so in the chat
    config.write_text("default: broken\npresets:\n  broken:\n    target: ./no-such-model\n    drafter: prompt_lookup\n")
    picture = tmp_path / "shot.png"
    with pytest.raises(SystemExit, match="ended in an error, so no picture was written: .*no-such-model"):
        screenshot(str(picture), config_path=str(config), max_new_tokens=8)
    assert not picture.exists()
