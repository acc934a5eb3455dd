"""The served app in Chromium, once for every test file of this folder (package fixtures: the server and the browser
close once the folder's last test has run): `page`, the one page the files go on on in turn, and `fresh_page`, a page
of its own (a new gradio session) for a test that starts from the page as it opens."""

from __future__ import annotations

import pytest

from tests.helpers import open_page, served_browser, ui_config

VIEWPORT = {"width": 1400, "height": 1000}


@pytest.fixture(scope="package")
def site():
    """Chromium and the app on the bundled pair (and a preset that fails to load): yields (browser, the app's URL)."""
    with served_browser(ui_config(with_broken=True)) as (browser, url):
        yield browser, url


@pytest.fixture(scope="package")
def page(site):
    """The page the folder's files share, its scripts run; dialogs noted in `page.dialogs` (and dismissed) from before
    it loads, the default preset's name in `page.default_preset`."""
    page = open_page(*site, dialogs=True, viewport=VIEWPORT)
    page.default_preset = ui_config().default
    yield page
    page.context.close()


@pytest.fixture
def fresh_page(site):
    """A page of its own on the folder's server, nothing sent from it yet; closed after the test (its session ends)."""
    page = open_page(*site, viewport=VIEWPORT)
    yield page
    page.context.close()
