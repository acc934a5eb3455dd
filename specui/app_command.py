"""`specui-app`, the app's command where specui is installed (`pip install .`, `pip install -e .`): it runs the
app.py that lies beside specui's models.yaml (a clone's root, or an installed wheel's specui/shipped/), as
`python app.py` does in a clone, with the same options."""

from __future__ import annotations

import runpy

from specui.presets import DEFAULT_CONFIG


def main() -> int:
    app = runpy.run_path(str(DEFAULT_CONFIG.parent / "app.py"), run_name="specui_app")  # its functions, not run yet
    return app["main"]()  # after run_path put sys.argv[0] back: the usage and errors name specui-app
