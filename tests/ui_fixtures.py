"""Helpers shared by the UI tests: the bundled pair's config, and the app served in-process.

The UI tests run on the bundled pair (assets/specui-target, assets/specui-draft) and skip, saying
why, when it has not been built. SPECUI_UI_TEST_CONFIG points them at another models.yaml instead
(its default preset is used).
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import replace
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BUNDLED_TARGET = ROOT / "assets" / "specui-target" / "config.json"


def ui_config(*, with_broken: bool = False):
    """models.yaml for the UI tests; `with_broken` adds a preset whose model folder does not exist."""
    from specui.presets import Preset, load_config

    override = os.environ.get("SPECUI_UI_TEST_CONFIG")
    if not override and not BUNDLED_TARGET.exists():
        pytest.skip(f"the bundled pair is not built ({BUNDLED_TARGET.relative_to(ROOT)} is missing)")
    config = load_config(override or None)
    if with_broken:
        broken = Preset(name="broken", target=str(ROOT / "assets" / "no-such-model"), drafter="prompt_lookup",
                        description="a preset whose model folder is missing")
        config = replace(config, presets={**config.presets, "broken": broken})
    return config


@contextlib.contextmanager
def served_app(config):
    """The real app, launched in this process on a free port; yields its URL."""
    from specui.ui.blocks import build, launch
    from tools.screenshot import free_port

    demo = build(config, preload=False)
    port = free_port()
    launch(demo, server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True)
    try:
        yield f"http://127.0.0.1:{port}/"
    finally:
        demo.close()
