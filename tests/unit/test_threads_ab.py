"""tools.threads_ab headless: product-thread settings side by side, short enough for a borrowed machine's last minute."""

import re


def test_a_short_headless_run_times_every_setting_and_checks_the_outputs(capsys):
    from tools import threads_ab

    threads_ab.main(["--preset", "bundled", "--arms", "1,2,2:0.2", "--prompts", "1", "--tokens", "8", "--passes", "1"])
    out = capsys.readouterr().out
    for arm in ("1", "2", "2:0.2"):  # 2:0.2: idle workers yield 0.2 ms before they sleep
        assert re.search(rf"SPECUI_PRODUCT_THREADS={arm}: plain [\d.]+ tokens/s, model [\d.]+ tokens/s", out), out
    assert "every output the same: True" in out
    from specui import native

    assert native.kernel().pool_yield() == 3e-3  # the default, after an arm that set another
